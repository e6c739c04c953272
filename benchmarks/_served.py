"""bench_accuracy's `served` method: each set streamed through a real `kettle serve` in real time.

What a user of the browser page gets (issue 37): a `kettle serve` subprocess with its defaults,
and a kettle v1 client that sends the page's own `config` (web/app.js: partials, word
timestamps, ``revisions: true``), then the audio as s16le 16 kHz in 100 ms chunks, each sent
at the wall time its last sample would have been recorded (one monotonic clock, sleeping until
each target), then `stop`, reading until `done`. Every message is kept with its wall arrival
time, and every chunk with the wall time it was sent, so an audio position maps to the wall
time the server had it.

Per set (and per number of concurrent streams) it reports:

- ``live`` WER: the finals as sent; ``refined``: each final replaced by its latest revision
  (Whisper's English normaliser, the same scorer as bench_accuracy's other columns);
- ``live (no rev)``: the same audio streamed with ``revisions: false``, interleaved with the
  revision runs (alternating which goes first), for the live finals' WER and the server's CPU
  seconds per audio second without refinements (utime+stime of the server and its children,
  /proc/PID/stat);
- how many finals with audio after them (not a stream's last) got a revision, by the
  revision's order of arrival for its final (the v1 revision carries no pass number: a
  ``pass`` field is read where a server sends one), and the server's own counters
  ``kettle_refinements_total{outcome}`` (revised, unchanged, kept, skipped, last) and
  ``kettle_revision_delay_seconds`` from /metrics, read before and after each run: a
  refinement that read the same words sends nothing, so only the counters see it;
- each revision's delay from the NEXT utterance's end: its wall arrival minus the wall time
  the audio at the end of final n+1 was sent (negative: it came before that utterance ended);
- each revision's effect alone: the live transcript with only that revision applied, better,
  worse or the same WER than the live transcript.

With ``--trace`` the server logs its refinement pass at DEBUG (the loggers in TRACE_LOGGERS,
enabled by a ``sitecustomize`` on the server's PYTHONPATH, no other logger changed), and the
lines each run produced are kept in the JSON beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import math
import os
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

SR = 16000
CHUNK_MS = 100
STAGGER_S = 1.0  # concurrent streams start this far apart, so their pauses do not line up
WARMUP_S = 10.0  # of the first track, streamed once and discarded before any measured run
DONE_TIMEOUT_S = 120.0  # after the last audio, for the remaining finals, revisions and `done`
SECTION = "bench_accuracy_served"
OUTCOMES = ("revised", "unchanged", "kept", "skipped", "last")
WATCHED = ("kettle_refinements_total", "kettle_revision_delay_seconds", "kettle_final_lag_seconds")
TRACE_LOGGERS = (
    "kettle.streaming.core.refine",
    "kettle.streaming.core.refine_lane",
    "kettle.streaming.core.requests",
    "kettle.streaming.engine.engine",
)
_EPS = 1e-9


def page_config(revisions: bool) -> dict[str, Any]:
    """The `config` web/app.js sends (no diarize), with ``revisions`` as given."""
    return {
        "type": "config",
        "sample_rate": SR,
        "encoding": "pcm_s16le",
        "channels": 1,
        "language": None,
        "partials": True,
        "word_timestamps": True,
        "revisions": revisions,
    }


# --- records ---------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Track:
    name: str
    audio: np.ndarray
    reference: str
    offset_s: float = 0.0  # wall seconds to wait before connecting


@dataclasses.dataclass
class StreamLog:
    """One stream: its messages (no partials) with wall arrival times, and what was sent when:
    ``sent`` holds (samples sent so far, wall time), one entry per chunk."""

    name: str
    reference: str
    audio_s: float
    messages: list[tuple[float, dict[str, Any]]] = dataclasses.field(default_factory=list)
    sent: list[tuple[int, float]] = dataclasses.field(default_factory=list)
    partials: int = 0


@dataclasses.dataclass(frozen=True)
class FinalRec:
    utterance: int
    text: str
    end_s: float  # audio seconds
    wall: float


@dataclasses.dataclass(frozen=True)
class RevisionRec:
    utterance: int
    text: str
    wall: float
    order: int  # the server's pass where the message says it, else 1, 2, ... by arrival


@dataclasses.dataclass
class Run:
    """One group of concurrent streams with revisions on or off, and what the server did."""

    set_name: str
    streams: int
    revisions: bool
    logs: list[StreamLog]
    cpu_s: float
    metrics: dict[str, float]  # counter and histogram deltas over the run
    trace: list[str] = dataclasses.field(default_factory=list)

    @property
    def audio_s(self) -> float:
        return sum(log.audio_s for log in self.logs)


# --- pure scoring ----------------------------------------------------------------------------
def wer(pairs: Sequence[tuple[str, str]]) -> float | None:
    from kettle.streaming.cli.simulation import corpus_wer

    return corpus_wer(pairs)


def finals_of(log: StreamLog) -> list[FinalRec]:
    return [
        FinalRec(int(m["utterance"]), str(m["text"]), float(m["end"]), wall)
        for wall, m in log.messages
        if m.get("type") == "final"
    ]


def revisions_of(log: StreamLog) -> list[RevisionRec]:
    seen: Counter[int] = Counter()
    out = []
    for wall, m in log.messages:
        if m.get("type") != "revision":
            continue
        number = int(m["utterance"])
        seen[number] += 1
        order = int(m.get("pass", m.get("refinement", seen[number])))
        out.append(RevisionRec(number, str(m["text"]), wall, order))
    return out


def live_text(finals: Sequence[FinalRec]) -> str:
    return " ".join(f.text for f in finals)


def refined_text(finals: Sequence[FinalRec], revisions: Sequence[RevisionRec]) -> str:
    """The transcript a client holds at `done`: each final's latest revision, else the final."""
    latest = {r.utterance: r.text for r in revisions}  # in arrival order: the last one wins
    return " ".join(latest.get(f.utterance, f.text) for f in finals)


def revision_effects(
    reference: str, finals: Sequence[FinalRec], revisions: Sequence[RevisionRec]
) -> Counter[str]:
    """Each revision applied alone to the live finals: better, worse or same WER than live."""
    base = wer([(reference, live_text(finals))]) or 0.0
    effects: Counter[str] = Counter()
    for revision in revisions:
        score = wer([(reference, refined_text(finals, [revision]))]) or 0.0
        effects[
            "better" if score < base - _EPS else "worse" if score > base + _EPS else "same"
        ] += 1
    return effects


def wall_at(sent: Sequence[tuple[int, float]], seconds: float) -> float | None:
    """The wall time the audio at ``seconds`` was sent: the first chunk holding it (None: never
    sent). ``sent`` is (samples sent so far, wall time), in order."""
    position = round(seconds * SR)
    ends = [n for n, _ in sent]
    k = int(np.searchsorted(ends, position, side="left"))
    return sent[k][1] if k < len(sent) else None


def next_end_delays(
    finals: Sequence[FinalRec], revisions: Sequence[RevisionRec], sent: Sequence[tuple[int, float]]
) -> list[tuple[int, float]]:
    """(order, seconds) per revision of final n: its arrival minus the wall time the audio at
    the end of final n+1 was sent. A revision with no final after its own is left out."""
    by_number = {f.utterance: f for f in finals}
    out = []
    for r in revisions:
        following = by_number.get(r.utterance + 1)
        sent_at = None if following is None else wall_at(sent, following.end_s)
        if sent_at is not None:
            out.append((r.order, r.wall - sent_at))
    return out


def stream_clock(sent: Sequence[tuple[int, float]], wall: float) -> float:
    """``wall`` on the stream's audio clock: seconds since its first sample would have been
    recorded (the first chunk was sent when its last sample was)."""
    if not sent:
        return 0.0
    return wall - (sent[0][1] - sent[0][0] / SR)


def timeline(log: StreamLog) -> list[list[Any]]:
    """[type, utterance, its end (audio s), its arrival on the stream's clock (s)] per final
    and revision: arrival minus end is its lag; past the audio's length, after `stop`."""
    return [
        [m["type"], m["utterance"], m["end"], round(stream_clock(log.sent, wall), 2)]
        for wall, m in log.messages
        if m.get("type") in ("final", "revision")
    ]


def final_lags(finals: Sequence[FinalRec], sent: Sequence[tuple[int, float]]) -> list[float]:
    """Each final's arrival minus the wall time its end's audio was sent."""
    out = []
    for f in finals:
        sent_at = wall_at(sent, f.end_s)
        if sent_at is not None:
            out.append(f.wall - sent_at)
    return out


def percentile(values: Sequence[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 2) if values else None


# --- the server's /metrics -------------------------------------------------------------------
def parse_metrics(text: str) -> dict[str, float]:
    """The watched series (name and labels -> value) of a Prometheus text page."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(WATCHED) and "_created" not in line:
            series, _, value = line.rpartition(" ")
            out[series] = float(value)
    return out


def metric_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v - before.get(k, 0.0)}


def outcomes(delta: dict[str, float]) -> dict[str, int]:
    """kettle_refinements_total by outcome, from a delta."""
    prefix = 'kettle_refinements_total{outcome="'
    counts = {k: 0 for k in OUTCOMES}
    for series, value in delta.items():
        if series.startswith(prefix):
            counts[series[len(prefix) :].split('"')[0]] = round(value)
    return counts


def histogram(delta: dict[str, float], name: str) -> dict[str, Any]:
    """Count, mean and cumulative bucket counts of histogram ``name`` in a delta."""
    count = delta.get(f"{name}_count", 0.0)
    buckets = {
        series.split('le="')[1].split('"')[0]: round(value)
        for series, value in delta.items()
        if series.startswith(f"{name}_bucket")
    }
    mean = delta.get(f"{name}_sum", 0.0) / count if count else None
    return {"count": round(count), "mean": None if mean is None else round(mean, 2), "le": buckets}


def scrape(base: str) -> dict[str, float]:
    with urllib.request.urlopen(base + "/metrics", timeout=10) as response:
        return parse_metrics(response.read().decode())


def cpu_seconds(pid: int) -> float:
    """utime+stime of ``pid`` and its live descendants, plus its waited-for children's."""
    total = 0
    for k, p in enumerate(process_tree(pid)):
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(fields[i]) for i in ((11, 12, 13, 14) if k == 0 else (11, 12)))
    return total / os.sysconf("SC_CLK_TCK")


def process_tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*/children"):
            with contextlib.suppress(OSError):
                todo += [int(c) for c in task.read_text().split()]
    return out


def trace_fields(line: str) -> dict[str, str]:
    """The ``key=value`` fields of a trace line (values without spaces, or Python reprs in
    quotes), e.g. ``refine request: final=3 pass=1 window=12.40-21.90 prompt='...'``."""
    import re

    pattern = r"(\w+)=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|\S+)"
    return {key: value for key, value in re.findall(pattern, line)}


# --- the client ------------------------------------------------------------------------------
async def stream_track(url: str, track: Track, *, revisions: bool, chunk_ms: int) -> StreamLog:
    """One stream as the page sends it, paced in real time; every wait bounded."""
    from websockets.asyncio.client import connect

    await asyncio.sleep(track.offset_s)
    log = StreamLog(track.name, track.reference, len(track.audio) / SR)
    pcm = (np.clip(track.audio, -1.0, 1.0) * 32767).astype("<i2").tobytes()
    step = SR * chunk_ms // 1000
    async with connect(url, max_size=None, open_timeout=30, close_timeout=10) as ws:
        await ws.send(json.dumps(page_config(revisions)))
        reader = asyncio.create_task(_read(ws, log))
        try:
            t0 = time.monotonic()
            for start in range(0, len(track.audio), step):
                end = min(len(track.audio), start + step)
                await asyncio.sleep(max(0.0, t0 + end / SR - time.monotonic()))
                await asyncio.wait_for(ws.send(pcm[2 * start : 2 * end]), 30)
                log.sent.append((end, time.monotonic()))
            await ws.send(json.dumps({"type": "stop"}))
            await asyncio.wait_for(reader, DONE_TIMEOUT_S)
        finally:
            reader.cancel()
    return log


async def _read(ws: Any, log: StreamLog) -> None:
    async for raw in ws:
        if not isinstance(raw, str):
            continue
        message = json.loads(raw)
        kind = message.get("type")
        if kind == "partial":
            log.partials += 1
            continue
        log.messages.append((time.monotonic(), message))
        if kind == "done" or message.get("fatal"):
            return


async def _gather(url: str, tracks: Sequence[Track], revisions: bool, chunk_ms: int) -> list[Any]:
    runs = (stream_track(url, t, revisions=revisions, chunk_ms=chunk_ms) for t in tracks)
    return list(await asyncio.gather(*runs))


def groups(tracks: Sequence[Track], n: int) -> list[list[Track]]:
    """Groups of ``n`` concurrent streams over the set's items, cycling to fill the last one;
    the k-th stream of a group starts k * STAGGER_S later."""
    if n <= 1:
        return [[t] for t in tracks]
    count = math.ceil(len(tracks) / n)
    return [
        [dataclasses.replace(tracks[(g * n + k) % len(tracks)], offset_s=k * STAGGER_S)
         for k in range(n)]
        for g in range(count)
    ]  # fmt: skip


# --- the runs --------------------------------------------------------------------------------
@dataclasses.dataclass
class Server:
    pid: int
    base: str
    log: IO[str] | None  # the server's stderr, with --trace

    @property
    def url(self) -> str:
        return self.base.replace("http", "ws", 1) + "/v1/stream"

    def trace_since(self, offset: int) -> tuple[list[str], int]:
        """The refinement log lines written since ``offset``, and the new offset."""
        if self.log is None:
            return [], offset
        self.log.flush()
        with open(self.log.name, encoding="utf-8", errors="replace") as fh:
            fh.seek(offset)
            text = fh.read()
            end = fh.tell()
        return [ln for ln in text.splitlines() if ln.startswith("DEBUG kettle.")], end


def run_group(
    server: Server, set_name: str, tracks: Sequence[Track], revisions: bool, chunk_ms: int
) -> Run:
    offset = os.path.getsize(server.log.name) if server.log is not None else 0
    before, cpu0 = scrape(server.base), cpu_seconds(server.pid)
    logs = asyncio.run(_gather(server.url, tracks, revisions, chunk_ms))
    time.sleep(0.3)  # the last revision's histogram sample is taken after its send
    cpu = cpu_seconds(server.pid) - cpu0
    delta = metric_delta(before, scrape(server.base))
    trace, _ = server.trace_since(offset)
    return Run(set_name, len(tracks), revisions, logs, cpu, delta, trace)


@contextlib.contextmanager
def serving(trace: bool, python: str = sys.executable) -> Iterator[Server]:
    """`kettle serve` with its defaults on 127.0.0.1, an ephemeral port, run by ``python``
    (another install's interpreter serves another commit: before and after); stopped after."""
    from _serve import kettle_serving

    with contextlib.ExitStack() as stack:
        env, log = None, None
        if trace:
            folder = stack.enter_context(tempfile.TemporaryDirectory())
            Path(folder, "sitecustomize.py").write_text(
                "import logging\n"
                f"for name in {TRACE_LOGGERS!r}:\n"
                "    logging.getLogger(name).setLevel(logging.DEBUG)\n",
                encoding="utf-8",
            )
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(p for p in (folder, env.get("PYTHONPATH")) if p)
            log = stack.enter_context(open(Path(folder, "server.log"), "w+", encoding="utf-8"))
        proc, base = stack.enter_context(
            kettle_serving(["--host", "127.0.0.1"], env=env, stderr=log, python=python)
        )
        yield Server(proc.pid, base, log)


def measure(
    sets: dict[str, list[Track]], streams: Sequence[int], compare: bool, trace: bool,
    chunk_ms: int = CHUNK_MS, python: str = sys.executable, before: str | None = None,
) -> list[Run]:  # fmt: skip
    """Every set at every stream count, with revisions and (``compare``) without, the two
    interleaved group by group, alternating which goes first. With ``before`` (another
    install's interpreter) a second server runs each group too, interleaved the same way;
    its rows are the set's name with " before"."""
    runs: list[Run] = []
    with contextlib.ExitStack() as stack:
        servers = [("", stack.enter_context(serving(trace, python)))]
        if before is not None:
            servers.append((" before", stack.enter_context(serving(False, before))))
        first = next(t for tracks in sets.values() for t in tracks)
        warm = dataclasses.replace(first, audio=first.audio[: int(WARMUP_S * SR)])
        for _, server in servers:
            print(brief(run_group(server, "warm-up", [warm], True, chunk_ms)), flush=True)
        turn = 0
        for n in streams:
            for set_name, tracks in sets.items():
                for group in groups(tracks, n):
                    modes = (True, False) if compare else (True,)
                    order = [(label, srv, rev) for label, srv in servers for rev in modes]
                    for label, server, revisions in order if turn % 2 == 0 else order[::-1]:
                        run = run_group(server, set_name + label, group, revisions, chunk_ms)
                        runs.append(run)
                        print(brief(run), flush=True)
                    turn += 1
    return runs


def brief(run: Run) -> str:
    logs = run.logs
    live = wer([(log.reference, live_text(finals_of(log))) for log in logs])
    refined = wer(
        [(log.reference, refined_text(finals_of(log), revisions_of(log))) for log in logs]
    )
    revs = sum(len(revisions_of(log)) for log in logs)
    return (
        f"[served {run.set_name} x{run.streams}{' revisions' if run.revisions else ''}] "
        f"{', '.join(log.name for log in logs)}: live {_pct(live)} refined {_pct(refined)}, "
        f"{revs} revisions, cpu {run.cpu_s / run.audio_s:.2f} s/s, {outcomes(run.metrics)}"
    )


# --- summary ---------------------------------------------------------------------------------
def summarize(on: Sequence[Run], off: Sequence[Run]) -> dict[str, Any]:
    """One row: a set at one stream count, from its runs with and without revisions."""
    logs = [log for r in on for log in r.logs]
    finals = [finals_of(log) for log in logs]
    revs = [revisions_of(log) for log in logs]
    effects: Counter[str] = Counter()
    delays: list[tuple[int, float]] = []
    for log, f, r in zip(logs, finals, revs, strict=True):
        effects += revision_effects(log.reference, f, r)
        delays += next_end_delays(f, r, log.sent)
    counts: Counter[str] = Counter()
    for run in on:
        counts.update(outcomes(run.metrics))
    due = sum(max(0, len(f) - 1) for f in finals)
    ran = counts["revised"] + counts["unchanged"] + counts["kept"]
    orders = sorted({o for o, _ in delays} | {x.order for r in revs for x in r})
    row: dict[str, Any] = {
        "streams": on[0].streams if on else None,
        "items": len(logs),
        "audio_s": round(sum(log.audio_s for log in logs), 1),
        "live_wer": wer(
            [(log.reference, live_text(f)) for log, f in zip(logs, finals, strict=True)]
        ),
        "refined_wer": wer(
            [
                (log.reference, refined_text(f, r))
                for log, f, r in zip(logs, finals, revs, strict=True)
            ]
        ),
        "finals": sum(len(f) for f in finals),
        "finals_with_audio_after": due,
        "finals_revised": sum(len({x.utterance for x in r}) for r in revs),
        "revisions_by_order": {str(o): sum(x.order == o for r in revs for x in r) for o in orders},
        "refinements": dict(counts),
        "refinements_ran_per_final": round(ran / due, 2) if due else None,
        "delay_from_next_end": {str(o): _stats([d for k, d in delays if k == o]) for o in orders}
        | {"all": _stats([d for _, d in delays])},
        "server_revision_delay": _merge_hist([r.metrics for r in on]),
        "effects_better_worse_same": [effects["better"], effects["worse"], effects["same"]],
        "final_lag": _stats(
            [x for log, f in zip(logs, finals, strict=True) for x in final_lags(f, log.sent)]
        ),
        "cpu_per_audio_s": _cpu(on),
        "errors": [m for log in logs for _, m in log.messages if m.get("type") == "error"],
    }
    if off:
        off_logs = [log for r in off for log in r.logs]
        row["live_wer_no_revisions"] = wer(
            [(log.reference, live_text(finals_of(log))) for log in off_logs]
        )
        row["final_lag_no_revisions"] = _stats(
            [x for log in off_logs for x in final_lags(finals_of(log), log.sent)]
        )
        row["cpu_per_audio_s_no_revisions"] = _cpu(off)
        if row["cpu_per_audio_s"] and row["cpu_per_audio_s_no_revisions"]:
            row["cpu_ratio"] = round(
                row["cpu_per_audio_s"] / row["cpu_per_audio_s_no_revisions"], 2
            )
    return row


def _stats(values: Sequence[float]) -> dict[str, Any]:
    return {"n": len(values), "p50": percentile(values, 50), "p95": percentile(values, 95)}


def _cpu(runs: Sequence[Run]) -> float | None:
    audio = sum(r.audio_s for r in runs)
    return round(sum(r.cpu_s for r in runs) / audio, 3) if audio else None


def _merge_hist(deltas: Sequence[dict[str, float]]) -> dict[str, Any]:
    merged: Counter[str] = Counter()
    for d in deltas:
        merged.update(d)
    return histogram(dict(merged), "kettle_revision_delay_seconds")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f} %"


def rows_of(runs: Sequence[Run]) -> list[dict[str, Any]]:
    keys = list(dict.fromkeys((r.set_name, r.streams) for r in runs))
    out = []
    for set_name, n in keys:
        mine = [r for r in runs if (r.set_name, r.streams) == (set_name, n)]
        on = [r for r in mine if r.revisions]
        off = [r for r in mine if not r.revisions]
        out.append({"set": set_name, **summarize(on, off)})
    return out


# --- the report ------------------------------------------------------------------------------
COLUMNS = [
    "set", "N", "audio s", "live", "refined", "live, no rev", "at once", "revised/due",
    "by order", "server r/u/k/s/l", "delay 1 P50/P95", "delay 2 P50/P95", "b/w/s",
    "CPU s/s rev/no", "final lag P95 rev/no",
]  # fmt: skip


def table_row(row: dict[str, Any], at_once: dict[str, float | None]) -> dict[str, object]:
    delay = row["delay_from_next_end"]
    counts = row["refinements"]
    lag_off = row.get("final_lag_no_revisions", {}).get("p95", "-")
    cpu_off = row.get("cpu_per_audio_s_no_revisions", "-")
    return {
        "set": row["set"],
        "N": row["streams"],
        "audio s": row["audio_s"],
        "live": _pct(row["live_wer"]),
        "refined": _pct(row["refined_wer"]),
        "live, no rev": _pct(row.get("live_wer_no_revisions")),
        "at once": ", ".join(f"{m} {_pct(v)}" for m, v in at_once.items()) or "-",
        "revised/due": f"{row['finals_revised']}/{row['finals_with_audio_after']}",
        "by order": "/".join(str(v) for v in row["revisions_by_order"].values()) or "0",
        "server r/u/k/s/l": "/".join(str(counts.get(k, 0)) for k in OUTCOMES),
        "delay 1 P50/P95": _pair(delay.get("1")),
        "delay 2 P50/P95": _pair(delay.get("2")),
        "b/w/s": "/".join(str(x) for x in row["effects_better_worse_same"]),
        "CPU s/s rev/no": f"{row['cpu_per_audio_s']}/{cpu_off}",
        "final lag P95 rev/no": f"{row['final_lag']['p95']}/{lag_off}",
    }


def _pair(stats: dict[str, Any] | None) -> str:
    return "-" if not stats or not stats["n"] else f"{stats['p50']}/{stats['p95']} ({stats['n']})"


def at_once_wers(at_once_rows: Sequence[dict[str, Any]], set_name: str) -> dict[str, float | None]:
    """bench_accuracy's decode-at-once WERs of a set, by method (refined: also its live)."""
    out: dict[str, float | None] = {}
    for r in at_once_rows:
        if r["set"] != set_name or "wer" not in r:
            continue
        if "live_wer" in r:
            out[f"{r['method']} live"] = r["live_wer"]
        out[r["method"]] = r["wer"]
    return out


def report(
    runs: Sequence[Run], at_once_rows: Sequence[dict[str, Any]], args: argparse.Namespace
) -> dict[str, Any]:
    from _results import machine_info, markdown_table, write_section

    rows = rows_of(runs)
    for row in rows:
        row["at_once"] = at_once_wers(at_once_rows, row["set"])
    result = {
        "machine": machine_info(),
        "server": "kettle serve --host 127.0.0.1 (defaults)",
        "load_avg_end": round(os.getloadavg()[0], 1),
        "chunk_ms": args.served_chunk_ms,
        "rows": rows,
        "transcripts": [_transcript(r, log) for r in runs for log in r.logs],
        "trace": [
            {
                "set": r.set_name,
                "streams": r.streams,
                "revisions": r.revisions,
                "lines": r.trace,
            }
            for r in runs
        ]
        if args.trace
        else None,
    }
    # One line per transcript and per trace run: the file stays readable and small.
    args.served_out.write_text(compact_json(result) + "\n", encoding="utf-8")
    table = markdown_table([table_row(r, r["at_once"]) for r in rows], COLUMNS)
    print(table)
    if not args.no_write:
        write_section(args.served_section, _section_text(table, args.served_out.name))
    return result


def _transcript(run: Run, log: StreamLog) -> dict[str, Any]:
    finals, revs = finals_of(log), revisions_of(log)
    return {
        "set": run.set_name, "streams": run.streams, "revisions": run.revisions,
        "item": log.name, "partials": log.partials,
        "live": live_text(finals), "refined": refined_text(finals, revs),
        "revisions_sent": [[r.utterance, r.order, r.text] for r in revs],
        "timeline": timeline(log),
    }  # fmt: skip


def compact_json(result: dict[str, Any]) -> str:
    """``result`` as JSON with each top-level list's items on a line of their own."""
    parts = []
    for key, value in result.items():
        if isinstance(value, list):
            items = ",\n  ".join(json.dumps(v, separators=(",", ":")) for v in value)
            parts.append(f" {json.dumps(key)}: [\n  {items}\n ]")
        else:
            parts.append(f" {json.dumps(key)}: {json.dumps(value)}")
    return "{\n" + ",\n".join(parts) + "\n}"


def _section_text(table: str, json_name: str) -> str:
    return (
        "Real time through a `kettle serve` subprocess (defaults, tiny.en), the page's "
        "config (`revisions: true`), 100 ms chunks paced in real time; each group once "
        "with and once without revisions, interleaved. N: concurrent streams. WER after "
        "Whisper's normaliser: `live` the finals as sent, `refined` with each final's latest "
        "revision, `live, no rev` the run without revisions; `at once` bench_accuracy's "
        "decode-at-once columns for the same items. `revised/due`: finals revised of those "
        "with audio after them; `by order`: revisions, first/second for their final; "
        "`server r/u/k/s/l`: kettle_refinements_total revised/unchanged/kept/skipped/last. "
        "`delay k`: wall seconds from the end of the next utterance's audio being sent to "
        "the k-th revision's arrival (count). `b/w/s`: each revision alone better/worse/same. "
        "CPU: server seconds per audio second. Lag: final's wall lag from its end's audio, s."
        f" Load average at the end: {os.getloadavg()[0]:.1f} (2 cores shared: compare rows of "
        f"one run).\n\n{table}\nEverything per set, with transcripts: `{json_name}`.\n"
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("served (issue 37): real time through `kettle serve`")
    group.add_argument(
        "--served", action="store_true", help="also stream each set through a server"
    )
    group.add_argument(
        "--served-streams",
        default=None,
        help="comma-separated concurrent stream counts, e.g. 1,3 (implies --served; default 1)",
    )
    group.add_argument(
        "--served-revisions-only",
        action="store_true",
        help="skip the interleaved runs with revisions: false (no CPU or live comparison)",
    )
    group.add_argument("--served-chunk-ms", type=int, default=CHUNK_MS)
    group.add_argument("--trace", action="store_true", help="keep the refinement pass's log")
    group.add_argument(
        "--served-out", type=Path, default=Path(__file__).resolve().parent / f"{SECTION}.json"
    )
    group.add_argument("--served-section", default=SECTION)
    group.add_argument(
        "--served-before",
        default=None,
        help="a second server from this interpreter (another commit's install), interleaved",
    )
    group.add_argument(
        "--served-python",
        default=sys.executable,
        help="the interpreter whose kettle serves (another commit's install: the before)",
    )


def wanted(args: argparse.Namespace) -> list[int] | None:
    """The stream counts asked for, or None when no served run was."""
    if args.served_streams:
        return [int(n) for n in args.served_streams.split(",")]
    return [1] if args.served else None


def run(args: argparse.Namespace, sets: dict[str, list[Any]], at_once_rows: list[Any]) -> int:
    """bench_accuracy's hook: its sets (Items; set n, no words, left out) and its rows."""
    streams = wanted(args)
    assert streams is not None
    tracks = {
        name: [Track(i.name, i.audio, i.reference) for i in items]
        for name, items in sets.items()
        if name != "n"
    }
    runs = measure(tracks, streams, not args.served_revisions_only, args.trace,
                   args.served_chunk_ms, args.served_python, args.served_before)  # fmt: skip
    report(runs, at_once_rows, args)
    return 0
