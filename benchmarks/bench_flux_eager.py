"""How often kettle's Deepgram Flux EagerEndOfTurn is withdrawn (TurnResumed), on real speech.

Every clip of tests/data/speech goes, one after another, to an in-process server with the
real model over ``/v2/listen`` at real time (100 ms pieces), then 1.5 s of silence so its
last turn ends. Counted from what the client receives: turns (EndOfTurn), eager ends,
TurnResumed, and eager ends whose EndOfTurn kept the eager transcript (the client's early
reply would have stood): the counts that decide whether eager mode pays.

``--pace`` is wall seconds per second of audio: above 1 the audio comes slower than real
time, which stands for a faster decoder (an eager end needs the pause's speculative final
back before the end of turn is decided, so the figure depends on decode latency).

    python benchmarks/bench_flux_eager.py [--model tiny.en] [--eager 0.5] [--eot 0.7] [--pace 1]
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from kettle.streaming.server.server import KettleServer, ServerConfig
from kettle.transcribe.audio.read import RawFormat, load_audio
from kettle.transcribe.model.adapter import ModelConfig, WhisperAdapter
from websockets.asyncio.client import connect

SPEECH = Path(__file__).resolve().parents[1] / "tests" / "data" / "speech"
KEY = "bench"
PIECE_S = 0.1


async def one_clip(url: str, pcm: bytes, pace: float) -> dict[str, int]:
    counts = {"turns": 0, "eager": 0, "resumed": 0, "eager_kept": 0}
    async with connect(url, additional_headers={"Authorization": f"Token {KEY}"}) as ws:

        async def read() -> None:
            eager: str | None = None
            async for raw in ws:
                message = json.loads(raw)
                event = message.get("event")
                if event == "EagerEndOfTurn":
                    counts["eager"] += 1
                    eager = message["transcript"]
                elif event == "TurnResumed":
                    counts["resumed"] += 1
                    eager = None
                elif event == "EndOfTurn":
                    counts["turns"] += 1
                    if eager is not None and message["transcript"] == eager:
                        counts["eager_kept"] += 1
                    eager = None

        reader = asyncio.create_task(read())
        step = int(16000 * PIECE_S) * 2
        began = time.monotonic()
        for n, i in enumerate(range(0, len(pcm), step)):
            await ws.send(pcm[i : i + step])
            due = began + (n + 1) * PIECE_S * pace
            await asyncio.sleep(max(0.0, due - time.monotonic()))
        await ws.send(json.dumps({"type": "CloseStream"}))
        await asyncio.wait_for(reader, 120)
    return counts


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--eager", type=float, default=0.5)
    parser.add_argument("--eot", type=float, default=0.7)
    parser.add_argument("--pace", type=float, default=1.0)
    args = parser.parse_args()
    decoder = WhisperAdapter(ModelConfig(name=args.model, threads=2))
    server = KettleServer(ServerConfig(port=0, api_keys=(KEY,)), lambda: decoder)
    await server.start()
    url = (
        server.url.replace("http", "ws", 1) + "/v2/listen?model=flux-general-en"
        f"&encoding=linear16&sample_rate=16000&eager_eot_threshold={args.eager}"
        f"&eot_threshold={args.eot}"
    )
    total: dict[str, int] = {}
    with open(SPEECH / "manifest.tsv", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    try:
        for row in rows:
            raw = RawFormat(row["format"].split()[-1]) if row["format"].startswith("raw") else None
            audio = load_audio(SPEECH / row["file"], raw)
            audio = np.concatenate([audio, np.zeros(24000, dtype=np.float32)])
            pcm = (np.clip(audio, -1.0, 1.0) * 32767).astype("<i2").tobytes()
            counts = await one_clip(url, pcm, args.pace)
            print(row["file"], counts, flush=True)
            for key, value in counts.items():
                total[key] = total.get(key, 0) + value
    finally:
        await server.shutdown(timeout=10)
    eager = total.get("eager", 0)
    summary: dict[str, Any] = {
        "model": args.model,
        "eager_eot_threshold": args.eager,
        "eot_threshold": args.eot,
        "pace": args.pace,
        "clips": len(rows),
        **total,
        "resumed_rate": round(total.get("resumed", 0) / eager, 3) if eager else None,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    asyncio.run(main())
