"""What the VAD and session cost on the event loop, per 100 ms audio message.

The server feeds each audio message to its session on the event loop: webrtcvad (twice:
plain and level-normalised), the SNR and spectral-flatness checks, the segmenter and the
decode-request bookkeeping. This measures that call on real speech, in CPU time of the
calling thread (so other jobs on a shared machine do not inflate it) and in wall time, and
works out the share of one core 16 real-time streams take and the longest single call (what
one stream can delay the others by).

    python benchmarks/bench_vad_cost.py [--seconds 120]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import markdown_table, write_section

ROOT = Path(__file__).resolve().parents[1]
CHUNK = 1600  # 100 ms at 16 kHz


def measure(seconds: float) -> dict[str, float]:
    from kettle.streaming.core.session import Session, SessionConfig
    from kettle.transcribe.audio.read import load_audio
    from kettle.transcribe.model.fake import FakeDecoder

    speech = load_audio(ROOT / "tests" / "data" / "jfk.flac")
    reps = int(np.ceil(seconds * 16000 / len(speech)))
    audio = np.tile(speech, reps)[: int(seconds * 16000)]
    session = Session(SessionConfig(), session_id="bench")
    decoder = FakeDecoder()
    cpu, wall = [], []
    for pos in range(0, len(audio), CHUNK):
        c0, w0 = time.thread_time(), time.perf_counter()
        session.feed_audio(audio[pos : pos + CHUNK])
        requests = session.poll_requests()
        session.poll_events()
        cpu.append(time.thread_time() - c0)
        wall.append(time.perf_counter() - w0)
        for request in requests:  # answered off the clock, as the engine's thread would
            session.on_result(decoder.decode_batch([request])[0])
    cpu_ms, wall_ms = np.array(cpu) * 1e3, np.array(wall) * 1e3
    return {
        "audio_s": seconds,
        "messages": len(cpu),
        "cpu_ms_p50": float(np.percentile(cpu_ms, 50)),
        "cpu_ms_p99": float(np.percentile(cpu_ms, 99)),
        "cpu_ms_max": float(cpu_ms.max()),
        "cpu_ms_mean": float(cpu_ms.mean()),
        "wall_ms_p50": float(np.percentile(wall_ms, 50)),
        "wall_ms_p99": float(np.percentile(wall_ms, 99)),
        # 16 streams send 160 messages a second.
        "core_share_16_streams": float(cpu_ms.mean() * 160 / 1000),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    result = measure(args.seconds)
    print(json.dumps(result))
    rows = [{"figure": k, "value": v} for k, v in result.items()]
    table = markdown_table(rows, ["figure", "value"])
    print(table)
    if not args.no_write:
        write_section(
            "vad_cost",
            "Per 100 ms audio message, session.feed_audio + polling on real speech (jfk.flac "
            "looped). CPU time is the calling thread's own; wall time includes preemption by "
            "other jobs (the machine was shared).\n\n" + table,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
