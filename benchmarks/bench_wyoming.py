"""Home Assistant's path: kettle's Wyoming server vs wyoming-faster-whisper (issue 41).

Needs the two peers from PyPI, outside kettle's extras (they pin their own faster-whisper and
wyoming): ``pip install wyoming-faster-whisper==3.8.1 wyoming-bench==2026.10.0``.

Both servers run in turn as subprocesses on 127.0.0.1, on the same tiny.en CTranslate2
folder (``resolve_model("tiny.en")``), int8, the same CPU threads:

- kettle: ``kettle serve --port 0 --wyoming tcp://127.0.0.1:PORT --model tiny.en
  --threads N`` (plus any ``--kettle-arg``);
- wyoming-faster-whisper (PyPI): ``python -m wyoming_faster_whisper --uri
  tcp://127.0.0.1:PORT --model <the tiny.en folder> --data-dir <a temp dir> --language en
  --compute-type int8 --cpu-threads N --local-files-only --stt-library faster-whisper``.

One client drives both, the ``wyoming`` library's ``AsyncTcpClient`` as Home Assistant uses
it: ``Describe`` on a connection of its own (the ``Info`` says whether the ASR program
streams), then for each clip a fresh connection with ``Transcribe(language="en")``,
``AudioStart`` (16 kHz, 16-bit, mono), ``AudioChunk``s of 100 ms paced in real time (a chunk
leaves once its audio would have been recorded: chunk k at k+1 tenths of a second after the
start) and ``AudioStop`` right after the last one. It reads events while it sends, until
``TranscriptStop`` where the ``Info`` announces ``supports_transcript_streaming`` (and once a
``TranscriptStart`` came), else until ``Transcript``. Each server gets one untimed clip first.

Per system:

- ``final_p50_s``, ``final_max_s``: ``Transcript`` received - ``AudioStop`` sent;
- ``first_chunk_p50_s``, ``first_chunk_max_s``: the first ``TranscriptChunk`` received -
  the wall time of the clip's speech onset. Onset: the clip's 30 ms frames, the first of 3
  in a row whose RMS is within 20 dB of its loudest frame's (plain webrtcvad hears nothing
  in the FLEURS clips that peak near -50 dBFS, and reads line noise as speech elsewhere);
- ``chunks`` (all clips), ``chunks_before_stop``, ``chunks_match``: clips whose concatenated
  chunks (``text += chunk.text``, as wyoming-bench reads them) hold the final's words;
  ``order_ok``: clips whose events came as TranscriptStart, chunks, Transcript,
  TranscriptStop (or a lone Transcript); ``stop_late_max_s``: how late the client itself sent
  an AudioStop against its schedule (more than a few ms: the machine was too busy);
- ``wer``: corpus WER of the finals, Whisper's English normaliser (bench_accuracy.wer).

Targets (issue 41): kettle's final P50 at most 0.5x wyoming-faster-whisper's, WER no worse,
every clip's first chunk within 2.5 s of its onset.

Clips: ``--clips N`` (10) English single-speaker eval clips of 3-15 s, FLEURS first (the
default 10 are the 10 FLEURS clips), then LibriSpeech, LibriVox, JFK, VCTK, ARCTIC, in
manifest order.

``--wyoming-bench`` also runs ``wyoming-bench stt`` (PyPI) against each server while it is up,
on the same clips written as WAV + TXT, with ``--config '{"language":"en"}' --mode both``
and its defaults otherwise: it times from the request, sends 1024-sample chunks as fast as
the socket takes them (plus 0.5 s of silence), scores with its own normaliser. Its figures
are reported as it prints them (Total = request to final result; TTFT = request to first
transcript-chunk, streaming mode only).

    python benchmarks/bench_wyoming.py [--clips 10] [--systems wfw,kettle] [--wyoming-bench]

Writes benchmarks/bench_wyoming.json and (without ``--no-write``) its RESULTS.md section.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import wave
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _clients import pcm16, words
from _results import eval_dir, machine_info, markdown_table, require_eval_set, write_section
from _serve import start_kettle, stop_server
from bench_accuracy import Item as Clip  # one clip: 16 kHz audio, what it says
from bench_accuracy import load_eval, wer

SR = 16000
CHUNK_S = 0.1
HOST = "127.0.0.1"
MODEL = "tiny.en"
SECTION = "bench_wyoming"
# English, one speaker each; FLEURS first, so the default 10 are the anchor clips.
CATEGORIES = (
    "fleurs", "librispeech", "librivox", "speech_pd", "vctk_accent", "arctic_accent",
)  # fmt: skip
MIN_S, MAX_S = 3.0, 15.0
ONSET_FRAME_MS, ONSET_RUN, ONSET_DB = 30, 3, -20.0
READ_TIMEOUT_S = 60.0
TARGET_RATIO, TARGET_FIRST_CHUNK_S = 0.5, 2.5
SYSTEMS = ("wfw", "kettle")


# --- clips and onsets ----------------------------------------------------------------------
def pick_clips(rows: Sequence[tuple[str, np.ndarray, str, str]], n: int) -> list[Clip]:
    """The first ``n`` rows (name, audio, reference, category) of 3-15 s in CATEGORIES, by
    category in CATEGORIES' order, then in the rows' order."""
    fits = [r for r in rows if r[3] in CATEGORIES and MIN_S <= len(r[1]) / SR <= MAX_S]
    fits.sort(key=lambda r: CATEGORIES.index(r[3]))  # stable: manifest order within each
    return [Clip(name, audio, ref) for name, audio, ref, _ in fits[:n]]


def first_run(flags: Sequence[bool], run: int) -> int | None:
    """Index of the first of ``run`` True flags in a row; None if there is no such run."""
    count = 0
    for i, flag in enumerate(flags):
        count = count + 1 if flag else 0
        if count == run:
            return i - run + 1
    return None


def speech_onset(
    audio: np.ndarray, *, frame_ms: int = ONSET_FRAME_MS, run: int = ONSET_RUN, db: float = ONSET_DB
) -> float:
    """Seconds into ``audio`` where its speech starts: the first of ``run`` frames in a row
    whose RMS is within ``db`` of the clip's loudest frame (scale-free: the eval set holds
    clips that peak near -50 dBFS); 0.0 for silence."""
    step = SR * frame_ms // 1000
    frames = audio[: len(audio) // step * step].astype(np.float64).reshape(-1, step)
    rms = np.sqrt(np.mean(np.square(frames), axis=1))
    if not rms.size or rms.max() <= 0:
        return 0.0
    start = first_run(list(rms >= rms.max() * 10 ** (db / 20)), run)
    return 0.0 if start is None else start * step / SR


# --- one clip through one server -----------------------------------------------------------
@dataclass
class Trial:
    """What the client saw for one clip; times are time.perf_counter() readings."""

    clip: str
    reference: str
    audio_s: float
    onset_s: float
    origin: float = 0.0  # the wall time of the clip's sample 0 (AudioStart sent)
    stop_sent: float | None = None
    transcript_at: float | None = None
    stop_at: float | None = None  # TranscriptStop received
    started: bool = False  # TranscriptStart received
    chunks: list[tuple[float, str]] = field(default_factory=list)
    events: str = ""  # what came, in order: S(tart) C(hunk) T(ranscript) P (stop)
    text: str = ""
    error: str = ""

    @property
    def final_s(self) -> float | None:
        """AudioStop sent -> Transcript received."""
        if self.stop_sent is None or self.transcript_at is None:
            return None
        return self.transcript_at - self.stop_sent

    @property
    def first_chunk_s(self) -> float | None:
        """Speech onset (wall time) -> first TranscriptChunk received."""
        return self.chunks[0][0] - (self.origin + self.onset_s) if self.chunks else None

    @property
    def stop_late_s(self) -> float | None:
        """How late the client sent AudioStop against its real-time schedule (a busy CPU)."""
        return None if self.stop_sent is None else self.stop_sent - self.origin - self.audio_s

    @property
    def order_ok(self) -> bool:
        """Events in the Wyoming README's order: TranscriptStart, chunks, Transcript, stop;
        or the Transcript alone."""
        return re.fullmatch(r"SC*TP|T", self.events) is not None

    @property
    def chunk_text(self) -> str:
        return "".join(text for _, text in self.chunks)

    def record(self) -> dict[str, Any]:
        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 3)

        before = self.stop_sent
        return {
            "clip": self.clip, "audio_s": round(self.audio_s, 2), "onset_s": r(self.onset_s),
            "final_s": r(self.final_s), "first_chunk_s": r(self.first_chunk_s),
            "chunks": len(self.chunks),
            "chunks_before_stop": sum(1 for t, _ in self.chunks if before and t < before),
            "chunk_times_s": [r(t - self.origin) for t, _ in self.chunks],
            "events": self.events, "stop_late_s": r(self.stop_late_s),
            "chunk_text": self.chunk_text, "text": self.text, "reference": self.reference,
            "error": self.error,
        }  # fmt: skip


async def describe(port: int, timeout: float = 5.0) -> Any:
    """The server's ``Info`` (wyoming.info.Info), or None where none came."""
    from wyoming.client import AsyncTcpClient
    from wyoming.info import Describe, Info

    client = AsyncTcpClient(HOST, port, connect_timeout=timeout, read_timeout=timeout)
    async with client:
        await client.write_event(Describe().event())
        while (event := await client.read_event()) is not None:
            if Info.is_type(event.type):
                return Info.from_event(event)
    return None


def streams(info: Any) -> bool:
    """Whether the first ASR program announces streaming transcripts."""
    return bool(info is not None and info.asr and info.asr[0].supports_transcript_streaming)


async def run_clip(port: int, clip: Clip, streaming: bool, onset_s: float) -> Trial:
    """One clip on a fresh connection, paced in real time; see the module's docstring."""
    from wyoming.asr import Transcribe, Transcript, TranscriptChunk, TranscriptStart, TranscriptStop
    from wyoming.audio import AudioChunk, AudioStart, AudioStop
    from wyoming.client import AsyncTcpClient
    from wyoming.error import Error

    trial = Trial(clip.name, clip.reference, clip.seconds, onset_s)
    client = AsyncTcpClient(HOST, port, connect_timeout=10.0, read_timeout=READ_TIMEOUT_S)

    async def read() -> None:
        while (event := await client.read_event()) is not None:
            now = time.perf_counter()
            if Error.is_type(event.type):
                trial.error = f"Error: {Error.from_event(event).text}"
                return
            if TranscriptStart.is_type(event.type):
                trial.started, trial.events = True, trial.events + "S"
            elif TranscriptChunk.is_type(event.type):
                trial.chunks.append((now, TranscriptChunk.from_event(event).text))
                trial.events += "C"
            elif Transcript.is_type(event.type):
                trial.transcript_at, trial.text = now, Transcript.from_event(event).text
                trial.events += "T"
                if not (streaming and trial.started):
                    return
            elif TranscriptStop.is_type(event.type):
                trial.stop_at, trial.events = now, trial.events + "P"
                return
        if trial.transcript_at is None:
            trial.error = "connection closed before the transcript"

    pcm = pcm16(clip.audio)
    step = int(CHUNK_S * SR) * 2
    fmt = {"rate": SR, "width": 2, "channels": 1}
    try:
        async with client:
            reader = asyncio.create_task(read())
            await client.write_event(Transcribe(language="en").event())
            await client.write_event(AudioStart(**fmt).event())
            trial.origin = time.perf_counter()
            for k, i in enumerate(range(0, len(pcm), step)):
                block = pcm[i : i + step]
                due = trial.origin + k * CHUNK_S + len(block) / 2 / SR  # once it is recorded
                await asyncio.sleep(max(0.0, due - time.perf_counter()))
                await client.write_event(AudioChunk(audio=block, **fmt).event())
            await client.write_event(AudioStop().event())
            trial.stop_sent = time.perf_counter()
            await asyncio.wait_for(reader, READ_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        trial.error = trial.error or f"{type(exc).__name__}: {exc}"
    return trial


# --- scoring -------------------------------------------------------------------------------
def p50_max(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    """Median and largest of the values that exist, in ms-rounded seconds."""
    got = [v for v in values if v is not None]
    return (round(statistics.median(got), 3), round(max(got), 3)) if got else (None, None)


def summarize(trials: Sequence[Trial]) -> dict[str, Any]:
    """One system's figures over its clips (see the module's docstring)."""
    final_p50, final_max = p50_max([t.final_s for t in trials])
    first_p50, first_max = p50_max([t.first_chunk_s for t in trials])
    records = [t.record() for t in trials]
    score = wer([(t.reference, t.text) for t in trials])
    return {
        "clips": len(trials),
        "audio_s": round(sum(t.audio_s for t in trials), 1),
        "final_p50_s": final_p50,
        "final_max_s": final_max,
        "first_chunk_p50_s": first_p50,
        "first_chunk_max_s": first_max,
        "clips_with_chunks": sum(1 for t in trials if t.chunks),
        "chunks": sum(len(t.chunks) for t in trials),
        "chunks_before_stop": sum(r["chunks_before_stop"] for r in records),
        "chunks_match": sum(1 for t in trials if t.chunks and words(t.chunk_text) == words(t.text)),
        "order_ok": sum(1 for t in trials if t.order_ok),
        "stop_late_max_s": p50_max([t.stop_late_s for t in trials])[1],
        "wer": None if score is None else round(100 * score, 2),
        "errors": sum(1 for t in trials if t.error),
    }


def targets(kettle: dict[str, Any], wfw: dict[str, Any]) -> dict[str, Any]:
    """Issue 41's targets, kettle against wyoming-faster-whisper on the same clips."""
    k50, w50 = kettle["final_p50_s"], wfw["final_p50_s"]
    ratio = k50 / w50 if k50 is not None and w50 else None
    first = kettle["first_chunk_max_s"]
    every_clip = kettle["clips_with_chunks"] == kettle["clips"]
    return {
        "final_p50_ratio": None if ratio is None else round(ratio, 3),
        "final_p50_ok": ratio is not None and ratio <= TARGET_RATIO,
        "wer_ok": kettle["wer"] is not None and wfw["wer"] is not None
        and kettle["wer"] <= wfw["wer"],
        "first_chunk_ok": every_clip and first is not None and first <= TARGET_FIRST_CHUNK_S,
    }  # fmt: skip


# --- wyoming-bench -------------------------------------------------------------------------
_BLOCK = re.compile(r"^\[(\w+)\] ok=(\d+) fail=(\d+)\s*$")
_SKIPPED = re.compile(r"^\s*\[(\w+)\] NOT SUPPORTED")
_ROW = re.compile(r"^\s+(Total \(ms\)|TTFT \(ms\)|RTF \(x\))\s+(.*)$")
_ACCURACY = re.compile(r"WER=(\S+)%?\s+CER=(\S+)\s+SAR=(\S+)")
_ROW_KEYS = {"Total (ms)": "total_ms", "TTFT (ms)": "ttft_ms", "RTF (x)": "rtf"}
_STATS = ("min", "mean", "median", "p95", "max")


def _number(cell: str) -> float | None:
    cell = cell.rstrip("%")
    return None if cell == "n/a" else float(cell)


def parse_wyoming_bench(output: str) -> dict[str, dict[str, Any]]:
    """wyoming-bench stt's per-server report, by mode: ok, fail, Total/TTFT (ms) and RTF as
    min/mean/median/p95/max, WER/CER/SAR in %; a mode it skipped: {"skipped": reason}."""
    modes: dict[str, dict[str, Any]] = {}
    mode: dict[str, Any] | None = None
    for line in output.splitlines():
        if skipped := _SKIPPED.match(line):
            modes[skipped.group(1)] = {"skipped": line.strip()}
        elif block := _BLOCK.match(line):
            mode = modes[block.group(1)] = {"ok": int(block.group(2)), "fail": int(block.group(3))}
        elif mode is not None and (row := _ROW.match(line)):
            cells = row.group(2).split()
            mode[_ROW_KEYS[row.group(1)]] = dict(zip(_STATS, map(_number, cells), strict=True))
        elif mode is not None and (acc := _ACCURACY.search(line)):
            mode.update(zip(("wer", "cer", "sar"), map(_number, acc.groups()), strict=True))
        elif line.startswith("=" * 20):  # the summary: the same figures again
            break
    return modes


def write_corpus(clips: Sequence[Clip], folder: Path) -> None:
    """The clips as wyoming-bench reads a corpus: NAME.wav (16 kHz s16 mono) + NAME.txt."""
    for i, clip in enumerate(clips):
        stem = folder / f"{i:02d}_{Path(clip.name).stem}"
        with wave.open(str(stem.with_suffix(".wav")), "wb") as wf:
            wf.setnchannels(1)
            wf.setsampwidth(2)
            wf.setframerate(SR)
            wf.writeframes(pcm16(clip.audio))
        stem.with_suffix(".txt").write_text(clip.reference + "\n", encoding="utf-8")


def run_wyoming_bench(port: int, corpus: Path, rounds: int) -> dict[str, Any]:
    """``wyoming-bench stt`` (its CLI, in this interpreter) against the server at ``port``."""
    args = [
        "stt", f"{HOST}:{port}", "--corpus", str(corpus), "--mode", "both",
        "--config", json.dumps({"language": "en"}), "--rounds", str(rounds),
    ]  # fmt: skip
    cmd = [sys.executable, "-m", "wyoming_bench.cli", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False)
    print(done.stdout, done.stderr, file=sys.stderr, flush=True)
    shown = shlex.join(["wyoming-bench", *args]).replace(str(corpus), "<the clips>")
    return {"command": shown, "rc": done.returncode, "modes": parse_wyoming_bench(done.stdout)}


# --- servers -------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def wait_for_info(port: int, proc: subprocess.Popen[Any], timeout_s: float = 300.0) -> Any:
    """Describe until the server answers; stops the benchmark if it exits or never does."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited ({proc.returncode}) before it answered Describe")
        with contextlib.suppress(OSError, TimeoutError):
            info = asyncio.run(describe(port, timeout=2.0))
            if info is not None:
                return info
        time.sleep(0.3)
    raise SystemExit(f"no Info from 127.0.0.1:{port} within {timeout_s:.0f} s")


@contextlib.contextmanager
def wfw_serving(
    model_dir: Path, threads: int, log: IO[str]
) -> Iterator[tuple[int, Any, list[str]]]:
    """wyoming-faster-whisper on a free port: (port, its Info, its command line)."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="wfw-data-") as data:
        cmd = [
            sys.executable, "-m", "wyoming_faster_whisper", "--uri", f"tcp://{HOST}:{port}",
            "--model", str(model_dir), "--data-dir", data, "--language", "en",
            "--compute-type", "int8", "--cpu-threads", str(threads), "--local-files-only",
            "--stt-library", "faster-whisper",
        ]  # fmt: skip
        proc = subprocess.Popen(cmd, stdout=log, stderr=log, text=True)
        try:
            shown = ["python", *cmd[1:]]
            yield port, wait_for_info(port, proc), [x.replace(data, "<temp dir>") for x in shown]
        finally:
            stop_server(proc)


@contextlib.contextmanager
def kettle_wyoming_serving(
    threads: int, extra: Sequence[str], log: IO[str]
) -> Iterator[tuple[int, Any, list[str]]]:
    """`kettle serve --wyoming` on a free port: (port, its Info, its serve arguments)."""
    port = free_port()
    args = [
        "--wyoming", f"tcp://{HOST}:{port}", "--model", MODEL, "--threads", str(threads), *extra,
    ]  # fmt: skip
    proc, _ = start_kettle(args, stderr=log)
    try:
        yield port, wait_for_info(port, proc), ["kettle", "serve", "--port", "0", *args]
    finally:
        stop_server(proc)


# --- main ----------------------------------------------------------------------------------
def measure(port: int, info: Any, clips: Sequence[Clip], onsets: Sequence[float]) -> list[Trial]:
    streaming = streams(info)
    asyncio.run(run_clip(port, clips[0], streaming, onsets[0]))  # untimed warm-up
    trials = []
    for clip, onset in zip(clips, onsets, strict=True):
        trial = asyncio.run(run_clip(port, clip, streaming, onset))
        print(
            f"  {clip.name}: final {trial.final_s} s, {len(trial.chunks)} chunks, "
            f"first {trial.first_chunk_s} s {trial.error}",
            file=sys.stderr, flush=True,
        )  # fmt: skip
        trials.append(trial)
    return trials


def info_record(info: Any) -> dict[str, Any]:
    asr = info.asr[0] if info is not None and info.asr else None
    if asr is None:
        return {}
    return {
        "program": asr.name, "version": asr.version,
        "supports_transcript_streaming": asr.supports_transcript_streaming,
        "models": [m.name for m in asr.models],
    }  # fmt: skip


def run_system(
    system: str,
    args: argparse.Namespace,
    model_dir: Path,
    clips: Sequence[Clip],
    onsets: Sequence[float],
    tmp: Path,
) -> dict[str, Any]:
    """One server up, the clips through it (and wyoming-bench), the server down."""
    extra = [x for arg in args.kettle_arg for x in shlex.split(arg)]
    bench = None
    with open(tmp / f"{system}.log", "w", encoding="utf-8") as log:
        serving = (
            wfw_serving(model_dir, args.threads, log)
            if system == "wfw"
            else kettle_wyoming_serving(args.threads, extra, log)
        )
        try:
            with serving as (port, info, command):
                trials = measure(port, info, clips, onsets)
                if args.wyoming_bench:
                    bench = run_wyoming_bench(port, tmp / "corpus", args.wb_rounds)
        except SystemExit:  # the server did not come up: show why
            log.flush()
            tail = (tmp / f"{system}.log").read_text(encoding="utf-8")[-3000:]
            print(f"{system} log:\n{tail}", file=sys.stderr, flush=True)
            raise
    return {
        "command": shlex.join(command).replace(str(model_dir), "<tiny.en folder>"),
        "info": info_record(info),
        "summary": summarize(trials),
        "per_clip": [t.record() for t in trials],
        **({"wyoming_bench": bench} if bench else {}),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--clips", type=int, default=10, help="eval clips (default 10: FLEURS)")
    p.add_argument("--systems", default=",".join(SYSTEMS), help="wfw,kettle (in this order)")
    p.add_argument("--threads", type=int, default=2, help="model CPU threads, both servers")
    p.add_argument("--kettle-arg", action="append", default=[], help="more `serve` options")
    p.add_argument("--wyoming-bench", action="store_true", help="also run wyoming-bench stt")
    p.add_argument("--wb-rounds", type=int, default=3, help="wyoming-bench --rounds (3)")
    p.add_argument("--eval-dir", type=Path, default=None, help="default: $KETTLE_EVAL_DIR")
    p.add_argument("--no-write", action="store_true", help="do not rewrite RESULTS.md")
    args = p.parse_args(argv)
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    if unknown := set(systems) - set(SYSTEMS):
        p.error(f"unknown systems {sorted(unknown)}; choose from {SYSTEMS}")
    path = eval_dir(args.eval_dir)
    data_line = require_eval_set(path)

    from kettle.transcribe.model.models import resolve_model

    model_dir = resolve_model(MODEL)
    clips = pick_clips(load_eval(path), args.clips)
    onsets = [speech_onset(c.audio) for c in clips]
    started = time.perf_counter()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-wyoming-") as tmp:
        (Path(tmp) / "corpus").mkdir()
        write_corpus(clips, Path(tmp) / "corpus")
        for system in systems:
            print(f"{system}:", file=sys.stderr, flush=True)
            results[system] = run_system(system, args, model_dir, clips, onsets, Path(tmp))
    result: dict[str, Any] = {
        "machine": machine_info(),
        "data": data_line,
        "model": MODEL,
        "threads": args.threads,
        "onset": f"first {ONSET_RUN} frames of {ONSET_FRAME_MS} ms in a row within "
        f"{-ONSET_DB:.0f} dB of the clip's loudest frame",
        "seconds": round(time.perf_counter() - started, 1),
        "systems": results,
    }
    if "kettle" in results and "wfw" in results:
        result["targets"] = targets(results["kettle"]["summary"], results["wfw"]["summary"])
    table = markdown_table(summary_rows(results), SUMMARY_COLUMNS)
    wb_table = markdown_table(wb_rows(results), WB_COLUMNS) if args.wyoming_bench else ""
    print(json.dumps(result, indent=2))
    print(table)
    print(wb_table)
    Path(__file__).with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    if not args.no_write:
        write_section(SECTION, section_body(data_line, result, table, wb_table))
    return 0


SUMMARY_COLUMNS = [
    "system", "clips", "final_p50_s", "final_max_s", "first_chunk_p50_s", "first_chunk_max_s",
    "chunks", "chunks_before_stop", "chunks_match", "order_ok", "wer", "errors",
]  # fmt: skip
WB_COLUMNS = [
    "system", "mode", "ok", "fail", "total_median_ms", "total_p95_ms", "ttft_median_ms",
    "ttft_p95_ms", "rtf_mean", "wer", "cer", "sar",
]  # fmt: skip


def shown(row: dict[str, object]) -> dict[str, object]:
    """A table row with n/a where a figure does not exist (no chunks, a skipped mode)."""
    return {k: "n/a" if v is None else v for k, v in row.items()}


def summary_rows(results: dict[str, Any]) -> list[dict[str, object]]:
    return [shown({"system": name, **r["summary"]}) for name, r in results.items()]


def wb_rows(results: dict[str, Any]) -> list[dict[str, object]]:
    """One row per system and wyoming-bench mode, its figures as it prints them."""
    rows: list[dict[str, object]] = []
    for name, r in results.items():
        for mode, m in sorted(r.get("wyoming_bench", {}).get("modes", {}).items()):
            if "skipped" in m:
                rows.append({"system": name, "mode": mode, "ok": "skipped (no streaming)"})
                continue
            total, ttft, rtf = (m.get(k) or {} for k in ("total_ms", "ttft_ms", "rtf"))
            rows.append(shown({
                "system": name, "mode": mode, "ok": m["ok"], "fail": m["fail"],
                "total_median_ms": total.get("median"), "total_p95_ms": total.get("p95"),
                "ttft_median_ms": ttft.get("median"), "ttft_p95_ms": ttft.get("p95"),
                "rtf_mean": rtf.get("mean"), "wer": m.get("wer"), "cer": m.get("cer"),
                "sar": m.get("sar"),
            }))  # fmt: skip
    return rows


def section_body(data_line: str, result: dict[str, Any], table: str, wb_table: str) -> str:
    t = result.get("targets")
    verdict = (
        f"Targets: kettle's final P50 {t['final_p50_ratio']}x wfw's (<= {TARGET_RATIO}: "
        f"{'met' if t['final_p50_ok'] else 'not met'}); WER no worse: "
        f"{'met' if t['wer_ok'] else 'not met'}; every first chunk within "
        f"{TARGET_FIRST_CHUNK_S} s of onset: {'met' if t['first_chunk_ok'] else 'not met'}.\n\n"
        if t
        else ""
    )
    firsts = [c["first_chunk_s"] for c in result["systems"].get("kettle", {}).get("per_clip", [])]
    late = sum(1 for f in firsts if f is None or f > TARGET_FIRST_CHUNK_S)
    per_clip = (
        "kettle's first chunk per clip (s): "
        + ", ".join("none" if f is None else f"{f:.2f}" for f in firsts)
        + f" ({late} of {len(firsts)} over {TARGET_FIRST_CHUNK_S} s).\n\n"
        if firsts
        else ""
    )
    wb = (
        "wyoming-bench stt (its own figures: times from the request, audio as fast as the "
        "socket takes it, its own normaliser; WER/CER/SAR in %):\n\n" + wb_table
        if wb_table
        else ""
    )
    return (
        f"{data_line}. One `AsyncTcpClient` drives both servers in turn on 127.0.0.1 "
        f"(tiny.en CTranslate2 int8, {result['threads']} threads): each clip on its own "
        "connection, 100 ms chunks paced in real time. final: AudioStop sent -> Transcript; "
        f"first chunk: speech onset ({result['onset']}) -> first TranscriptChunk; WER: "
        "Whisper's normaliser, %. See the script's docstring.\n\n"
        + table + "\n" + verdict + per_clip + wb
    )  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
