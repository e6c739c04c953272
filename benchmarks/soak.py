"""Soak: honest streams beside abusive clients, on one `kettle serve`, for minutes on end.

A `kettle serve` subprocess on 127.0.0.1 (tiny.en by default, `--fake-model` for the test
suite) and, in this process:

- N honest clients (default 4), each streaming speech in real time, session after session;
- in alternating blocks (quiet, abusive, quiet, abusive, ...), the abusive clients:
  - a flooder sending audio 50x faster than real time (admission should slow it to ~2x,
    with no error and nothing lost),
  - a garbage client sending random binary frames, oversized frames and bad JSON,
  - abrupt disconnects, 10 a minute (TCP aborted mid-stream, no `stop`).

It reports:
- the server's RSS over time; at the end at most 10 % above the level after warm-up (the
  first quiet + abusive pair of blocks);
- event-loop lag P99 (from the server's `kettle_event_loop_lag_seconds` histogram);
- finals lost (0): honest sessions whose finals had gaps or did not match `done`, plus
  finals the server failed (`kettle_errors{code="internal"}`), and sessions leaked (0):
  `kettle_sessions_active` + `kettle_engine_streams_open` once every client is gone;
- the honest streams' final lag P95 in abusive blocks beside quiet blocks (at most 20 %
  worse): the blocks interleave, so load from other jobs on the machine hits both alike.

    python benchmarks/soak.py                          # N=4, 20 minutes, tiny.en
    python benchmarks/soak.py --minutes 4 --block-s 60 # a short run
    python benchmarks/soak.py --fake-model --minutes 2 --block-s 30 --json out.json --no-write
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import machine_info, markdown_table, write_section
from _serve import stop_server
from kettle.streaming.cli import allocator
from kettle.streaming.client.client import ClientOptions, StreamClientError, stream_audio, to_s16le
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SAMPLE_RATE = 16000
GAP_S = 0.8
FLOOD_FACTOR = 50.0
DISCONNECTS_PER_MINUTE = 10


# -- the server ---------------------------------------------------------------------------------


def start_server(
    args: argparse.Namespace, extra: tuple[str, ...] = ()
) -> tuple[subprocess.Popen[str], str]:
    cmd = [sys.executable, "-m", "kettle.streaming.cli.main", "serve", "--port", "0"]
    cmd += ["--fake-model"] if args.fake_model else ["--model", args.model]
    cmd += args.serve_arg
    cmd += ["--max-sessions", "64", "--idle-timeout", "20", "--allocator", args.allocator]
    proc = subprocess.Popen([*cmd, *extra], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    match = re.fullmatch(r"kettle serving on (http://\S+)\n", line)
    if not match:
        proc.kill()
        raise SystemExit(f"server did not start: {line!r}")
    return proc, match.group(1)


def rss_parts_mb(pid: int) -> dict[str, float]:
    """RSS by kind of mapping: file-backed (code, the model), the brk heap, other anonymous
    memory (malloc's arenas and large blocks, thread stacks): where growth lives."""
    parts = {"file": 0.0, "heap": 0.0, "anon": 0.0}
    kind = "anon"
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        head = line.split(maxsplit=6)
        if len(head) >= 5 and "-" in head[0] and ":" not in head[0]:  # a mapping's header
            name = head[5] if len(head) > 5 else ""
            kind = "heap" if name == "[heap]" else "file" if name.startswith("/") else "anon"
        elif line.startswith("Rss:"):
            parts[kind] += int(line.split()[1]) / 1024
    return parts


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def scrape(base: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of /metrics, keyed by (name, sorted labels)."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(base + "/metrics", timeout=30) as response:
        text = response.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = float(sample.value)
    return out


def metric(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def histogram_quantile(
    before: dict[Any, float], after: dict[Any, float], name: str, q: float
) -> float | None:
    """Upper bound of the bucket holding the q-quantile of what was observed in between."""
    buckets = []
    for (sample, labels), value in after.items():
        if sample == f"{name}_bucket":
            le = dict(labels)["le"]
            bound = float("inf") if le == "+Inf" else float(le)
            buckets.append((bound, value - before.get((sample, labels), 0.0)))
    buckets.sort()
    if not buckets or buckets[-1][1] <= 0:
        return None
    total = buckets[-1][1]
    for bound, count in buckets:
        if count >= q * total:
            return bound
    return None


# -- the clients -----------------------------------------------------------------------------


@dataclass
class Phase:
    """Which kind of block is on; abusers run only while `abusive` is set."""

    abusive: asyncio.Event = field(default_factory=asyncio.Event)
    ending: asyncio.Event = field(default_factory=asyncio.Event)
    blocks: list[tuple[float, float, bool]] = field(default_factory=list)  # start, end, abusive

    def abusive_at(self, t: float) -> bool | None:
        for start, end, abusive in self.blocks:
            if start <= t < end:
                return abusive
        return None


@dataclass
class Tally:
    final_lags: list[tuple[float, float]] = field(default_factory=list)  # (received, lag)
    honest_sessions: int = 0
    honest_finals: int = 0
    honest_lost: int = 0
    honest_errors: dict[str, int] = field(default_factory=dict)
    flood_audio_s: float = 0.0  # transcribed by the server
    flood_sent_s: float = 0.0  # written to the socket
    flood_wall_s: float = 0.0
    flood_sessions: int = 0
    flood_errors: dict[str, int] = field(default_factory=dict)
    garbage_sent: int = 0
    garbage_errors: dict[str, int] = field(default_factory=dict)
    garbage_closes: dict[str, int] = field(default_factory=dict)
    disconnects: int = 0
    failures: dict[str, int] = field(default_factory=dict)  # client-side exceptions


def load_speech(args: argparse.Namespace) -> list[np.ndarray]:
    from kettle.transcribe.audio.read import load_audio

    paths = [Path(p) for p in args.audio] if args.audio else []
    if not paths:  # LibriSpeech read speech: the full eval set if named, else the tests' own
        env = os.environ.get("KETTLE_EVAL_DIR")
        eval_dir = Path(env) if env else ROOT / "tests" / "data" / "speech"
        paths = sorted((eval_dir / "audio").glob("ls__*"))[:12]
    if not paths:
        paths = [ROOT / "tests" / "data" / "jfk.flac"]
    return [load_audio(p) for p in paths]


def honest_track(clips: list[np.ndarray], index: int, seconds: float) -> np.ndarray:
    gap = np.zeros(int(GAP_S * SAMPLE_RATE), dtype=np.float32)
    parts, total, j = [gap], 0.0, index * 3
    while total < seconds:
        clip = clips[j % len(clips)]
        parts += [clip, gap]
        total += len(clip) / SAMPLE_RATE + GAP_S
        j += 1
    return np.concatenate(parts)


def _count(table: dict[str, int], key: str) -> None:
    table[key] = table.get(key, 0) + 1


async def honest(ws_url: str, track: np.ndarray, phase: Phase, tally: Tally, t0: float) -> None:
    options = ClientOptions(url=ws_url, realtime=True, chunk_ms=100, done_timeout_s=120)
    while not phase.ending.is_set():
        try:
            result = await stream_audio(track, options)
        except StreamClientError as exc:
            _count(tally.honest_errors, f"refused: {exc}"[:60])
            await asyncio.sleep(1)
            continue
        tally.honest_sessions += 1
        numbers = [f["utterance"] for f in result.finals]
        gaps = numbers != list(range(len(numbers)))
        done_ok = result.done is not None and result.done["utterances"] == len(numbers)
        tally.honest_lost += int(gaps) + (0 if done_ok else 1)
        tally.honest_finals += len(numbers)
        for error in result.errors:
            _count(tally.honest_errors, str(error.get("code")))
        for message, at in result.received:
            if message["type"] == "final":
                tally.final_lags.append((at - t0, at - (result.audio_start + message["end"])))


async def flooder(ws_url: str, audio: np.ndarray, phase: Phase, tally: Tally) -> None:
    who = "flooder"
    """Sends 50x real time while its block lasts, then leaves (a normal close, no stop).

    Its admitted rate is measured by what the server has transcribed: the furthest `end` of
    the partials and finals it got back, over the session's wall time. (What it managed to
    send is more: the kernel's socket buffers hold a few seconds of audio unread.)
    """
    data = to_s16le(audio)
    chunk = SAMPLE_RATE // 10 * 2  # 100 ms
    interval = 0.1 / FLOOD_FACTOR
    usable = len(data) - len(data) % chunk
    while not phase.ending.is_set():
        await phase.abusive.wait()
        if phase.ending.is_set():
            return
        try:
            # No client pings: our pong would wait behind the audio the server reads slowly.
            async with connect(ws_url, max_size=16 << 20, ping_interval=None) as ws:
                furthest = [0.0]

                async def read(ws: Any = ws, furthest: list[float] = furthest) -> None:
                    with contextlib.suppress(ConnectionClosed):
                        async for raw in ws:
                            if isinstance(raw, str):
                                message = json.loads(raw)
                                if message["type"] == "error":
                                    _count(tally.flood_errors, str(message.get("code")))
                                elif message["type"] in ("partial", "final"):
                                    furthest[0] = max(furthest[0], float(message["end"]))

                reader = asyncio.create_task(read())
                start = time.monotonic()
                sent = 0
                while phase.abusive.is_set() and not phase.ending.is_set():
                    due = start + sent * interval
                    if (delay := due - time.monotonic()) > 0:
                        await asyncio.sleep(delay)
                    offset = (sent * chunk) % usable
                    await ws.send(data[offset : offset + chunk])
                    sent += 1
                tally.flood_wall_s += time.monotonic() - start
                tally.flood_audio_s += furthest[0]
                tally.flood_sent_s += sent * 0.1
                tally.flood_sessions += 1
                reader.cancel()
                await asyncio.gather(reader, return_exceptions=True)
        except (OSError, InvalidStatus, ConnectionClosed) as exc:
            _count(tally.failures, f"{who}: {type(exc).__name__} {exc}"[:100])
            await asyncio.sleep(1)


GARBAGE_TEXT = [
    "not json",
    "[1, 2",
    "[]",
    '{"type": "nope"}',
    '{"type": "config", "sample_rate": 3}',
    '{"type": "config", "encoding": "mp3"}',
    '{"no_type": true}',
    '"a string"',
]


async def garbage(ws_url: str, phase: Phase, tally: Tally, seed: int) -> None:
    who = "garbage"
    rng = random.Random(seed)
    while not phase.ending.is_set():
        await phase.abusive.wait()
        if phase.ending.is_set():
            return
        try:
            async with connect(ws_url, max_size=16 << 20) as ws:

                async def read(ws: Any = ws) -> None:
                    with contextlib.suppress(ConnectionClosed):
                        async for raw in ws:
                            if isinstance(raw, str):
                                message = json.loads(raw)
                                if message["type"] == "error":
                                    _count(tally.garbage_errors, str(message.get("code")))

                reader = asyncio.create_task(read())
                session_end = time.monotonic() + 20
                big_sent = False
                while (
                    time.monotonic() < session_end
                    and phase.abusive.is_set()
                    and not phase.ending.is_set()
                ):
                    roll = rng.random()
                    if roll < 0.5:
                        await ws.send(rng.randbytes(rng.randrange(1, 6401)))
                    elif not big_sent and roll < 0.55:
                        await ws.send(rng.randbytes((1 << 20) + 1))  # over the frame limit
                        big_sent = True
                    else:
                        await ws.send(rng.choice(GARBAGE_TEXT))
                    tally.garbage_sent += 1
                    await asyncio.sleep(0.1)
                await ws.send('{"type": "stop"}')
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(reader, 60)
                _count(tally.garbage_closes, str(ws.close_code))
        except (OSError, InvalidStatus, ConnectionClosed) as exc:
            _count(tally.failures, f"{who}: {type(exc).__name__} {exc}"[:100])
            await asyncio.sleep(1)


async def disconnector(ws_url: str, audio: np.ndarray, phase: Phase, tally: Tally) -> None:
    data = to_s16le(audio)
    interval = 60.0 / DISCONNECTS_PER_MINUTE
    rng = random.Random(7)
    while not phase.ending.is_set():
        await phase.abusive.wait()
        if phase.ending.is_set():
            return
        started = time.monotonic()
        try:
            ws = await connect(ws_url, max_size=16 << 20)
            seconds = rng.uniform(1.0, 4.0)
            end = int(seconds * SAMPLE_RATE) * 2
            for offset in range(0, min(end, len(data)), 3200):
                await ws.send(data[offset : offset + 3200])
                await asyncio.sleep(0.1)
            ws.transport.abort()  # no stop, no close handshake: the TCP connection just dies
            tally.disconnects += 1
        except (OSError, InvalidStatus, ConnectionClosed) as exc:
            _count(tally.failures, f"disconnector: {type(exc).__name__} {exc}"[:100])
        await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))


# -- the run ----------------------------------------------------------------------------------


async def soak(args: argparse.Namespace, base: str, pid: int) -> dict[str, Any]:
    ws_url = base.replace("http", "ws", 1) + "/v1/stream"
    clips = load_speech(args)
    phase = Phase()
    tally = Tally()
    t0 = time.monotonic()
    rss: list[tuple[float, float]] = []
    parts: list[tuple[float, dict[str, float]]] = []
    tasks = [
        asyncio.create_task(honest(ws_url, honest_track(clips, i, 40.0), phase, tally, t0))
        for i in range(args.streams)
    ]
    if not args.no_abuse:
        flood_audio = honest_track(clips, 99, 30.0)
        tasks += [
            asyncio.create_task(flooder(ws_url, flood_audio, phase, tally)),
            asyncio.create_task(garbage(ws_url, phase, tally, seed=11)),
            asyncio.create_task(disconnector(ws_url, flood_audio, phase, tally)),
        ]

    async def sample_rss() -> None:
        n = 0
        while True:
            rss.append((time.monotonic() - t0, rss_mb(pid)))
            if n % 5 == 0:  # smaps is a longer read: every 10 s
                parts.append((time.monotonic() - t0, rss_parts_mb(pid)))
            n += 1
            await asyncio.sleep(2.0)

    sampler = asyncio.create_task(sample_rss())
    blocks = max(2, round(args.minutes * 60 / args.block_s))
    snapshots = []
    warm_rss = None
    for b in range(blocks):
        abusive = b % 2 == 1 and not args.no_abuse
        if abusive:
            phase.abusive.set()
        else:
            phase.abusive.clear()
        start = time.monotonic() - t0
        before = await asyncio.to_thread(scrape, base)
        await asyncio.sleep(args.block_s)
        after = await asyncio.to_thread(scrape, base)
        end = time.monotonic() - t0
        phase.blocks.append((start, end, abusive))
        snapshots.append((abusive, before, after))
        print(
            f"block {b + 1}/{blocks} ({'abusive' if abusive else 'quiet'}): RSS "
            f"{rss_mb(pid):.0f} MB, honest finals so far {tally.honest_finals}",
            flush=True,
        )
        if b == 1:
            warm_rss = rss_mb(pid)
    end_rss = rss_mb(pid)
    phase.abusive.clear()
    phase.ending.set()
    phase.abusive.set()  # release abusers parked on the event, so they see `ending`
    await asyncio.wait(tasks, timeout=180)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    sampler.cancel()
    # Every client is gone: the server must hold no session any more.
    final = None
    for _ in range(100):
        final = await asyncio.to_thread(scrape, base)
        if (
            metric(final, "kettle_sessions_active") + metric(final, "kettle_engine_streams_open")
            == 0
        ):
            break
        await asyncio.sleep(0.2)
    assert final is not None
    first = snapshots[0][1]
    lag_p99 = histogram_quantile(first, final, "kettle_event_loop_lag_seconds", 0.99)
    quiet_lags = [lag for at, lag in tally.final_lags if phase.abusive_at(at) is False]
    abusive_lags = [lag for at, lag in tally.final_lags if phase.abusive_at(at) is True]
    quiet_p95 = float(np.percentile(quiet_lags, 95)) if quiet_lags else float("nan")
    abusive_p95 = float(np.percentile(abusive_lags, 95)) if abusive_lags else float("nan")
    internal = metric(final, "kettle_errors_total", code="internal")
    by_block = [
        _p95([lag for at, lag in tally.final_lags if start <= at < end])
        for start, end, _ in phase.blocks
    ]
    pairs = [
        round(b / a, 3)
        for (_, _, quiet), (_, _, abusive), a, b in zip(
            phase.blocks, phase.blocks[1:], by_block, by_block[1:], strict=False
        )
        if not quiet and abusive and a and b
    ]
    pair_medians = rss_pair_medians(rss, phase.blocks)
    return {
        "streams": args.streams,
        "minutes": args.minutes,
        "block_s": args.block_s,
        "model": "fake" if args.fake_model else args.model,
        "rss_mb": [(round(t, 1), round(m, 1)) for t, m in rss],
        "rss_after_warmup_mb": round(warm_rss or float("nan"), 1),
        "rss_end_mb": round(end_rss, 1),
        "rss_growth": (end_rss / warm_rss - 1) if warm_rss else None,
        # A single sample swings by up to ~190 MB with a decode's short-lived buffers, so
        # the level is also read as the median over each quiet + abusive pair of blocks:
        # the last pair against the first pair after warm-up.
        "rss_pair_medians_mb": pair_medians,
        "rss_growth_pair_median": (
            pair_medians[-1] / pair_medians[1] - 1 if len(pair_medians) >= 3 else None
        ),
        # Whether it still grows: the last pair against the pair at half time (a leak grows
        # at the same pace throughout; caches and allocator high-water marks level off).
        "rss_growth_second_half": (
            pair_medians[-1] / pair_medians[len(pair_medians) // 2 - 1] - 1
            if len(pair_medians) >= 4
            else None
        ),
        "allocator": allocator.loaded(Path(f"/proc/{pid}/maps").read_text()),
        "rss_parts_pair_medians_mb": parts_pair_medians(parts, phase.blocks),
        "loop_lag_p99_s": lag_p99,
        "loop_lag_p99_by_block": [
            histogram_quantile(b, a, "kettle_event_loop_lag_seconds", 0.99) for _, b, a in snapshots
        ],
        "finals_lost": tally.honest_lost + int(internal),
        "sessions_leaked": int(
            metric(final, "kettle_sessions_active") + metric(final, "kettle_engine_streams_open")
        ),
        "honest_sessions": tally.honest_sessions,
        "honest_finals": tally.honest_finals,
        "honest_errors": tally.honest_errors,
        "final_lag_p95_quiet_s": quiet_p95,
        "final_lag_p95_abusive_s": abusive_p95,
        "final_lag_ratio": abusive_p95 / quiet_p95 if quiet_lags and abusive_lags else None,
        "final_lag_p95_by_block": by_block,
        # Each abusive block against the quiet block just before it: the background load
        # of a shared machine drifts over minutes, and a pair shares most of it.
        "final_lag_ratio_by_pair": pairs,
        "final_lag_ratio_paired_median": float(np.median(pairs)) if pairs else None,
        "finals_quiet": len(quiet_lags),
        "finals_abusive": len(abusive_lags),
        "flood_rate_x_realtime": (
            tally.flood_audio_s / tally.flood_wall_s if tally.flood_wall_s else None
        ),
        "flood_audio_s": round(tally.flood_audio_s, 1),
        "flood_sent_s": round(tally.flood_sent_s, 1),
        "flood_sessions": tally.flood_sessions,
        "flood_errors": tally.flood_errors,
        "garbage_sent": tally.garbage_sent,
        "garbage_errors": tally.garbage_errors,
        "garbage_closes": tally.garbage_closes,
        "disconnects": tally.disconnects,
        "client_failures": tally.failures,
        "blocks": phase.blocks,
        "server_errors": {
            dict(labels).get("code", ""): value
            for (name, labels), value in final.items()
            if name == "kettle_errors_total"
        },
    }


def _p95(values: list[float]) -> float | None:
    return round(float(np.percentile(values, 95)), 3) if values else None


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.2))
    for start, end, abusive in result["blocks"]:
        if abusive:
            ax.axvspan(start / 60, end / 60, color="tab:red", alpha=0.12, lw=0)
    times = [t / 60 for t, _ in result["rss_mb"]]
    ax.plot(times, [m for _, m in result["rss_mb"]], color="tab:blue", label="server RSS")
    warm = result["rss_after_warmup_mb"]
    ax.axhline(warm * 1.1, color="grey", ls="--", lw=1, label="after warm-up + 10 %")
    ax.set_xlabel("minutes (red: abusive clients on)")
    ax.set_ylabel("RSS (MB)")
    ax.set_title(
        f"soak: {result['streams']} honest streams, {result['model']}; final lag P95 "
        f"{result['final_lag_p95_abusive_s']:.2f} s abusive vs "
        f"{result['final_lag_p95_quiet_s']:.2f} s quiet"
    )
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def parts_pair_medians(
    parts: list[tuple[float, dict[str, float]]], blocks: list[tuple[float, float, bool]]
) -> dict[str, list[float]]:
    """Each kind of RSS (rss_parts_mb) as its median per pair of blocks."""
    kinds = parts[0][1] if parts else {}
    return {kind: rss_pair_medians([(t, p[kind]) for t, p in parts], blocks) for kind in kinds}


def rss_pair_medians(
    rss: list[tuple[float, float]], blocks: list[tuple[float, float, bool]]
) -> list[float]:
    """The median RSS sample within each pair of blocks (quiet + abusive), in order."""
    medians = []
    for first, second in zip(blocks[::2], blocks[1::2], strict=False):
        samples = [m for t, m in rss if first[0] <= t < second[1]]
        if samples:
            medians.append(round(float(np.median(samples)), 1))
    return medians


def report(result: dict[str, Any], args: argparse.Namespace) -> None:
    rows = [
        {"figure": "RSS after warm-up (MB)", "value": result["rss_after_warmup_mb"]},
        {"figure": "RSS at the end (MB)", "value": result["rss_end_mb"]},
        {"figure": "RSS growth after warm-up", "value": _pct(result["rss_growth"])},
        {
            "figure": "RSS median per pair of blocks (MB); last pair vs first after warm-up",
            "value": f"{result['rss_pair_medians_mb']} ({_pct(result['rss_growth_pair_median'])})",
        },
        {
            "figure": "RSS median, last pair vs the pair at half time",
            "value": _pct(result.get("rss_growth_second_half")),
        },
        {"figure": "allocator", "value": result["allocator"]},
        {
            "figure": "RSS by kind, median per pair of blocks (MB): file-backed, brk heap, "
            "other anonymous",
            "value": "; ".join(
                f"{kind} {medians}" for kind, medians in result["rss_parts_pair_medians_mb"].items()
            ),
        },
        {"figure": "event-loop lag P99 (bucket bound, s)", "value": result["loop_lag_p99_s"]},
        {"figure": "finals lost", "value": result["finals_lost"]},
        {"figure": "sessions leaked", "value": result["sessions_leaked"]},
        {"figure": "honest sessions / finals", "value": _pair(result, "honest")},
        {"figure": "honest final lag P95, quiet blocks (s)", "value": _f(result, "quiet")},
        {"figure": "honest final lag P95, abusive blocks (s)", "value": _f(result, "abusive")},
        {"figure": "abusive / quiet", "value": _ratio(result["final_lag_ratio"])},
        {
            "figure": "abusive / quiet, each pair of blocks (median)",
            "value": f"{result['final_lag_ratio_by_pair']} "
            f"({_ratio(result['final_lag_ratio_paired_median'])})",
        },
        {
            "figure": "honest final lag P95 per block (s)",
            "value": ", ".join(
                f"{'A' if abusive else 'Q'} {'n/a' if p95 is None else f'{p95:.2f}'}"
                for (_, _, abusive), p95 in zip(
                    result["blocks"], result["final_lag_p95_by_block"], strict=True
                )
            ),
        },
        {
            "figure": "flooder's admitted rate (x real time)",
            "value": result["flood_rate_x_realtime"],
        },
        # Notices such as `overloaded` (partials thinned, finals follow); any other error
        # to an honest client is a failure, counted in finals lost or client failures.
        {"figure": "honest clients' errors", "value": result["honest_errors"] or "none"},
        {"figure": "flooder's errors", "value": result["flood_errors"] or "none"},
        {"figure": "garbage messages sent / errors back", "value": _garbage(result)},
        {"figure": "abrupt disconnects", "value": result["disconnects"]},
    ]
    table = markdown_table(rows, ["figure", "value"])
    print(table)
    if args.no_write:
        return
    png = HERE / "soak.png"
    plot(result, png)
    body = (
        f"{args.streams} honest real-time streams for {args.minutes:g} minutes in alternating "
        f"{args.block_s:g} s blocks, quiet and abusive (a 50x real-time flooder, a garbage "
        "sender, 10 abrupt disconnects a minute); warm-up is the first quiet + abusive pair. "
        "Whatever else the machine ran (see the note) the interleaved blocks share alike; "
        f"1-minute load average {result['load_average_start_end'][0]} at the start, "
        f"{result['load_average_start_end'][1]} at the end.\n\n"
        + (f"{args.note}\n\n" if args.note else "")
        + table
        + "\n![soak RSS](soak.png)\n"
    )
    write_section("soak", body)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:+.1f} %"


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _f(result: dict[str, Any], which: str) -> str:
    return f"{result[f'final_lag_p95_{which}_s']:.2f} ({result[f'finals_{which}']} finals)"


def _pair(result: dict[str, Any], who: str) -> str:
    return f"{result[f'{who}_sessions']} / {result[f'{who}_finals']}"


def _garbage(result: dict[str, Any]) -> str:
    return f"{result['garbage_sent']} / {result['garbage_errors']}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=4, help="honest real-time streams")
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--block-s", type=float, default=60.0, help="length of each block")
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--fake-model", action="store_true")
    parser.add_argument(
        "--serve-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="pass ARG to `kettle serve` (repeatable; e.g. --serve-arg=--release-memory-s=0)",
    )
    parser.add_argument(
        "--allocator",
        choices=("auto", "glibc", "jemalloc", "tcmalloc"),
        default="auto",
        help="the server's malloc (kettle serve --allocator)",
    )
    parser.add_argument("--no-abuse", action="store_true", help="honest streams only")
    parser.add_argument("--audio", nargs="*", default=None, help="speech files (default: eval)")
    parser.add_argument("--json", default=None, metavar="PATH", help="write the result here")
    parser.add_argument("--no-write", action="store_true", help="leave RESULTS.md alone")
    parser.add_argument("--note", default="", help="a paragraph for RESULTS.md (conditions)")
    args = parser.parse_args(argv)
    load_start = os.getloadavg()[0]
    proc, base = start_server(args)
    try:
        result = asyncio.run(soak(args, base, proc.pid))
        result["load_average_start_end"] = [round(load_start, 1), round(os.getloadavg()[0], 1)]
    finally:
        stop_server(proc)
    result["machine"] = machine_info()
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    print(json.dumps({k: v for k, v in result.items() if k not in ("rss_mb", "blocks")}))
    report(result, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
