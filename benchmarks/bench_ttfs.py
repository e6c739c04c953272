"""Time to final segment (TTFS), the way Pipecat's stt-benchmark measures it, on kettle.

Pipecat's stt-benchmark (github.com/pipecat-ai/stt-benchmark) times a voice agent's wait: one
connection per sample, audio streamed in real time, the client's VAD stopping 0.2 s after the
end of speech and asking for the final at once (Deepgram ``Finalize``, OpenAI Realtime
``input_audio_buffer.commit`` with turn detection off). TTFS runs from the end of speech to
the final transcript's arrival. Its table: transcripts, perfect, WER mean, pooled WER, TTFS
median / P95 / P99.

Here:

- samples: the eval set's clips up to ``--max-s`` seconds (voice turns, not lectures), each
  after 0.5 s of silence and followed by silence that keeps streaming (as a microphone does)
  until the final comes;
- the end of speech: the end of the clip's last speech segment by Silero VAD (faster-whisper's),
  on the audio clock; its wall time is when that sample would have been recorded;
- ``--surface deepgram``: ``/v1/listen`` with interim results; the final is the Results with
  ``from_finalize``. ``--surface openai``: ``/v1/realtime?intent=transcription`` with turn
  detection none; the final is ``...input_audio_transcription.completed``;
- ``--surface endpoint``: no Finalize at all, ``endpointing=25`` (what a LiveKit agent session
  asks of its Deepgram plugin, which never flushes): the final is the first ``speech_final``
  Results after the end of speech, so kettle's own endpoint decides. Interim counts are kept,
  since the late-final run in issue 25 had few.

Raw WebSocket clients (``websockets``), the protocols' documented messages: timing is the
server's, not a framework's. Usage (a quiet machine: ``echo -10 > /proc/self/autogroup``):

    python benchmarks/bench_ttfs.py --surface deepgram --surface openai [--runs 2]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import csv
import json
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import eval_dir, machine_info, markdown_table, require_eval_set, write_section
from _serve import kettle_serving

SR = 16000
CHUNK_S = 0.02  # the client's frames: 20 ms, as the frameworks send them
LEAD_S = 0.5
STOP_S = 0.2  # the client VAD's stop_secs: Finalize / commit this long after speech ends
WAIT_S = 5.0  # a final later than this counts as missing
SURFACES = ("deepgram", "openai", "endpoint")


@dataclass
class Sample:
    name: str
    audio: np.ndarray  # 16 kHz mono float32, lead silence included
    reference: str
    speech_end_s: float  # on the sample's audio clock


@dataclass
class Outcome:
    name: str
    ttfs_s: float | None  # None: no final within WAIT_S
    text: str
    interims: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def load_samples(path: Path, max_s: float, limit: int | None) -> list[Sample]:
    from faster_whisper.vad import VadOptions, get_speech_timestamps
    from kettle.transcribe.audio.read import load_audio

    samples = []
    with open(path / "manifest.tsv", newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            if float(row["duration_s"]) > max_s or not row["file"].endswith((".wav", ".flac")):
                continue
            clip = load_audio(path / row["file"])
            speech = get_speech_timestamps(clip, VadOptions(min_silence_duration_ms=300))
            if not speech:
                continue
            lead = np.zeros(int(LEAD_S * SR), np.float32)
            end = LEAD_S + speech[-1]["end"] / SR
            samples.append(
                Sample(
                    Path(row["file"]).name, np.concatenate([lead, clip]), row["reference_text"], end
                )
            )
            if limit is not None and len(samples) >= limit:
                break
    return samples


def pcm16(audio: np.ndarray) -> bytes:
    return (np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes()


async def stream_sample(
    sample: Sample, send: Any, finalize: Any, rate: int, done: asyncio.Event
) -> float:
    """Send ``sample`` in real time (then silence until ``done``), ``finalize()`` at the end
    of speech + STOP_S; returns the wall time of the end of speech."""
    from kettle.kernels.resample import resample

    audio = sample.audio if rate == SR else resample(sample.audio, SR, rate)
    step = int(CHUNK_S * rate)
    silence = pcm16(np.zeros(step, np.float32))
    start = time.monotonic()
    finalize_at = sample.speech_end_s + STOP_S
    finalized = False
    k = 0
    while not done.is_set() and k * CHUNK_S < sample.speech_end_s + WAIT_S:
        delay = start + (k + 1) * CHUNK_S - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)  # a chunk goes once it would have been recorded
        piece = audio[k * step : (k + 1) * step]
        await send(pcm16(piece) if len(piece) == step else silence)
        k += 1
        if finalize is not None and not finalized and k * CHUNK_S >= finalize_at:
            await finalize()
            finalized = True
    return start + sample.speech_end_s


async def deepgram(base: str, sample: Sample, *, endpoint: bool) -> Outcome:
    import websockets

    query = "model=nova-3&encoding=linear16&sample_rate=16000&interim_results=true"
    query += "&endpointing=25&vad_events=true" if endpoint else ""
    url = base.replace("http", "ws", 1) + "/v1/listen?" + query
    done = asyncio.Event()
    async with websockets.connect(url, additional_headers={"Authorization": "Token bench"}) as ws:

        async def finalize() -> None:
            await ws.send(json.dumps({"type": "Finalize"}))

        sender = asyncio.create_task(
            stream_sample(sample, ws.send, None if endpoint else finalize, SR, done)
        )
        finals: list[str] = []
        interims, arrived = 0, None
        deadline = time.monotonic() + sample.audio.shape[0] / SR + WAIT_S + 1
        while arrived is None and time.monotonic() < deadline:
            try:
                raw = await asyncio.wait_for(ws.recv(), 0.5)
            except TimeoutError:
                continue
            msg = json.loads(raw)
            if msg.get("type") != "Results":
                continue
            text = msg["channel"]["alternatives"][0]["transcript"]
            if not msg["is_final"]:
                interims += 1
                continue
            if text:
                finals.append(text)
            last = msg["from_finalize"] if not endpoint else msg["speech_final"]
            ends_after = msg["start"] + msg["duration"] >= sample.speech_end_s - 0.3
            if last and (ends_after or not endpoint):
                arrived = time.monotonic()
        done.set()
        speech_end = await sender
        await ws.send(json.dumps({"type": "CloseStream"}))
    ttfs = None if arrived is None else arrived - speech_end
    return Outcome(sample.name, ttfs, " ".join(finals), interims)


async def openai(base: str, sample: Sample) -> Outcome:
    import websockets

    url = base.replace("http", "ws", 1) + "/v1/realtime?intent=transcription"
    done = asyncio.Event()
    async with websockets.connect(url, additional_headers={"Authorization": "Bearer bench"}) as ws:
        session = {
            "type": "transcription",
            "audio": {
                "input": {
                    "format": {"type": "audio/pcm", "rate": 24000},
                    "turn_detection": None,
                    "transcription": {"model": "gpt-4o-transcribe"},
                }
            },
        }
        await ws.send(json.dumps({"type": "session.update", "session": session}))

        async def send(chunk: bytes) -> None:
            audio = base64.b64encode(chunk).decode()
            await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": audio}))

        async def commit() -> None:
            await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))

        sender = asyncio.create_task(stream_sample(sample, send, commit, 24000, done))
        text, deltas, arrived = "", 0, None
        deadline = time.monotonic() + sample.audio.shape[0] / SR + WAIT_S + 1
        while arrived is None and time.monotonic() < deadline:
            try:
                msg = json.loads(await asyncio.wait_for(ws.recv(), 0.5))
            except TimeoutError:
                continue
            kind = msg.get("type", "")
            if kind.endswith("input_audio_transcription.delta"):
                deltas += 1
            elif kind.endswith("input_audio_transcription.completed"):
                text, arrived = msg.get("transcript", ""), time.monotonic()
            elif kind == "error":
                print(f"{sample.name}: {msg}", file=sys.stderr)
        done.set()
        speech_end = await sender
    ttfs = None if arrived is None else arrived - speech_end
    return Outcome(sample.name, ttfs, text, deltas)


def score(outcomes: list[Outcome], samples: list[Sample]) -> dict[str, Any]:
    import jiwer
    from whisper_normalizer.english import EnglishTextNormalizer

    norm = EnglishTextNormalizer()
    refs = {s.name: norm(s.reference) for s in samples}
    got = [o for o in outcomes if o.ttfs_s is not None]
    wers = [jiwer.wer(refs[o.name], norm(o.text) or "<empty>") for o in outcomes]
    pooled = jiwer.wer(
        [refs[o.name] for o in outcomes], [norm(o.text) or "<empty>" for o in outcomes]
    )
    ttfs = sorted(o.ttfs_s for o in got if o.ttfs_s is not None)
    ms = lambda q: round(1000 * float(np.percentile(ttfs, q))) if ttfs else None  # noqa: E731
    return {
        "samples": len(outcomes),
        "transcripts": round(100 * len(got) / len(outcomes), 1),
        "perfect": round(100 * sum(w == 0 for w in wers) / len(wers), 1),
        "wer_mean": round(100 * statistics.fmean(wers), 2),
        "pooled_wer": round(100 * pooled, 2),
        "ttfs_median_ms": ms(50),
        "ttfs_p95_ms": ms(95),
        "ttfs_p99_ms": ms(99),
        "ttfs_max_ms": round(1000 * ttfs[-1]) if ttfs else None,
        "interims_per_sample": round(statistics.fmean(o.interims for o in outcomes), 1),
    }


async def run_surface(base: str, surface: str, samples: list[Sample]) -> list[Outcome]:
    outcomes = []
    for sample in samples:
        if surface == "openai":
            outcome = await openai(base, sample)
        else:
            outcome = await deepgram(base, sample, endpoint=surface == "endpoint")
        outcomes.append(outcome)
        shown = "missing" if outcome.ttfs_s is None else f"{1000 * outcome.ttfs_s:.0f} ms"
        print(f"{surface} {sample.name}: {shown}, {outcome.interims} interims", file=sys.stderr)
    return outcomes


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--surface",
        action="append",
        choices=SURFACES,
        help="repeatable (default: deepgram, openai)",
    )
    p.add_argument("--runs", type=int, default=1, help="full passes, each on a fresh server")
    p.add_argument("--max-s", type=float, default=12.0, help="longest clip used (seconds)")
    p.add_argument("--limit", type=int, default=None, help="at most this many samples")
    p.add_argument(
        "--model", default=None, help="kettle serve --model (default: the embedded tiny.en)"
    )
    p.add_argument("--serve-arg", action="append", default=[], help="more `kettle serve` arguments")
    p.add_argument("--no-write", action="store_true", help="do not rewrite RESULTS.md")
    args = p.parse_args(argv)
    surfaces = args.surface or ["deepgram", "openai"]
    path = eval_dir()
    data_line = require_eval_set(path)
    samples = load_samples(path, args.max_s, args.limit)
    serve = [*(["--model", args.model] if args.model else []), *args.serve_arg]
    rows, runs = [], []
    for run in range(args.runs):
        with kettle_serving(serve) as (_, base):
            for surface in surfaces:
                outcomes = asyncio.run(run_surface(base, surface, samples))
                row = {"surface": surface, "run": run + 1, **score(outcomes, samples)}
                rows.append(row)
                runs.append({**row, "outcomes": [o.__dict__ for o in outcomes]})
    columns = [
        "surface", "run", "samples", "transcripts", "perfect", "wer_mean", "pooled_wer",
        "ttfs_median_ms", "ttfs_p95_ms", "ttfs_p99_ms", "ttfs_max_ms", "interims_per_sample",
    ]  # fmt: skip
    table = markdown_table(rows, columns)
    info = machine_info()
    print(json.dumps({"machine": info, "rows": rows}, indent=2))
    print(table)
    Path(__file__).with_suffix(".json").write_text(
        json.dumps({"machine": info, "runs": runs}, indent=2)
    )
    if not args.no_write:
        body = (
            f"{data_line}; clips up to {args.max_s:g} s: {len(samples)} samples.\n\n"
            "Pipecat stt-benchmark's method: real-time 20 ms frames, Finalize (Deepgram) or\n"
            f"commit (OpenAI Realtime, turn detection none) {STOP_S} s after the end of speech\n"
            "(Silero VAD); TTFS from the end of speech to the final. `endpoint`: no Finalize,\n"
            "endpointing=25 (a LiveKit agent session's Deepgram plugin): kettle's endpoint\n"
            "decides. WER: whisper normalizer, per sample (mean) and pooled; perfect: samples\n"
            "at 0 %.\n\n" + table
        )
        write_section("bench_ttfs", body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
