"""Files as whole processes: `kettle transcribe FILE` against a script that calls
faster-whisper's BatchedInferencePipeline on the same file, model, threads, beam and batch.

bench_files times the pipelines inside one warm process; this times what a user runs: a
fresh process that imports, loads the model and the VAD, decodes the file and writes text.
The files are bench_files' eval_concat (~344 s, the eval set joined) and eval_10min, written
as 16-bit WAV. Each command runs ``--repeats`` times, interleaved, best wall time kept; CPU
is the child's user + system time. WER as in bench_files. kettle runs with ``--no-cache``.

    python benchmarks/bench_cli.py [--threads 2] [--repeats 2] [--quick]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
import wave
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _results
import bench_files

BATCHED_SCRIPT = """
import sys
from faster_whisper import BatchedInferencePipeline, WhisperModel
path, model_dir, threads, beam, batch = sys.argv[1:6]
model = WhisperModel(model_dir, device="cpu", compute_type="int8", cpu_threads=int(threads))
pipeline = BatchedInferencePipeline(model=model)
segments, _ = pipeline.transcribe(path, beam_size=int(beam), batch_size=int(batch))
print(" ".join(s.text.strip() for s in segments))
"""


def write_wav(path: Path, audio: np.ndarray) -> None:
    pcm = (np.clip(audio, -1.0, 1.0) * 32767).astype("<i2")
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(bench_files.SR)
        out.writeframes(pcm.tobytes())


def run_timed(cmd: list[str]) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds (user + system) and stdout of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{cmd[:3]} failed ({done.returncode}): {done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--beam-size", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="eval_concat only")
    parser.add_argument("--no-write", action="store_true", help="do not touch RESULTS.md")
    args = parser.parse_args()
    data_line = _results.require_eval_set(bench_files.EVAL)
    from kettle.transcribe.model.models import resolve_model

    model_dir = str(resolve_model("tiny.en"))
    clips, refs = bench_files.load_eval(False)
    audios = {"eval_concat": (bench_files.join(clips), refs)}
    if not args.quick:
        long_clips, long_refs = bench_files.repeat_to(clips, refs, bench_files.LONG_S)
        audios["eval_10min"] = (bench_files.join(long_clips), long_refs)

    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "batched.py"
        script.write_text(BATCHED_SCRIPT)
        for name, (audio, audio_refs) in audios.items():
            path = Path(tmp) / f"{name}.wav"
            write_wav(path, audio)
            commands = {
                "kettle transcribe": [
                    sys.executable, "-m", "kettle.streaming.cli.main", "transcribe", str(path),
                    "--no-cache", "--threads", str(args.threads), "--device", "cpu",
                    "--beam-size", str(args.beam_size), "--batch-size", str(args.batch_size),
                ],
                "faster-whisper batched script": [
                    sys.executable, str(script), str(path), model_dir, str(args.threads),
                    str(args.beam_size), str(args.batch_size),
                ],
            }  # fmt: skip
            best: dict[str, tuple[float, float, str]] = {}
            for _ in range(args.repeats):
                for system, cmd in commands.items():
                    wall, cpu, text = run_timed(cmd)
                    print(f"{name} {system}: {wall:.2f} s", file=sys.stderr, flush=True)
                    if system not in best or wall < best[system][0]:
                        best[system] = (wall, cpu, text)
            seconds = len(audio) / bench_files.SR
            kettle_wall = best["kettle transcribe"][0]
            for system, (wall, cpu, text) in best.items():
                rows.append(
                    {
                        "audio": name,
                        "audio_s": round(seconds, 1),
                        "command": system,
                        "wall_s": round(wall, 2),
                        "cpu_s": round(cpu, 2),
                        "audio_s_per_s": round(seconds / wall, 2),
                        "kettle_speed_ratio": round(wall / kettle_wall, 2),
                        "wer_pct": round(100 * bench_files.wer([" ".join(audio_refs)], [text]), 2),
                    }
                )

    result = {
        "benchmark": "bench_cli",
        "data": data_line,
        "settings": vars(args),
        "machine": _results.machine_info(),
        "rows": rows,
    }
    print(json.dumps(result, indent=2))
    columns = ["audio", "audio_s", "command", "wall_s", "cpu_s", "audio_s_per_s",
               "kettle_speed_ratio", "wer_pct"]  # fmt: skip
    table = _results.markdown_table(rows, columns)
    print(table)
    if not args.no_write:
        body = (
            f"Whole processes, each timed from start to exit (imports, model and VAD load, "
            f"decode, output): `kettle transcribe FILE --no-cache` with default options, and a "
            f"script calling faster-whisper's `BatchedInferencePipeline.transcribe(FILE)`; "
            f"tiny.en int8 on cpu, {args.threads} threads, beam {args.beam_size}, batch "
            f"{args.batch_size}, best of {args.repeats} interleaved runs. cpu_s: the child's "
            "user + system time. kettle_speed_ratio = the row's wall time / kettle's. WER as "
            f"in bench_files.\n\n{data_line}.\n\n" + table
        )
        _results.write_section("bench_cli", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
