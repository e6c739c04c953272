"""End-to-end latency of `kettle serve` under N concurrent real-time clients.

A `kettle serve` subprocess (tiny.en by default) on 127.0.0.1; N clients over real
WebSockets, each replaying ~30 s of ../shared/eval speech the way a microphone would: a
chunk is sent only once its audio would have been recorded. Measured at the client:

- partial lag = receive time - (stream start + partial.end)
- final lag   = receive time - (stream start + final.end)

plus WER of the finals against the eval references, finals lost (owed by the server and
not sent: gaps in the utterance numbers, or a `done` that counts otherwise), finals unmatched
(an unpaced reference run's finals, of the same audio, that no live final overlaps: the
audio clock makes utterance cuts independent of timing, but the live run may read a short
blip as nothing), and server CPU seconds per second of audio (from /proc/PID/stat).

    python benchmarks/bench_server.py            # N = 1, 4, 8, 16; ~30 s of audio each
    python benchmarks/bench_server.py --quick    # N = 1, 4; ~10 s (smoke run)
    python benchmarks/bench_server.py --protocols   # per protocol; uploads during live streams

`--protocols` measures instead (section bench_server_protocols): the same track over each
WebSocket protocol the server speaks, in turn (kettle v1, Deepgram live, OpenAI Realtime, as
GET /v1/info lists them; rounds interleaved), and 4 concurrent uploads (POST /v1/listen)
while 2 live streams run, against the same 2 streams alone.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import eval_dir, machine_info, markdown_table, require_eval_set, write_section
from _serve import kettle_serving, ws_url
from kettle.streaming.client.client import ClientOptions, StreamResult, stream_audio

HERE = Path(__file__).resolve().parent
EVAL = eval_dir()
SAMPLE_RATE = 16000
GAP_S = 0.8  # silence between clips, so that each clip ends its utterance
CATEGORIES = ("librispeech", "librivox", "fleurs", "arctic_accent", "speech_pd", "ljspeech")


@dataclass
class Track:
    audio: np.ndarray
    reference: str


def load_clips() -> list[tuple[np.ndarray, str]]:
    from kettle.transcribe.audio.read import load_audio

    with open(EVAL / "manifest.tsv", newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh, delimiter="\t") if r["category"] in CATEGORIES]
    rows.sort(key=lambda r: r["file"])
    return [(load_audio(EVAL / r["file"]), r["reference_text"]) for r in rows]


def build_tracks(clips: list[tuple[np.ndarray, str]], n: int, seconds: float) -> list[Track]:
    """n different tracks of >= `seconds`: clips in a rotated order, silence between them."""
    gap = np.zeros(int(GAP_S * SAMPLE_RATE), dtype=np.float32)
    tracks = []
    for i in range(n):
        parts, refs, total, j = [gap], [], 0.0, (i * 5) % len(clips)
        while total < seconds:
            audio, ref = clips[j % len(clips)]
            parts += [audio, gap]
            refs.append(ref)
            total += len(audio) / SAMPLE_RATE + GAP_S
            j += 1
        tracks.append(Track(np.concatenate(parts), " ".join(refs)))
    return tracks


def serve_args(args: argparse.Namespace) -> list[str]:
    """`kettle serve`'s options for this benchmark's server."""
    return [
        *("--model", args.model, "--max-sessions", "64"),
        *("--batch-size", str(args.batch_size)),
        *(() if args.threads is None else ("--threads", str(args.threads))),
        *(x for arg in getattr(args, "serve_arg", []) for x in arg.split()),
    ]


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process and its waited-for children, from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))
    return ticks / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def wer(refs: list[str], hyps: list[str]) -> float:
    import jiwer
    from whisper_normalizer.english import EnglishTextNormalizer

    norm = EnglishTextNormalizer()
    return float(jiwer.wer([norm(r) for r in refs], [norm(h) for h in hyps]))


async def run_clients(
    url: str, tracks: list[Track], realtime: bool, chunk_ms: int, revisions: bool = False
) -> list[StreamResult]:
    options = ClientOptions(
        url=url, realtime=realtime, chunk_ms=chunk_ms, partials=realtime, revisions=revisions
    )
    return list(await asyncio.gather(*(stream_audio(t.audio, options) for t in tracks)))


def refinement_counts(base: str) -> dict[str, float]:
    """kettle_refinements_total by outcome, from the server's /metrics."""
    import urllib.request

    with urllib.request.urlopen(base + "/metrics", timeout=10) as response:
        text = response.read().decode()
    counts: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith('kettle_refinements_total{outcome="'):
            outcome = line.split('"')[1]
            counts[outcome] = float(line.rsplit(" ", 1)[1])
    return counts


def lags(result: StreamResult, kind: str) -> list[float]:
    return [
        at - (result.audio_start + message["end"])
        for message, at in result.received
        if message["type"] == kind
    ]


# The live capacity target (issue 28): a stream is served when its partial lag P95 is at most
# 1.0 s with at least one partial per 1.5 s of speech, its final lag P95 at most 1.5 s, and
# nothing is lost.
PARTIAL_P95_MAX_S = 1.0
PARTIALS_PER_SPEECH_S_MIN = 1 / 1.5
FINAL_P95_MAX_S = 1.5


def partial_rate(result: StreamResult) -> float:
    """Partials received per second of speech (the finals' spans) of one stream."""
    speech = sum(f["end"] - f["start"] for f in result.finals)
    return len(result.partials) / speech if speech > 0 else 0.0


def meets_target(row: dict[str, Any]) -> bool:
    return bool(
        row["partial_p95_s"] <= PARTIAL_P95_MAX_S
        and row["partials_per_speech_s"] >= PARTIALS_PER_SPEECH_S_MIN
        and row["final_p95_s"] <= FINAL_P95_MAX_S
        and row["finals_lost"] == 0
    )


def capacity(rows: list[dict[str, Any]]) -> int:
    """The most clients of a run of increasing N that meets the target, with every smaller
    N measured meeting it too (0 when N = 1 misses)."""
    best = 0
    for row in sorted(rows, key=lambda r: r["clients"]):
        if not row["meets_target"]:
            break
        best = row["clients"]
    return best


def lost_finals(result: StreamResult) -> int:
    """Finals the server owed and did not send: gaps in the utterance numbers, or no `done`
    counting what arrived. (An utterance the model reads as nothing sends no final and holds
    no number: that is not a loss; ``unmatched_finals`` counts it.)"""
    numbers = [f["utterance"] for f in result.finals]
    gaps = len(set(range(len(numbers))) - set(numbers))
    done_ok = result.done is not None and result.done["utterances"] == len(numbers)
    return gaps + (0 if done_ok else 1)


def unmatched_finals(result: StreamResult, reference: StreamResult) -> int:
    """The unpaced run's finals that no live final overlaps in time: speech the live run read
    as nothing where the unpaced run read words (a short blip's "5." or real words: WER says
    which)."""
    spans = [(f["start"], f["end"]) for f in result.finals]
    return sum(
        1
        for f in reference.finals
        if not any(start < f["end"] and f["start"] < end for start, end in spans)
    )


def measure(args: argparse.Namespace) -> dict[str, Any]:
    data_line = require_eval_set(EVAL)
    clips = load_clips()
    max_n = max(args.clients)
    tracks = build_tracks(clips, max_n, args.seconds)
    rows: list[dict[str, Any]] = []
    with kettle_serving(serve_args(args)) as (proc, base):
        url = ws_url(base)
        # Reference run, unpaced, finals only: the finals each track should get (and a
        # warm-up).
        refs = asyncio.run(run_clients(url, tracks, realtime=False, chunk_ms=args.chunk_ms))
        # With --revisions, each N runs without and with them, one after the other.
        runs = [
            (n, mode)
            for n in args.clients
            for mode in ((False, True) if args.revisions else (False,))
        ]
        for n, revisions in runs:
            chosen = tracks[:n]
            counts0 = refinement_counts(base)
            cpu0, wall0 = cpu_seconds(proc.pid), time.monotonic()
            results = asyncio.run(
                run_clients(url, chosen, True, args.chunk_ms, revisions=revisions)
            )
            cpu = cpu_seconds(proc.pid) - cpu0
            counts1 = refinement_counts(base)
            refined = {k: counts1.get(k, 0.0) - counts0.get(k, 0.0) for k in counts1}
            wall = time.monotonic() - wall0
            audio_s = sum(len(t.audio) for t in chosen) / SAMPLE_RATE
            partial = [x for r in results for x in lags(r, "partial")]
            final = [x for r in results for x in lags(r, "final")]
            row = {
                "clients": n,
                "revisions": revisions,
                "audio_s": round(audio_s, 1),
                "wall_s": round(wall, 1),
                "partials": len(partial),
                "partial_p50_s": percentile(partial, 50),
                "partial_p95_s": percentile(partial, 95),
                "partial_p99_s": percentile(partial, 99),
                "finals": len(final),
                "final_p50_s": percentile(final, 50),
                "final_p95_s": percentile(final, 95),
                "final_p99_s": percentile(final, 99),
                "wer": wer([t.reference for t in chosen], [r.original_text for r in results]),
                "refined_wer": (
                    wer([t.reference for t in chosen], [r.text for r in results])
                    if revisions
                    else None
                ),
                "revised": int(refined.get("revised", 0)),
                "refinements_skipped": int(refined.get("skipped", 0)),
                "wer_per_client": [
                    round(wer([t.reference], [r.text]), 4)
                    for t, r in zip(chosen, results, strict=True)
                ],
                "finals_lost": sum(lost_finals(r) for r in results),
                "finals_unmatched": sum(
                    unmatched_finals(r, ref) for r, ref in zip(results, refs[:n], strict=True)
                ),
                "overloaded_errors": sum(
                    1 for r in results for e in r.errors if e.get("code") == "overloaded"
                ),
                "server_cpu_s_per_audio_s": cpu / audio_s,
                "partials_per_speech_s": min(partial_rate(r) for r in results),
                "partial_lags": partial,
                "final_lags": final,
            }
            row["meets_target"] = meets_target(row)
            rows.append(row)
            print(
                f"N={n:2d}{' revisions' if revisions else ''}: partial P50/P95 "
                f"{row['partial_p50_s']:.2f}/{row['partial_p95_s']:.2f} s,"
                f" final P50/P95 {row['final_p50_s']:.2f}/{row['final_p95_s']:.2f} s,"
                f" WER {row['wer']:.3f}, lost {row['finals_lost']},"
                f" CPU {row['server_cpu_s_per_audio_s']:.3f} s/s",
                flush=True,
            )
    return {
        "data": data_line,
        "model": args.model,
        "seconds_per_client": args.seconds,
        "chunk_ms": args.chunk_ms,
        "batch_size": args.batch_size,
        "threads": args.threads,
        "machine": machine_info(),
        "rows": rows,
    }


def measure_protocols(args: argparse.Namespace) -> dict[str, Any]:
    import _protocols

    data_line = require_eval_set(EVAL)
    tracks = build_tracks(load_clips(), 6, args.seconds)
    load_before = os.getloadavg()[0]
    with kettle_serving(serve_args(args)) as (_, base):
        # Warm-up (model caches, first-call costs), not measured.
        asyncio.run(_protocols.kettle_v1(base, tracks[0].audio[: 5 * SAMPLE_RATE], args.chunk_ms))
        per = asyncio.run(
            _protocols.per_protocol(base, tracks[0].audio, args.rounds, args.chunk_ms)
        )
        for name, row in per.items():
            print(
                f"{name}: partial P50/P95 {row['partial_p50_s']:.2f}/{row['partial_p95_s']:.2f} s,"
                f" final P50/P95 {row['final_p50_s']:.2f}/{row['final_p95_s']:.2f} s",
                flush=True,
            )
        uploads = asyncio.run(
            _protocols.uploads_during_live(
                base,
                [t.audio for t in tracks[2:6]],
                [t.audio for t in tracks[:2]],
                args.chunk_ms,
            )
        )
        print(
            f"uploads: {uploads['upload_throughput_audio_s_per_s']:.1f} audio s/s; live final "
            f"P50/P95 {uploads['live_final_p50_s']:.2f}/{uploads['live_final_p95_s']:.2f} s"
            f" (alone {uploads['live_alone_final_p50_s']:.2f}/"
            f"{uploads['live_alone_final_p95_s']:.2f} s)",
            flush=True,
        )
    return {
        "data": data_line,
        "model": args.model,
        "seconds": args.seconds,
        "rounds": args.rounds,
        "chunk_ms": args.chunk_ms,
        "machine": machine_info(),
        "protocols": per,
        "uploads": uploads,
        # Other jobs on the machine weigh on every figure: the 1-minute load, before and after.
        "load_average": [round(load_before, 1), round(os.getloadavg()[0], 1)],
        "cpus": os.cpu_count(),
    }


def report_protocols(args: argparse.Namespace, data: dict[str, Any]) -> None:
    columns = ["protocol", "partials", "partial_p50_s", "partial_p95_s", "finals"]
    columns += ["final_p50_s", "final_p95_s"]
    rows = [{"protocol": name, **row} for name, row in data["protocols"].items()]
    table = markdown_table(rows, columns)
    up = data["uploads"]
    up_columns = ["uploads", "upload_audio_s", "uploads_wall_s"]
    up_columns += ["upload_throughput_audio_s_per_s", "live_streams", "live_final_p50_s"]
    up_columns += ["live_final_p95_s", "live_alone_final_p50_s", "live_alone_final_p95_s"]
    up_table = markdown_table([up], up_columns)
    print(table)
    print(up_table)
    if args.quick and not args.write:
        return
    (HERE / "bench_server_protocols.json").write_text(json.dumps(data, indent=1), "utf-8")
    write_section(
        "bench_server_protocols",
        f"{data['model']}; the same {args.seconds:g} s track of eval-set speech over each "
        f"WebSocket protocol with its own client (kettle v1: `kettle.streaming.client.client`; "
        f"Deepgram and OpenAI: their official SDKs), replayed in real time ({args.chunk_ms} ms "
        f"chunks), {args.rounds} rounds interleaved; lags from the audio clock to receipt "
        "(OpenAI Realtime: finals from the end of their turn, `speech_stopped.audio_end_ms`; "
        "its deltas carry no audio time, so only their count is given). Then "
        f"{up['uploads']} uploads (POST /v1/listen, WAV) at once while {up['live_streams']} "
        "live kettle v1 streams run in real time, against the same streams alone just "
        "before: upload throughput is audio seconds per wall second until the last upload "
        "answered. The machine's 1-minute load average was "
        f"{data['load_average'][0]:g} before and {data['load_average'][1]:g} after, on "
        f"{data['cpus']} CPUs: other jobs shared it, so compare rows of one run, not runs.\n\n"
        + f"{data['data']}.\n\n"
        + table
        + "\n"
        + up_table,
    )


def plot(data: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = data["rows"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=False)
    for ax, kind in zip(axes, ("partial", "final"), strict=True):
        series = [r[f"{kind}_lags"] or [float("nan")] for r in rows]
        ax.boxplot(series, whis=(5, 95), showfliers=False)
        ax.set_xticks(range(1, len(rows) + 1), [str(r["clients"]) for r in rows])
        for q, style in ((50, "o-"), (99, "s--")):
            ax.plot(
                range(1, len(rows) + 1),
                [r[f"{kind}_p{q}_s"] for r in rows],
                style,
                label=f"P{q}",
            )
        ax.set_title(f"{kind} lag ({data['model']}, real-time clients)")
        ax.set_xlabel("concurrent clients")
        ax.set_ylabel("seconds")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


COLUMNS = [
    "clients",
    "audio_s",
    "partials",
    "partial_p50_s",
    "partial_p95_s",
    "partial_p99_s",
    "finals",
    "final_p50_s",
    "final_p95_s",
    "final_p99_s",
    "wer",
    "finals_lost",
    "finals_unmatched",
    "overloaded_errors",
    "server_cpu_s_per_audio_s",
]
CAPACITY_COLUMNS = [
    "clients", "partials_per_speech_s", "partial_p50_s", "partial_p95_s", "final_p50_s",
    "final_p95_s", "wer", "finals_lost", "finals_unmatched", "overloaded_errors",
    "server_cpu_s_per_audio_s", "meets_target",
]  # fmt: skip


REVISION_COLUMNS = [
    "clients", "revisions", "partial_p50_s", "partial_p95_s", "final_p50_s", "final_p95_s",
    "wer", "refined_wer", "revised", "refinements_skipped", "finals_lost", "overloaded_errors",
    "server_cpu_s_per_audio_s",
]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="N = 1, 4 and ~10 s each")
    parser.add_argument("--clients", default="1,4,8,16", help="comma-separated N values")
    parser.add_argument("--seconds", type=float, default=30.0, help="audio per client")
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--chunk-ms", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument(
        "--threads", type=int, default=None, help="kettle serve --threads (default: serve's)"
    )
    parser.add_argument("--write", action="store_true", help="with --quick: still write results")
    parser.add_argument(
        "--protocols", action="store_true", help="per-protocol lags and uploads (see above)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="with --protocols: rounds")
    parser.add_argument(
        "--revisions",
        action="store_true",
        help="each N without and with revisions, side by side (section bench_server_revisions)",
    )
    parser.add_argument(
        "--capacity",
        action="store_true",
        help="N = 1, 2, 3, 4, 6, 8 (or --clients): the most streams that meet the latency "
        "target (section bench_capacity)",
    )
    parser.add_argument("--label", default="", help="with --capacity: names this server's setup")
    parser.add_argument(
        "--serve-arg", action="append", default=[], help="an extra `kettle serve` option"
    )
    args = parser.parse_args()
    if args.capacity and args.clients == "1,4,8,16":
        args.clients = "1,2,3,4,6,8"
    args.clients = [int(x) for x in args.clients.split(",")]
    if args.quick:
        args.clients, args.seconds, args.rounds = [1, 4], 10.0, 1
    if args.protocols:
        report_protocols(args, measure_protocols(args))
        return 0
    data = measure(args)
    if args.capacity:
        report_capacity(args, data)
        return 0
    columns = COLUMNS if not args.revisions else REVISION_COLUMNS
    table_rows = [{k: v for k, v in r.items() if k in columns} for r in data["rows"]]
    table = markdown_table(table_rows, columns)
    print(table)
    if args.quick and not args.write:
        return 0
    if args.revisions:
        (HERE / "bench_server_revisions.json").write_text(json.dumps(data, indent=1))
        write_section(
            "bench_server_revisions",
            f"{data['model']}; N real-time clients ({args.seconds:g} s of eval speech each), "
            "each N without and then with `revisions: true` on one server. `wer` is the live "
            "finals', `refined_wer` the transcript with revisions applied; `revised` and "
            "`refinements_skipped` come from the server's kettle_refinements_total.\n\n"
            + f"{data['data']}.\n\n"
            + table,
        )
        return 0
    (HERE / "bench_server.json").write_text(json.dumps(data, indent=1), encoding="utf-8")
    plot(data, HERE / "server_latency.png")
    write_section(
        "bench_server",
        f"{data['model']}, {len(data['rows'])} runs, each client replays {args.seconds:g} s of "
        f"eval-set speech in real time ({args.chunk_ms} ms chunks, sent once recorded). "
        "Lags are measured at the client from the audio clock (stream start + event end) to "
        "receipt; finals lost are those the server owed and did not send (numbering gaps, "
        "`done`), finals unmatched those of an unpaced run of the same audio that no live "
        "final overlaps; server CPU "
        "is utime+stime of the `kettle serve` process per second of audio.\n\n"
        + f"{data['data']}.\n\n"
        + table
        + "\n![server latency](server_latency.png)\n",
    )
    return 0


def report_capacity(args: argparse.Namespace, data: dict[str, Any]) -> None:
    """Print the capacity table and write it to bench_capacity.json and its section."""
    streams = capacity(data["rows"])
    cores = os.cpu_count() or 1
    label = args.label or "kettle serve defaults"
    table_rows = [{k: r[k] for k in CAPACITY_COLUMNS} for r in data["rows"]]
    table = markdown_table(table_rows, CAPACITY_COLUMNS)
    summary = (
        f"**{label}: capacity {streams} real-time streams on {cores} cores "
        f"({streams / cores:g} per core)**"
    )
    print(table + "\n" + summary)
    if args.quick and not args.write:
        return
    path = HERE / "bench_capacity.json"
    runs = json.loads(path.read_text()) if path.exists() else {}
    command = "python " + " ".join(sys.argv)
    runs[label] = {**data, "capacity": streams, "cores": cores, "command": command}
    path.write_text(json.dumps(runs, indent=1), encoding="utf-8")
    sections = []
    for name, run in runs.items():
        rows = [{k: r[k] for k in CAPACITY_COLUMNS} for r in run["rows"]]
        sections.append(
            f"### {name}\n\nCommand: `{run['command']}`\n\n"
            f"Machine: `{json.dumps(run['machine'])}`\n\n"
            f"**capacity {run['capacity']} streams on {run['cores']} cores "
            f"({run['capacity'] / run['cores']:g} per core)**\n\n"
            + markdown_table(rows, CAPACITY_COLUMNS)
        )
    write_section(
        "bench_capacity",
        "Live capacity: the most real-time streams one `kettle serve` (tiny.en) serves with "
        f"partial lag P95 <= {PARTIAL_P95_MAX_S:g} s and at least one partial per 1.5 s of "
        f"speech (the worst client's partials per second of its finals' spans), final lag "
        f"P95 <= {FINAL_P95_MAX_S:g} s and no final lost (owed and not sent: numbering "
        "gaps, `done`; `finals_unmatched` counts the unpaced run's finals no live final "
        "overlaps, which WER weighs), every smaller N meeting it too. "
        f"Each client replays {args.seconds:g} s of eval speech in real time, as in "
        "bench_server. One subsection per server setup (`--label`), each from its own run; "
        "compare setups only on the same machine.\n\n"
        f"{data['data']}.\n\n" + "\n\n".join(sections),
    )


if __name__ == "__main__":
    sys.exit(main())
