"""Event-loop lag of `kettle serve` with N real-time streams (fake model, real VAD).

The server exports how late its event loop wakes a sleeping task
(`kettle_event_loop_lag_seconds`); this runs N honest real-time WebSocket clients against
`kettle serve --fake-model` (so the model costs nothing and what is left is the server's own
work on the loop: framing, PCM decoding, VAD, session, JSON) and reads the lag's P99 from the
histogram. A control process next to it runs nothing but the same lag monitor on an idle
loop: on a shared machine, the control's lag is what the operating system alone costs, and
the server's lag above it is the server's.

    python benchmarks/bench_loop_lag.py [--streams 16] [--seconds 60]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import markdown_table, write_section
from kettle.streaming.client import ClientOptions, stream_audio
from soak import histogram_quantile, honest_track, load_speech, metric, scrape, start_server

CONTROL = """
import asyncio, json, sys
from kettle.streaming.looplag import LagWindow, LoopLagMonitor

async def main(seconds):
    window = LagWindow(100_000)
    monitor = LoopLagMonitor(window.add)
    monitor.start()
    await asyncio.sleep(seconds)
    await monitor.stop()
    print(json.dumps({"p50": window.quantile(0.5), "p99": window.quantile(0.99),
                      "max": window.worst, "samples": window.count}))

asyncio.run(main(float(sys.argv[1])))
"""


async def clients(ws_url: str, tracks: list[Any]) -> list[Any]:
    options = ClientOptions(url=ws_url, realtime=True, chunk_ms=100, done_timeout_s=120)
    return list(await asyncio.gather(*(stream_audio(t, options) for t in tracks)))


def measure(args: argparse.Namespace) -> dict[str, Any]:
    proc, base = start_server(args)
    try:
        ws_url = base.replace("http", "ws", 1) + "/v1/stream"
        clips = load_speech(args)
        tracks = [honest_track(clips, i, args.seconds) for i in range(args.streams)]
        before = scrape(base)
        control = subprocess.Popen(
            [sys.executable, "-c", CONTROL, str(args.seconds)], stdout=subprocess.PIPE, text=True
        )
        started = time.monotonic()
        results = asyncio.run(clients(ws_url, tracks))
        wall = time.monotonic() - started
        after = scrape(base)
        out, _ = control.communicate(timeout=120)
        ctl = json.loads(out)
    finally:
        proc.terminate()
        proc.wait(30)
    count = metric(after, "kettle_event_loop_lag_seconds_count") - metric(
        before, "kettle_event_loop_lag_seconds_count"
    )
    total = metric(after, "kettle_event_loop_lag_seconds_sum") - metric(
        before, "kettle_event_loop_lag_seconds_sum"
    )
    within = {}
    for bound in ("0.005", "0.01", "0.02", "0.05"):
        key = ("kettle_event_loop_lag_seconds_bucket", (("le", bound),))
        within[bound] = (after.get(key, 0.0) - before.get(key, 0.0)) / count if count else None
    return {
        "streams": args.streams,
        "seconds": round(wall, 1),
        "finals": sum(len(r.finals) for r in results),
        "server_lag_samples": int(count),
        "server_lag_mean_ms": 1000 * total / count if count else None,
        "server_lag_p99_bucket_s": histogram_quantile(
            before, after, "kettle_event_loop_lag_seconds", 0.99
        ),
        "server_share_within_s": within,
        "control_lag_p50_ms": 1000 * ctl["p50"],
        "control_lag_p99_ms": 1000 * ctl["p99"],
        "control_lag_max_ms": 1000 * ctl["max"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--audio", nargs="*", default=None)
    parser.add_argument(
        "--model", default="fake", help="fake (default: the server's own work only) or tiny.en"
    )
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    args.fake_model = args.model == "fake"
    result = measure(args)
    print(json.dumps(result))
    rows = [{"figure": k, "value": v} for k, v in result.items()]
    table = markdown_table(rows, ["figure", "value"])
    print(table)
    if not args.no_write:
        write_section(
            "loop_lag",
            f"{args.streams} real-time streams against `kettle serve --fake-model` (real VAD). "
            "`server_lag_p99_bucket_s` is the upper bound of the histogram bucket holding the "
            "P99; `server_share_within_s` is the share of wake-ups within each bound. The "
            "control is an idle asyncio loop running the same monitor at the same time: on this "
            "shared machine (other jobs running) it shows what the operating system alone "
            "costs.\n\n" + table,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
