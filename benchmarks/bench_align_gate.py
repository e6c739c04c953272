"""Where the file pipeline aligns words to look for skipped speech: the chars-per-second gate.

A first-pass window gets word alignment (and so the check for speech the model skipped) when
its text has fewer than ``PipelineConfig.recover_chars_per_s`` characters per second of
speech; ``recover_align_all`` aligns every window. This runs kettle's pipeline with several
gates and with every window aligned on bench_files' audio (the eval set joined, and the
10-minute recording), interleaved, each run on a cold encoder cache, best wall time kept.

    python benchmarks/bench_align_gate.py [--gates 11,17,20] [--repeats 2] [--quick]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _results
import bench_files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gates", default="11,17,20", help="recover_chars_per_s values")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="eval_concat only")
    parser.add_argument("--no-write", action="store_true", help="do not touch RESULTS.md")
    args = parser.parse_args()
    data_line = _results.require_eval_set(bench_files.EVAL)

    from kettle.transcribe.files.pipeline import PipelineConfig, transcribe_audio
    from kettle.transcribe.model.adapter import ModelConfig, WhisperAdapter

    clips, refs = bench_files.load_eval(False)
    audios = {"eval_concat": (bench_files.join(clips), refs)}
    if not args.quick:
        long_clips, long_refs = bench_files.repeat_to(clips, refs, bench_files.LONG_S)
        audios["eval_10min"] = (bench_files.join(long_clips), long_refs)
    model = WhisperAdapter(ModelConfig(name="tiny.en", device="cpu", threads=args.threads))
    configs = {f"gate {g:g}": PipelineConfig(recover_chars_per_s=g) for g in _gates(args.gates)}
    configs["align every window"] = PipelineConfig(recover_align_all=True)
    transcribe_audio(bench_files.join(clips[:3]), model, PipelineConfig())  # one-off set-up

    rows: list[dict[str, object]] = []
    for name, (audio, audio_refs) in audios.items():
        seconds = len(audio) / bench_files.SR
        best: dict[str, tuple[float, str]] = {}
        for _ in range(args.repeats):
            for label, config in configs.items():
                model.clear_encoder_cache()  # a repeat must not reuse the last run's encodings
                elapsed, text = bench_files.timed(
                    lambda a=audio, c=config: transcribe_audio(a, model, c).text  # type: ignore[misc]
                )
                if label not in best or elapsed < best[label][0]:
                    best[label] = (elapsed, text)
                print(f"{name} {label}: {elapsed:.2f} s", file=sys.stderr, flush=True)
        for label, (elapsed, text) in best.items():
            rows.append(
                {
                    "audio": name,
                    "audio_s": round(seconds, 1),
                    "setting": label,
                    "wall_s": round(elapsed, 2),
                    "audio_s_per_s": round(seconds / elapsed, 2),
                    "wer_pct": round(100 * bench_files.wer([" ".join(audio_refs)], [text]), 2),
                }
            )
    print(json.dumps({"machine": _results.machine_info(), "rows": rows}, indent=2))
    columns = ["audio", "audio_s", "setting", "wall_s", "audio_s_per_s", "wer_pct"]
    table = _results.markdown_table(rows, columns)
    print(table)
    if not args.no_write:
        default = PipelineConfig().recover_chars_per_s
        _results.write_section(
            "bench_align_gate",
            f"kettle's file pipeline, tiny.en int8 on cpu, {args.threads} threads, with words "
            "aligned where a window's text has fewer than N characters per second of speech "
            f"(`gate N`; the default is {default:g}) or in every window; best of "
            f"{args.repeats} interleaved runs, each on a cold encoder cache. WER as in "
            f"bench_files.\n\n{data_line}.\n\n" + table,
        )
    return 0


def _gates(text: str) -> list[float]:
    return [float(g) for g in text.split(",") if g.strip()]


if __name__ == "__main__":
    sys.exit(main())
