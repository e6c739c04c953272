"""Overhead of the serving stack: the same audio through this tree's server and a baseline's.

The baseline is a git commit (default: the last one served by websockets' own server, before
Starlette + uvicorn), checked out into a temporary git worktree with its own virtual
environment. Both `kettle serve` processes run side by side on 127.0.0.1; real-time clients (kettle
v1, docs/protocol.md, which both speak) replay the same ../shared/eval speech to both stacks at the
same moment, round after round, so that both see the same machine load even when other jobs come and
go (`--alternate`: one stack at a time, alternating the order every round).
Per stack: partial and final lag at the client (receive time - (stream start + event end)),
and server CPU seconds per second of audio. With the fake model the decode is instant, so the
lag is the pipeline itself: scheduler budget plus the stack; with tiny.en it is the real thing.

    python benchmarks/bench_stack.py            # fake x1 and x4; 4 rounds of 12 s
    python benchmarks/bench_stack.py --runs tiny.en:1   # the real model (needs a quiet machine)
    python benchmarks/bench_stack.py --quick    # fake x1 only, 1 round of 8 s (smoke run)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import machine_info, markdown_table, write_section
from _serve import start_kettle, stop_server, ws_url
from bench_server import (
    SAMPLE_RATE,
    Track,
    build_tracks,
    cpu_seconds,
    lags,
    load_clips,
    percentile,
    run_clients,
)

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
# The last commit whose server was websockets' own (the parent of the move to Starlette).
DEFAULT_BASELINE = "654b583~1"


@contextlib.contextmanager
def baseline_python(ref: str) -> Iterator[tuple[str, str]]:
    """(python, commit) of a throwaway worktree of `ref` with kettle installed editable."""
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", ref],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    root = Path(tempfile.mkdtemp(prefix="kettle-baseline-"))
    tree = root / "tree"
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), commit],
        check=True,
        capture_output=True,
    )
    try:
        venv = tree / ".venv"
        subprocess.run(
            [sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True
        )
        python = str(venv / "bin" / "python")
        subprocess.run(
            [python, "-m", "pip", "install", "-q", "--no-deps", "-e", str(tree)],
            check=True,
            capture_output=True,
        )
        yield python, commit
    finally:
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)],
            check=False,
            capture_output=True,
        )
        shutil.rmtree(root, ignore_errors=True)


def start_server(python: str, model: str, threads: int) -> tuple[subprocess.Popen[str], str]:
    """One stack's server (run from a neutral folder, so it imports its own kettle); its
    /v1/stream URL."""
    model_args = ["--fake-model"] if model == "fake" else ["--model", model]
    serve = [*model_args, "--max-sessions", "64", "--threads", str(threads)]
    proc, base = start_kettle(serve, python=python, cwd=tempfile.gettempdir())
    return proc, ws_url(base)


def measure_pair(
    pythons: dict[str, str],
    model: str,
    clients: int,
    tracks: list[Track],
    args: argparse.Namespace,
) -> list[dict[str, Any]]:
    servers = {name: start_server(python, model, args.threads) for name, python in pythons.items()}
    partial: dict[str, list[float]] = {name: [] for name in servers}
    final: dict[str, list[float]] = {name: [] for name in servers}
    cpu: dict[str, float] = dict.fromkeys(servers, 0.0)
    audio_s = 0.0
    chosen = tracks[:clients]
    try:
        names = list(servers)
        for name in names:  # warm-up: first decodes, imports, caches
            asyncio.run(run_clients(servers[name][1], chosen[:1], False, args.chunk_ms))
        for round_ in range(args.rounds):
            if not args.alternate:
                # Both stacks at once, the same audio at the same moment: the same load.
                cpu0s = {name: cpu_seconds(servers[name][0].pid) for name in names}
                both = asyncio.run(_paired([servers[n][1] for n in names], chosen, args.chunk_ms))
                for name, results in zip(names, both, strict=True):
                    cpu[name] += cpu_seconds(servers[name][0].pid) - cpu0s[name]
                    partial[name] += [x for r in results for x in lags(r, "partial")]
                    final[name] += [x for r in results for x in lags(r, "final")]
            else:
                order = names if round_ % 2 == 0 else names[::-1]
                for name in order:
                    proc, url = servers[name]
                    cpu0 = cpu_seconds(proc.pid)
                    results = asyncio.run(run_clients(url, chosen, True, args.chunk_ms))
                    cpu[name] += cpu_seconds(proc.pid) - cpu0
                    partial[name] += [x for r in results for x in lags(r, "partial")]
                    final[name] += [x for r in results for x in lags(r, "final")]
            audio_s += sum(len(t.audio) for t in chosen) / SAMPLE_RATE
    finally:
        for proc, _ in servers.values():
            stop_server(proc)
    rows: list[dict[str, Any]] = []
    for name in servers:
        rows.append(
            {
                "model": model,
                "clients": clients,
                "stack": name,
                "audio_s": round(audio_s, 1),
                "partials": len(partial[name]),
                "partial_p50_ms": 1000 * percentile(partial[name], 50),
                "partial_p95_ms": 1000 * percentile(partial[name], 95),
                "finals": len(final[name]),
                "final_p50_ms": 1000 * percentile(final[name], 50),
                "final_p95_ms": 1000 * percentile(final[name], 95),
                "server_cpu_s_per_audio_s": cpu[name] / audio_s,
            }
        )
    new, old = rows[0], rows[1]
    print(
        f"{model} x{clients}: partial P50 new {new['partial_p50_ms']:.1f} ms vs old "
        f"{old['partial_p50_ms']:.1f} ms ({new['partial_p50_ms'] - old['partial_p50_ms']:+.1f}),"
        f" final P50 {new['final_p50_ms']:.1f} vs {old['final_p50_ms']:.1f} ms, CPU "
        f"{new['server_cpu_s_per_audio_s']:.3f} vs {old['server_cpu_s_per_audio_s']:.3f} s/s",
        flush=True,
    )
    return rows


async def _paired(urls: list[str], tracks: list[Track], chunk_ms: int) -> list[list[Any]]:
    runs = [run_clients(url, tracks, True, chunk_ms) for url in urls]
    return list(await asyncio.gather(*runs))


COLUMNS = [
    "model",
    "clients",
    "stack",
    "audio_s",
    "partials",
    "partial_p50_ms",
    "partial_p95_ms",
    "finals",
    "final_p50_ms",
    "final_p95_ms",
    "server_cpu_s_per_audio_s",
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default=DEFAULT_BASELINE, help="git commit to compare")
    parser.add_argument("--runs", default="fake:1,fake:4", help="MODEL:CLIENTS,...")
    parser.add_argument("--rounds", type=int, default=4, help="runs per stack, alternating")
    parser.add_argument("--seconds", type=float, default=12.0, help="audio per client per run")
    parser.add_argument("--chunk-ms", type=int, default=100)
    parser.add_argument("--threads", type=int, default=1, help="model threads per server")
    parser.add_argument(
        "--alternate",
        action="store_true",
        help="stream to one stack at a time, alternating, instead of both at once",
    )
    parser.add_argument("--quick", action="store_true", help="fake x1, 1 round of 8 s")
    parser.add_argument("--write", action="store_true", help="with --quick: still write results")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.rounds, args.seconds = "fake:1", 1, 8.0
    runs = [(m, int(n)) for m, n in (item.split(":") for item in args.runs.split(","))]
    clips = load_clips()
    tracks = build_tracks(clips, max(n for _, n in runs), args.seconds)
    started = time.monotonic()
    rows: list[dict[str, Any]] = []
    with baseline_python(args.baseline) as (old_python, commit):
        pythons = {"new": sys.executable, f"old ({commit})": old_python}
        for model, clients in runs:
            rows += measure_pair(pythons, model, clients, tracks, args)
    table = markdown_table(rows, COLUMNS)
    print(table)
    deltas = [
        f"{new['model']} x{new['clients']}: partial P50 "
        f"{new['partial_p50_ms'] - old['partial_p50_ms']:+.1f} ms, final P50 "
        f"{new['final_p50_ms'] - old['final_p50_ms']:+.1f} ms, server CPU "
        f"{new['server_cpu_s_per_audio_s'] / old['server_cpu_s_per_audio_s']:.2f}x"
        for new, old in zip(rows[::2], rows[1::2], strict=True)
    ]
    print("\n".join(deltas))
    if args.quick and not args.write:
        return 0
    data = {
        "baseline": commit,
        "rounds": args.rounds,
        "seconds_per_client": args.seconds,
        "chunk_ms": args.chunk_ms,
        "wall_s": round(time.monotonic() - started, 1),
        "machine": machine_info(),
        "rows": rows,
    }
    (HERE / "bench_stack.json").write_text(json.dumps(data, indent=1), encoding="utf-8")
    mode = "one stack at a time, alternating" if args.alternate else "both stacks at once"
    write_section(
        "bench_stack",
        "Serving-stack overhead: this tree's server as it stands (Starlette on uvicorn, "
        f"websockets sans-I/O, codec + runner) against baseline {commit} (websockets' own "
        "server), both running "
        f"side by side ({args.threads} model thread each); {args.rounds} rounds, each client "
        f"replaying {args.seconds:g} s of ../shared/eval speech in real time ({args.chunk_ms} ms "
        f"chunks) to {mode}. Lags at the client; `fake` decodes instantly, so its lag is the "
        "pipeline itself (scheduler budget + stack), which is what this compares. The machine "
        "was shared with other jobs (2 cores, load average above 10 from other helpers' test "
        "runs); tiny.en runs (`--runs tiny.en:1`) on it skipped nearly every partial and their "
        "lags moved by hundreds of ms between runs in either direction, so they measure the "
        "load, not the stack, and are not reported here.\n\n"
        + table
        + "\nNew minus old:\n\n"
        + "".join(f"- {d}\n" for d in deltas),
    )

    return 0


if __name__ == "__main__":
    sys.exit(main())
