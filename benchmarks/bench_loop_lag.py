"""Event-loop lag of `kettle serve` with N real-time streams.

The server exports how late its event loop wakes a sleeping task
(`kettle_event_loop_lag_seconds`); this runs N honest real-time WebSocket clients against
`kettle serve` and reads the lag's P99 from the histogram. With `--model fake` (the default)
the model costs nothing and what is left is the server's own work on the loop: framing, PCM
decoding, VAD, session, JSON; with `--model tiny.en` the model's threads compete for the CPU
too. A control process next to it runs nothing but the same lag monitor on an idle loop: on
a shared machine, the control's lag is what the operating system alone costs, and the
server's lag above it is the server's.

Variants (`--variant "ARGS"`, repeatable: extra `kettle serve` arguments) are compared in
one run: one server each, started together, the streams going to each in turn for
`--seconds`, `--rounds` times, so load from other jobs hits every variant alike.

    python benchmarks/bench_loop_lag.py [--streams 16] [--seconds 60]
    python benchmarks/bench_loop_lag.py --model tiny.en --seconds 30 --rounds 3 \\
        --variant "--model-nice 0" --variant "--model-nice 5"
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import markdown_table, write_section
from kettle.streaming.client.client import ClientOptions, stream_audio
from soak import histogram_quantile, honest_track, load_speech, metric, scrape, start_server

BOUNDS = ("0.005", "0.01", "0.02", "0.05")

CONTROL = """
import asyncio, json, sys
from kettle.streaming.server.looplag import LagWindow, LoopLagMonitor

async def main(seconds):
    window = LagWindow(100_000)
    monitor = LoopLagMonitor(window.add)
    monitor.start()
    await asyncio.sleep(seconds)
    await monitor.stop()
    print(json.dumps({"samples": window.samples()}))

asyncio.run(main(float(sys.argv[1])))
"""

Samples = dict[Any, float]
# The server's metrics before and after, the control's lags, final lags, streams that failed
Phase = tuple[Samples, Samples, list[float], list[float], int]


async def clients(ws_url: str, tracks: list[Any]) -> list[Any]:
    """Each stream's result, or its exception (a server too busy to answer `stop` in time)."""
    options = ClientOptions(url=ws_url, realtime=True, chunk_ms=100, done_timeout_s=120)
    streams = (stream_audio(t, options) for t in tracks)
    return list(await asyncio.gather(*streams, return_exceptions=True))


def phase(base: str, tracks: list[Any], seconds: float) -> Phase:
    """One variant's turn: the streams, the server's metrics before and after, the control's
    lag samples and the streams' final lags (from the audio's end to the final's arrival)."""
    ws_url = base.replace("http", "ws", 1) + "/v1/stream"
    before = scrape(base)
    control = subprocess.Popen(
        [sys.executable, "-c", CONTROL, str(seconds)], stdout=subprocess.PIPE, text=True
    )
    results = asyncio.run(clients(ws_url, tracks))
    after = scrape(base)
    out, _ = control.communicate(timeout=120)
    done = [r for r in results if not isinstance(r, BaseException)]
    lags = [
        at - (r.audio_start + m["end"])
        for r in done
        for m, at in r.received
        if m["type"] == "final"
    ]
    return before, after, json.loads(out)["samples"], lags, len(results) - len(done)


def summarize(variant: str, phases: list[Phase], wall: float) -> dict[str, Any]:
    """The server's lag over every phase of one variant (histogram deltas added up)."""
    before: Samples = {}
    after: Samples = {}
    for b, a, *_ in phases:  # sum of deltas: a pseudo "before" of 0 and "after" of the sum
        for key, value in a.items():
            if key[0].startswith("kettle_event_loop_lag_seconds"):
                after[key] = after.get(key, 0.0) + value - b.get(key, 0.0)
    count = metric(after, "kettle_event_loop_lag_seconds_count")
    total = metric(after, "kettle_event_loop_lag_seconds_sum")
    control = sorted(s for _, _, c, *_ in phases for s in c)
    final_lags = sorted(lag for _, _, _, lags, _ in phases for lag in lags)
    within = {}
    for bound in BOUNDS:
        key = ("kettle_event_loop_lag_seconds_bucket", (("le", bound),))
        server_share = after.get(key, 0.0) / count if count else None
        control_share = sum(s <= float(bound) for s in control) / len(control) if control else None
        within[bound] = {"server": _round(server_share), "control": _round(control_share)}
    return {
        "variant": variant or "(defaults)",
        "seconds": round(wall, 1),
        "finals": len(final_lags),
        "streams_failed": sum(p[4] for p in phases),
        "final_lag_p50_s": _round(_quantile(final_lags, 0.5)),
        "final_lag_p95_s": _round(_quantile(final_lags, 0.95)),
        "server_lag_samples": int(count),
        "server_lag_mean_ms": _round(1000 * total / count if count else None),
        "server_lag_p99_bucket_s": histogram_quantile(
            before, after, "kettle_event_loop_lag_seconds", 0.99
        ),
        "share_within_s": within,
        "control_lag_p50_ms": _round(1000 * _quantile(control, 0.5)),
        "control_lag_p99_ms": _round(1000 * _quantile(control, 0.99)),
        "control_lag_max_ms": _round(1000 * control[-1] if control else None),
    }


def _quantile(ordered: list[float], q: float) -> float:
    """Nearest rank, as LagWindow.quantile."""
    return ordered[max(1, math.ceil(q * len(ordered))) - 1] if ordered else 0.0


def _pair(share: dict[str, dict[str, float | None]], who: str) -> str:
    return f"{share['0.005'][who]} / {share['0.02'][who]}"


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    variants = args.variant or [""]
    servers = [start_server(args, tuple(shlex.split(v))) for v in variants]
    load_start = os.getloadavg()
    try:
        clips = load_speech(args)
        tracks = [honest_track(clips, i, args.seconds) for i in range(args.streams)]
        phases: list[list[Any]] = [[] for _ in variants]
        walls = [0.0 for _ in variants]
        for _ in range(args.rounds):
            for i, (_, base) in enumerate(servers):
                started = time.monotonic()
                phases[i].append(phase(base, tracks, args.seconds))
                walls[i] += time.monotonic() - started
    finally:
        for proc, _ in servers:
            proc.terminate()
            proc.wait(60)
    return {
        "streams": args.streams,
        "model": args.model,
        "rounds": args.rounds,
        "load_average_start_end": [round(load_start[0], 1), round(os.getloadavg()[0], 1)],
        "variants": [summarize(v, p, w) for v, p, w in zip(variants, phases, walls, strict=True)],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=60.0, help="per variant and round")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--audio", nargs="*", default=None)
    parser.add_argument(
        "--model", default="fake", help="fake (default: the server's own work only) or tiny.en"
    )
    parser.add_argument(
        "--variant", action="append", default=[], help="extra `kettle serve` arguments"
    )
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--note", default="", help="a paragraph for RESULTS.md (conditions)")
    args = parser.parse_args()
    args.fake_model = args.model == "fake"
    result = measure(args)
    print(json.dumps(result))
    rows = []
    for v in result["variants"]:
        share = v["share_within_s"]
        rows.append(
            {
                "variant": v["variant"],
                "finals (streams failed)": f"{v['finals']} ({v['streams_failed']})",
                "final lag P50 / P95 (s)": f"{v['final_lag_p50_s']} / {v['final_lag_p95_s']}",
                "server P99 bucket (s)": v["server_lag_p99_bucket_s"],
                "server mean (ms)": v["server_lag_mean_ms"],
                "server within 5 / 20 ms": _pair(share, "server"),
                "control within 5 / 20 ms": _pair(share, "control"),
                "control P99 (ms)": v["control_lag_p99_ms"],
            }
        )
    table = markdown_table(rows, list(rows[0]))
    print(table)
    if not args.no_write:
        load = result["load_average_start_end"]
        write_section(
            "loop_lag",
            f"{args.streams} real-time streams against `kettle serve` (model: {args.model}, "
            f"real VAD), {args.rounds} round(s) of {args.seconds:g} s per variant, variants "
            "taking turns. `server P99 bucket` is the upper bound of the histogram bucket "
            "holding the P99; `within 5 / 20 ms` is the share of wake-ups no later than that. "
            "The control is an idle asyncio loop in another process running the same monitor "
            "at the same time: it shows what the operating system alone costs. The machine "
            f"was shared with other jobs (1-minute load average {load[0]} at the start, "
            f"{load[1]} at the end).\n\n" + (f"{args.note}\n\n" if args.note else "") + table,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
