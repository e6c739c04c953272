"""Scaling out: live streams on 1 replica vs 2 behind HAProxy, batch files on 1 vs 2 Ray workers.

Live: two `kettle serve --threads 1` replicas (tiny.en) and HAProxy with deploy/haproxy.cfg in
front of both. For each N, N real-time clients (as in bench_server: a chunk is sent once its
audio would have been recorded) stream to replica 1 alone, then through HAProxy to both;
the two setups alternate at every N, on the same processes. A setup holds at N when the
partial-lag P95 is at most 1.5 s, the final-lag P95 at most 2 s, and no final is lost; a
setup leaves the ladder after two N in a row that do not hold (one may be noise on a shared
machine).

Batch: `kettle transcribe --ray`'s driver (`transcribe_on_ray`) on a local Ray cluster, 1 and
2 workers with one model and one CPU each. Start-up (actors up, models loaded, the shortest
file through each worker) is measured apart, on a run of just that; throughput is audio
seconds per second of the rest: audio / (wall of the full run - start-up). A warm-up run
before both (Ray starting its worker processes) is not counted. The ideal line is N times the
1-worker throughput; 8 and 32 workers are a projection from the measured per-worker
throughput, not a measurement.

    python benchmarks/bench_scale.py            # live N = 1,2,3,4,6,8 (15 s each); batch 1, 2
    python benchmarks/bench_scale.py --quick    # live N = 1,2 (8 s); batch on fewer files
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import eval_dir, machine_info, markdown_table, require_eval_set, write_section
from _serve import start_kettle
from bench_server import (
    CATEGORIES,
    StreamResult,
    Track,
    build_tracks,
    lags,
    lost_finals,
    percentile,
    run_clients,
    unmatched_finals,
)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SAMPLE_RATE = 16000
PARTIAL_P95_MAX_S = 1.5
FINAL_P95_MAX_S = 2.0


# -- speech -----------------------------------------------------------------------------------


def speech_files() -> tuple[list[Path], str]:
    """The eval set's clean read speech (as bench_server reads it), and the data line."""
    import csv

    folder = eval_dir()
    line = require_eval_set(folder)
    with open(folder / "manifest.tsv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    files = sorted(
        folder / r["file"]
        for r in rows
        if r["category"] in CATEGORIES and not r["file"].endswith(".raw")
    )
    return files, line


def load_clips(files: list[Path]) -> list[tuple[np.ndarray, str]]:
    from kettle.transcribe.audio.read import load_audio

    return [(load_audio(f), "") for f in files]


# -- live ------------------------------------------------------------------------------------


def start_replica(model: str) -> tuple[subprocess.Popen[str], int]:
    serve = ["--model", model, "--threads", "1", "--max-sessions", "64"]
    proc, base = start_kettle(serve)
    return proc, int(base.rsplit(":", 1)[1])


def start_haproxy(ports: list[int], workdir: Path) -> tuple[subprocess.Popen[bytes], int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    lines = (ROOT / "deploy" / "haproxy.cfg").read_text().splitlines()
    kept = [ln for ln in lines if not ln.strip().startswith("server ")]
    kept += [f"    server r{i} 127.0.0.1:{p}" for i, p in enumerate(ports)]
    config = workdir / "haproxy.cfg"
    config.write_text("\n".join(kept) + "\n")
    env = dict(os.environ, KETTLE_LB_BIND=f"127.0.0.1:{port}", KETTLE_MAX_SESSIONS="64")
    proc = subprocess.Popen(
        ["haproxy", "-db", "-f", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            time.sleep(1.5)  # a round of health checks
            return proc, port
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("haproxy did not start")


def live_row(
    setup: str,
    n: int,
    tracks: list[Track],
    results: list[StreamResult],
    refs: list[StreamResult],
) -> dict[str, Any]:
    partial = [x for r in results for x in lags(r, "partial")]
    final = [x for r in results for x in lags(r, "final")]
    # As in bench_server: lost = owed by the server and not sent; the unpaced run's finals that
    # no live final overlaps are counted apart.
    lost = sum(lost_finals(r) for r in results)
    unmatched = sum(unmatched_finals(r, ref) for r, ref in zip(results, refs, strict=True))
    row: dict[str, Any] = {
        "setup": setup,
        "streams": n,
        "audio_s": round(sum(len(t.audio) for t in tracks) / SAMPLE_RATE, 1),
        "partial_p50_s": percentile(partial, 50),
        "partial_p95_s": percentile(partial, 95),
        "final_p50_s": percentile(final, 50),
        "final_p95_s": percentile(final, 95),
        "finals_lost": lost,
        "finals_unmatched": unmatched,
        "reconnects": sum(r.reconnects for r in results),
    }
    row["holds"] = bool(
        row["partial_p95_s"] <= PARTIAL_P95_MAX_S and row["final_p95_s"] <= FINAL_P95_MAX_S
        and lost == 0
    )  # fmt: skip
    return row


def measure_live(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    if shutil.which("haproxy") is None:
        raise SystemExit("haproxy is not installed (apt-get install haproxy)")
    clips = load_clips(speech_files()[0])
    tracks = build_tracks(clips, max(args.streams), args.seconds)
    replicas = [start_replica(args.model) for _ in range(2)]
    balancer, lb_port = start_haproxy([p for _, p in replicas], workdir)
    urls = {
        "1 replica": f"ws://127.0.0.1:{replicas[0][1]}/v1/stream",
        "2 replicas + HAProxy": f"ws://127.0.0.1:{lb_port}/v1/stream",
    }
    rows: list[dict[str, Any]] = []
    try:
        # Unpaced, finals only: the finals each track should get (and a warm-up of both models).
        warm = asyncio.run(run_clients(urls["2 replicas + HAProxy"], tracks[:2], False, 100))
        refs = asyncio.run(run_clients(urls["1 replica"], tracks, False, 100))
        del warm
        holding = set(urls)
        misses = dict.fromkeys(urls, 0)
        for n in args.streams:
            for setup in list(urls):
                if setup not in holding:
                    continue
                chosen = tracks[:n]
                cpu0 = sum(tree_cpu_seconds(proc.pid) for proc, _ in replicas)
                results = asyncio.run(run_clients(urls[setup], chosen, True, 100))
                cpu = sum(tree_cpu_seconds(proc.pid) for proc, _ in replicas) - cpu0
                row = live_row(setup, n, chosen, results, refs[:n])
                # Load-independent: the replicas' CPU per audio second streamed.
                row["replica_cpu_s_per_audio_s"] = cpu / row["audio_s"]
                rows.append(row)
                print(
                    f"{setup:22s} N={n:2d}: partial P95 {row['partial_p95_s']:.2f} s, final P95"
                    f" {row['final_p95_s']:.2f} s, lost {row['finals_lost']}"
                    f" -> {'holds' if row['holds'] else 'does not hold'}",
                    flush=True,
                )
                misses[setup] = 0 if row["holds"] else misses[setup] + 1
                if misses[setup] >= 2:
                    holding.discard(setup)
            if not holding:
                break
    finally:
        balancer.terminate()
        for proc, _ in replicas:
            proc.send_signal(2)  # SIGINT: stop now, no drain
        for proc, _ in replicas:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        balancer.wait(10)
    best = {
        setup: max([r["streams"] for r in rows if r["setup"] == setup and r["holds"]], default=0)
        for setup in urls
    }
    return {
        "command": _command(),
        "seconds_per_stream": args.seconds,
        "rows": rows,
        "largest_holding": best,
    }


# -- batch -----------------------------------------------------------------------------------


def measure_batch(args: argparse.Namespace) -> dict[str, Any]:
    import functools
    import logging

    import ray
    from kettle.transcribe.cli.transcribe import load_decoder
    from kettle.transcribe.corpus.driver import RayOptions, RemoteJob, transcribe_on_ray
    from kettle.transcribe.corpus.worker import WorkerSpec
    from kettle.transcribe.files.pipeline import PipelineConfig

    files = speech_files()[0][: args.files]
    audio_s = sum(len(a) for a, _ in load_clips(files)) / SAMPLE_RATE
    started = time.monotonic()
    ray.init(
        num_cpus=max(args.workers),
        object_store_memory=256 << 20,
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.ERROR,
    )
    cluster_s = time.monotonic() - started
    spec = WorkerSpec(
        make_decoder=functools.partial(load_decoder, args.model, 1, "cpu", 5),
        config=PipelineConfig(),
    )

    def jobs(paths: list[Path]) -> list[RemoteJob]:
        return [RemoteJob(p.name, functools.partial(p.read_bytes), p.name) for p in paths]

    def run(paths: list[Path], workers: int) -> tuple[float, int, float]:
        """Wall seconds, failed files, and CPU seconds of this process and all it started
        (the Ray cluster, whose raylet reaps the workers: their CPU lands in its total)."""
        cpu0, t0 = tree_cpu_seconds(os.getpid()), time.monotonic()
        outcomes = list(transcribe_on_ray(jobs(paths), spec, RayOptions(workers=workers)))
        wall = time.monotonic() - t0
        failed = sum(1 for o in outcomes if o.transcript is None)
        return wall, failed, tree_cpu_seconds(os.getpid()) - cpu0

    shortest = min(files, key=lambda p: p.stat().st_size)
    runs: dict[int, list[tuple[float, float, int, float]]] = {w: [] for w in args.workers}
    try:
        # Warm-up, not counted: Ray starts its worker processes and they import kettle.
        run([shortest] * max(args.workers), max(args.workers))
        # Rounds in ABBA order (1, 2, 2, 1, ...), so drift in the machine's load hits both.
        for round_ in range(args.repeat):
            for workers in args.workers if round_ % 2 == 0 else args.workers[::-1]:
                startup_s, _, startup_cpu = run([shortest] * workers, workers)
                wall_s, failed, cpu_s = run(files, workers)
                runs[workers].append((startup_s, wall_s, failed, cpu_s - startup_cpu))
                print(
                    f"{workers} worker(s): start-up {startup_s:.1f} s, run {wall_s:.1f} s,"
                    f" {audio_s / max(1e-9, wall_s - startup_s):.1f} audio s/s,"
                    f" {(cpu_s - startup_cpu) / audio_s:.3f} CPU s per audio s",
                    flush=True,
                )
    finally:
        ray.shutdown()
    rows = []
    for workers, measured in runs.items():
        startup_s = float(np.median([m[0] for m in measured]))
        throughput = float(np.median([audio_s / max(1e-9, m[1] - m[0]) for m in measured]))
        wall_s = float(np.median([m[1] for m in measured]))
        rows.append(
            {
                "workers": workers,
                "files": len(files),
                "audio_s": round(audio_s, 1),
                "runs": len(measured),
                "startup_s": startup_s,
                "wall_s": wall_s,
                "audio_s_per_s": throughput,
                "audio_s_per_s_incl_startup": audio_s / wall_s,
                "failed": sum(m[2] for m in measured),
                # CPU of the run beyond start-up, per audio second: flat when adding workers
                # costs no extra work, whatever share of the cores the machine could give.
                "cpu_s_per_audio_s": float(np.median([m[3] for m in measured])) / audio_s,
            }
        )
    base = rows[0]["audio_s_per_s"] / rows[0]["workers"]
    for row in rows:
        row["ideal_audio_s_per_s"] = base * row["workers"]
        row["efficiency"] = row["audio_s_per_s"] / row["ideal_audio_s_per_s"]
    per_worker = rows[-1]["audio_s_per_s"] / rows[-1]["workers"]
    projection = [
        {"workers": w, "audio_s_per_s": per_worker * w, "kind": "projection"} for w in (8, 32)
    ]
    return {
        "command": _command(),
        "cluster_start_s": cluster_s,
        "rows": rows,
        "per_worker_audio_s_per_s": per_worker,
        "projection": projection,
        # What one worker would do with a core of its own: 1 / (CPU s per audio s).
        "per_core_audio_s_per_s": 1.0 / float(np.median([r["cpu_s_per_audio_s"] for r in rows])),
    }


def tree_cpu_seconds(root: int) -> float:
    """utime+stime (own and reaped children's) of ``root`` and every live descendant."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        pid = int(stat.parent.name)
        parents[pid] = int(fields[1])
        times[pid] = sum(int(fields[i]) for i in (11, 12, 13, 14)) / tick
    total = 0.0
    for pid, cpu in times.items():
        walk = pid
        while walk > 1 and walk != root:
            walk = parents.get(walk, 0)
        if walk == root:
            total += cpu
    return total


# -- report ----------------------------------------------------------------------------------


def _command() -> str:
    return "python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]])


def plot(live: dict[str, Any] | None, batch: dict[str, Any] | None, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    if live is not None:
        ax = axes[0]
        for setup in live["largest_holding"]:
            rows = [r for r in live["rows"] if r["setup"] == setup]
            ns = [r["streams"] for r in rows]
            ax.plot(ns, [r["partial_p95_s"] for r in rows], "o-", label=f"{setup}: partial P95")
            ax.plot(ns, [r["final_p95_s"] for r in rows], "s--", label=f"{setup}: final P95")
        ax.axhline(PARTIAL_P95_MAX_S, color="grey", lw=0.8)
        ax.axhline(FINAL_P95_MAX_S, color="grey", lw=0.8, ls=":")
        ax.set_xlabel("concurrent real-time streams")
        ax.set_ylabel("lag P95 (s)")
        ax.set_title("live: 1 replica vs 2 behind HAProxy (--threads 1 each)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    if batch is not None:
        ax = axes[1]
        rows = batch["rows"]
        ws = [r["workers"] for r in rows]
        ax.plot(ws, [r["audio_s_per_s"] for r in rows], "o-", label="measured")
        proj = [rows[-1], *batch["projection"]]
        ax.plot(
            [p["workers"] for p in proj],
            [p["audio_s_per_s"] for p in proj],
            "x:",
            label="projection (not measured)",
        )
        top = max(p["workers"] for p in proj)
        ax.plot([1, top], [rows[0]["audio_s_per_s"], rows[0]["audio_s_per_s"] * top], "k--",
                lw=0.8, label="ideal")  # fmt: skip
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_xlabel("Ray workers (one model, one CPU each)")
        ax.set_ylabel("audio seconds per second")
        ax.set_title("batch: kettle transcribe --ray")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


LIVE_COLUMNS = ["setup", "streams", "partial_p50_s", "partial_p95_s", "final_p50_s",
                "final_p95_s", "finals_lost", "finals_unmatched", "holds",
                "replica_cpu_s_per_audio_s"]  # fmt: skip
BATCH_COLUMNS = ["workers", "files", "audio_s", "runs", "startup_s", "wall_s", "audio_s_per_s",
                 "ideal_audio_s_per_s", "efficiency", "cpu_s_per_audio_s"]  # fmt: skip


def report(
    live: dict[str, Any] | None, batch: dict[str, Any] | None, args: argparse.Namespace, load: float
) -> str:
    parts = [
        speech_files()[1] + ".",
        "The machine was shared with other jobs (other helpers' tests and benchmarks) while "
        f"this ran: its 5-minute load average was {load:.1f} at the end, on 2 cores, so each "
        "process got a fraction of a core. The latency figures are far worse than on a quiet "
        "machine (see bench_server), and the ratios between setups measured in the same run, "
        "and the CPU times, mean more than the absolute values.",
    ]
    if live is not None:
        best = live["largest_holding"]
        parts.append(
            f"**Live** ({args.model}, each stream replays {live['seconds_per_stream']:g} s of "
            f"speech in real time; holds = partial P95 <= {PARTIAL_P95_MAX_S} s, final P95 <= "
            f"{FINAL_P95_MAX_S} s, no final lost). Largest number of streams that holds: "
            + ", ".join(f"{k}: **{v}**" for k, v in best.items())
            + f". Measured by `{live['command']}`. A final is lost when the server owed it "
            "and did not send it; `finals_unmatched` counts an unpaced run's finals that no "
            "live final overlaps (as in bench_server). `replica_cpu_s_per_audio_s` is the "
            "replicas' CPU time per second of audio streamed, which the machine's other load "
            "does not change: a core carries about 1 / that many real-time streams, latency "
            "aside.\n\n" + markdown_table(live["rows"], LIVE_COLUMNS)
        )
    if batch is not None:
        rows = batch["rows"]
        proj = ", ".join(
            f"{p['workers']} workers ~{p['audio_s_per_s']:.0f} audio s/s"
            for p in batch["projection"]
        )
        parts.append(
            f"**Batch** ({args.model}, {rows[0]['files']} files, {rows[0]['audio_s']} s of "
            f"speech, `transcribe_on_ray` as `kettle transcribe --ray` runs it). Fixed costs, "
            f"apart from the throughput: starting the local Ray cluster "
            f"{batch['cluster_start_s']:.1f} s (once); start-up of a run (actors, models, "
            "first file) in `startup_s`. Throughput excludes start-up; medians of `runs` "
            f"rounds in ABBA order. Measured by `{batch['command']}`. `cpu_s_per_audio_s` is "
            "the CPU time of the driver and the whole Ray cluster per audio second, beyond "
            "start-up: when it stays flat as workers are added, the work did not grow, and "
            "what the throughput lacks of the ideal is cores the machine did not give.\n\n"
            + markdown_table(rows, BATCH_COLUMNS)
            + f"\n**Projection, not a measurement:** at the measured "
            f"{batch['per_worker_audio_s_per_s']:.1f} audio s/s per worker, with one core per "
            f"worker and nothing shared that saturates (object store, driver, network): {proj}. "
            "Only 1 and 2 workers were measured (this machine has 2 cores). The CPU time says "
            f"what a worker with a core of its own would do: "
            f"{batch['per_core_audio_s_per_s']:.1f} audio s/s (1 / `cpu_s_per_audio_s`), so "
            f"{8 * batch['per_core_audio_s_per_s']:.0f} and "
            f"{32 * batch['per_core_audio_s_per_s']:.0f} audio s/s for 8 and 32 such workers, "
            "also a projection."
        )
    return "\n\n".join(parts) + "\n\n![scaling](scale.png)\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: small and short")
    parser.add_argument("--only", choices=("live", "batch"), default=None)
    parser.add_argument("--streams", default="1,2,3,4,6,8", help="live: N values")
    parser.add_argument("--seconds", type=float, default=15.0, help="live: audio per stream")
    parser.add_argument("--workers", default="1,2", help="batch: worker counts")
    parser.add_argument("--files", type=int, default=24, help="batch: how many eval files")
    parser.add_argument("--repeat", type=int, default=2, help="batch: rounds (ABBA order)")
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--write", action="store_true", help="with --quick: still write results")
    args = parser.parse_args()
    args.streams = [int(x) for x in args.streams.split(",")]
    args.workers = [int(x) for x in args.workers.split(",")]
    if args.quick:
        args.streams, args.seconds, args.files, args.repeat = [1, 2], 8.0, 6, 1
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        live = measure_live(args, Path(tmp)) if args.only in (None, "live") else None
    batch = measure_batch(args) if args.only in (None, "batch") else None
    # --only runs one half; the other half's last figures stay in the report.
    saved = HERE / "bench_scale.json"
    if args.only is not None and saved.is_file():
        before = json.loads(saved.read_text(encoding="utf-8"))
        live = live or before.get("live")
        batch = batch or before.get("batch")
    data = {
        "model": args.model,
        "machine": machine_info(),
        # The machine's 5-minute load average at the end: 2 means both cores busy.
        "load_avg_5min": os.getloadavg()[1],
        "live": live,
        "batch": batch,
    }
    print(json.dumps(data, indent=1, default=str))
    text = report(live, batch, args, data["load_avg_5min"])
    print(text)
    if args.quick and not args.write:
        return 0
    (HERE / "bench_scale.json").write_text(json.dumps(data, indent=1), encoding="utf-8")
    plot(live, batch, HERE / "scale.png")
    write_section("bench_scale", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
