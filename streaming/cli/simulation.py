"""`kettle simulate`: push audio through the engine as live streams and measure what comes out.

Pure pieces first (event records, latency statistics, stable-text revision counting, WER),
then the runner that plays clips into an Engine in real time or as fast as it takes them.
The command-line glue lives in cli_simulate.py; benchmarks use ``run_simulation`` directly.

Latencies, per stream, on that stream's wall clock (seconds since it started):

- partial lag: wall time a partial arrived minus the wall time the audio up to its ``end``
  had been fed;
- final lag: wall time a final arrived minus the wall time of the endpoint decision (when
  the audio on which the session decided the end had been fed);
- final lag from speech end: wall time of the final minus the wall time its ``end`` was fed.

In real-time mode audio is fed at its own pace, so "wall time when sample n was fed" is n /
16000 and the lags read as "seconds behind the speaker".
"""

from __future__ import annotations

import asyncio
import bisect
import functools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from kettle.streaming.core.agreement import normalized, split_words
from kettle.streaming.core.events import (
    Done,
    Error,
    Event,
    Final,
    Partial,
    Revision,
    samples_to_seconds,
)
from kettle.streaming.core.session import SessionConfig
from kettle.streaming.engine.engine import Engine, Stream
from kettle.streaming.protocols.kettle_v1 import wire as protocol
from kettle.transcribe.types import SAMPLE_RATE

CHUNK_SAMPLES = SAMPLE_RATE // 50  # 20 ms, as a browser or phone sends it
GAP_SECONDS = 1.0  # silence between consecutive clips of one stream


# --- pure pieces -------------------------------------------------------------------------
def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in 0..100); None for no values."""
    if not values:
        return None
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def latency_stats(values: Sequence[float]) -> dict[str, float | int | None]:
    return {
        "n": len(values),
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "max": max(values) if values else None,
    }


class RevisionCounter:
    """Counts violations of the stable-text guarantee (docs/protocol.md#partial): must stay 0.

    A revision is a partial whose stable words do not extend the previous stable words of its
    utterance, a partial whose text does not start with its stable words, or a final that
    does not start with its utterance's last stable words.
    """

    def __init__(self) -> None:
        self.revisions = 0
        self._stable: dict[int, list[str]] = {}

    def observe(self, event: Event) -> None:
        if isinstance(event, Partial):
            stable = normalized(split_words(event.stable))
            before = self._stable.get(event.utterance, [])
            if stable[: len(before)] != before:
                self.revisions += 1
            if normalized(split_words(event.text))[: len(stable)] != stable:
                self.revisions += 1
            self._stable[event.utterance] = stable
        elif isinstance(event, Final):
            before = self._stable.pop(event.utterance, [])
            if normalized(split_words(event.text))[: len(before)] != before:
                self.revisions += 1


@functools.cache
def _normalizer() -> Callable[[str], str]:
    try:
        from whisper_normalizer.english import EnglishTextNormalizer
    except ImportError:  # optional: fall back to the protocol's own normalisation
        return lambda text: " ".join(normalized(split_words(text)))
    normalizer: Callable[[str], str] = EnglishTextNormalizer()
    return normalizer


def word_errors(reference: str, hypothesis: str) -> tuple[int, int]:
    """(edit distance in words, reference length) after Whisper's English normalizer."""
    norm = _normalizer()
    ref = norm(reference).split()
    hyp = norm(hypothesis).split()
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h))
        prev = cur
    return prev[-1], len(ref)


def corpus_wer(pairs: Sequence[tuple[str, str]]) -> float | None:
    """Corpus WER over (reference, hypothesis) pairs; None without reference words."""
    errors = total = 0
    for ref, hyp in pairs:
        e, n = word_errors(ref, hyp)
        errors += e
        total += n
    return errors / total if total else None


def event_record(event: Event, *, stream: int, wall: float) -> dict[str, Any]:
    """One event as docs/protocol.md's JSON fields (times in seconds), plus stream and wall."""
    rec: dict[str, Any]
    if isinstance(event, Partial):
        rec = protocol.partial_fields(event)
    elif isinstance(event, Final | Revision):
        rec = protocol.final_fields(event, word_timestamps=bool(event.words))
    elif isinstance(event, Error):
        rec = protocol.error_fields(event.code, event.message, fatal=event.fatal)
    else:
        assert isinstance(event, Done), "simulate's sessions emit no VAD events"
        seconds = samples_to_seconds(event.audio_samples)
        rec = protocol.done_fields(seconds, event.utterances, event.reason)
    rec["stream"] = stream
    rec["wall"] = round(wall, 3)
    return rec


@dataclass
class Clip:
    """One piece of audio to play, with its reference transcript if known."""

    name: str
    audio: np.ndarray
    reference: str | None = None

    @property
    def seconds(self) -> float:
        return len(self.audio) / SAMPLE_RATE


@dataclass
class StreamLog:
    """What one simulated stream saw: its events with wall times, and its feeding schedule."""

    index: int
    clips: list[Clip]
    events: list[tuple[float, Event]] = field(default_factory=list)
    fed: list[tuple[int, float]] = field(default_factory=list)  # (samples fed so far, wall)
    endpoints: dict[int, int] = field(default_factory=dict)  # utterance -> decision sample

    def wall_at(self, sample: int) -> float | None:
        """Wall time at which audio up to ``sample`` had been fed."""
        i = bisect.bisect_left(self.fed, (sample, -math.inf))
        return self.fed[i][1] if i < len(self.fed) else None

    def finals(self) -> list[Final]:
        return [e for _, e in self.events if isinstance(e, Final)]

    def hypothesis(self) -> str:
        return " ".join(f.text for f in self.finals())

    def reference(self) -> str | None:
        refs = [c.reference for c in self.clips]
        if any(r is None for r in refs):
            return None
        return " ".join(r for r in refs if r)

    def partial_lags(self) -> list[float]:
        out = []
        for wall, event in self.events:
            if isinstance(event, Partial):
                fed = self.wall_at(event.end)
                if fed is not None:
                    out.append(wall - fed)
        return out

    def final_lags(self) -> tuple[list[float], list[float]]:
        from_endpoint, from_speech_end = [], []
        for wall, event in self.events:
            if not isinstance(event, Final):
                continue
            decided = self.endpoints.get(event.utterance)
            fed = self.wall_at(decided) if decided is not None else None
            if fed is not None:
                from_endpoint.append(wall - fed)
            ended = self.wall_at(event.end)
            if ended is not None:
                from_speech_end.append(wall - ended)
        return from_endpoint, from_speech_end

    def refined_hypothesis(self) -> str:
        """The finals' text with every revision applied (the transcript a client keeps)."""
        texts = {f.utterance: f.text for f in self.finals()}
        for _, event in self.events:
            if isinstance(event, Revision) and event.utterance in texts:
                texts[event.utterance] = event.text
        return " ".join(texts[n] for n in sorted(texts))

    def revision_delays(self) -> list[float]:
        """Each revision's wall time after the audio at its final's end was fed."""
        ends = {f.utterance: f.end for f in self.finals()}
        delays = []
        for wall, event in self.events:
            if isinstance(event, Revision) and event.utterance in ends:
                fed = self.wall_at(ends[event.utterance])
                if fed is not None:
                    delays.append(wall - fed)
        return delays

    def lost_finals(self) -> int:
        """Utterance numbers that showed partials but never got a final, plus gaps."""
        finals = [f.utterance for f in self.finals()]
        partial_numbers = {e.utterance for _, e in self.events if isinstance(e, Partial)}
        expected = set(range(max([*finals, *partial_numbers], default=-1) + 1))
        return len(expected - set(finals))

    def revisions(self) -> int:
        counter = RevisionCounter()
        for _, event in self.events:
            counter.observe(event)
        return counter.revisions


def summarize(
    logs: Sequence[StreamLog],
    *,
    wall_s: float,
    cpu_s: float,
    batch_sizes: Mapping[int, int] | None = None,
    cache_hits: int | None = None,
    cache_misses: int | None = None,
) -> dict[str, Any]:
    partial = [x for log in logs for x in log.partial_lags()]
    endpoint: list[float] = []
    speech_end: list[float] = []
    for log in logs:
        a, b = log.final_lags()
        endpoint += a
        speech_end += b
    audio_s = sum(sum(c.seconds for c in log.clips) for log in logs)
    pairs = [(r, log.hypothesis()) for log in logs if (r := log.reference()) is not None]
    errors = [e for log in logs for _, e in log.events if isinstance(e, Error)]
    lookups = (cache_hits or 0) + (cache_misses or 0)
    return {
        "type": "summary",
        "streams": len(logs),
        "audio_s": round(audio_s, 3),
        "wall_s": round(wall_s, 3),
        "cpu_s": round(cpu_s, 3),
        "cpu_per_audio_s": round(cpu_s / audio_s, 4) if audio_s else None,
        "partials": len(partial),
        "finals": sum(len(log.finals()) for log in logs),
        "partial_lag_s": latency_stats(partial),
        "final_lag_s": latency_stats(endpoint),
        "final_lag_from_speech_end_s": latency_stats(speech_end),
        "wer": corpus_wer(pairs) if pairs else None,
        "stable_revisions": sum(log.revisions() for log in logs),
        "finals_lost": sum(log.lost_finals() for log in logs),
        "errors": {
            code: sum(1 for e in errors if e.code == code)
            for code in sorted({e.code for e in errors})
        },
        "batch_sizes": {str(k): v for k, v in sorted((batch_sizes or {}).items()) if v},
        "mean_batch_size": _mean_size(batch_sizes or {}),
        "encoder_cache_hit_rate": round(cache_hits / lookups, 4)
        if cache_hits is not None and lookups
        else None,
    }


def _mean_size(sizes: Mapping[int, int]) -> float | None:
    batches = sum(sizes.values())
    return round(sum(k * v for k, v in sizes.items()) / batches, 3) if batches else None


def rotations(clips: Sequence[Clip], streams: int) -> list[list[Clip]]:
    """Stream i plays every clip, starting at clip i (mod the number of clips)."""
    n = len(clips)
    return [[clips[(i + k) % n] for k in range(n)] for i in range(streams)]


def format_event(record: dict[str, Any]) -> str:
    """One timeline line for humans."""
    head = f"[{record['stream']:>2}] {record['wall']:8.3f}s  {record['type']:<7}"
    kind = record["type"]
    if kind == "partial":
        return (
            f"{head} #{record['utterance']} {record['start']:.2f}-{record['end']:.2f} "
            f"{record['text']!r} (stable {record['stable']!r})"
        )
    if kind == "final":
        return (
            f"{head} #{record['utterance']} {record['start']:.2f}-{record['end']:.2f} "
            f"{record['text']!r}"
        )
    if kind == "error":
        return f"{head} {record['code']}: {record['message']}"
    return f"{head} {record['audio_seconds']:.3f}s of audio, {record['utterances']} utterances"


def format_summary(summary: dict[str, Any]) -> str:
    def ms(stats: dict[str, Any]) -> str:
        vals = [stats.get(k) for k in ("p50", "p95", "p99")]
        if any(v is None for v in vals):
            return "n/a"
        return (
            " / ".join(f"{float(v) * 1000:.0f}" for v in vals if v is not None)
            + f" ms  (n={stats['n']})"
        )

    wer = summary["wer"]
    lines = [
        f"streams {summary['streams']}, audio {summary['audio_s']:.1f} s, "
        f"wall {summary['wall_s']:.1f} s, CPU {summary['cpu_per_audio_s']} s per audio s",
        f"partial lag   P50/P95/P99: {ms(summary['partial_lag_s'])}",
        f"final lag     P50/P95/P99: {ms(summary['final_lag_s'])}  (from endpoint decision)",
        f"final lag     P50/P95/P99: {ms(summary['final_lag_from_speech_end_s'])}  "
        "(from end of speech)",
        f"finals {summary['finals']}, lost {summary['finals_lost']}, "
        f"stable revisions {summary['stable_revisions']}, errors {summary['errors'] or 'none'}",
        f"batch sizes {summary['batch_sizes']}, encoder cache hit rate "
        f"{summary['encoder_cache_hit_rate']}",
        f"WER {wer * 100:.2f} %" if wer is not None else "WER n/a (no reference)",
    ]
    return "\n".join(lines)


# --- the runner ----------------------------------------------------------------------------
@dataclass
class SimulationResult:
    logs: list[StreamLog]
    summary: dict[str, Any]


async def run_simulation(
    engine: Engine,
    streams: Sequence[Sequence[Clip]],
    *,
    realtime: bool = True,
    config: SessionConfig | None = None,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    chunk_samples: int = CHUNK_SAMPLES,
) -> SimulationResult:
    """Play each stream's clips (GAP_SECONDS of silence between them) into a started engine.

    Real time: chunk k is fed when the wall clock reaches its audio time. Fast: each chunk
    goes in as soon as the stream has no decode pending, so decodes happen at the same audio
    positions as in real time, only without waiting for the clock.
    """
    stats0 = _cache_stats(engine)
    batches0 = engine.stats.copy()
    cpu0 = time.process_time()
    t0 = time.monotonic()
    logs = [StreamLog(i, list(clips)) for i, clips in enumerate(streams)]
    await asyncio.gather(
        *(
            _play(engine, log, realtime, config or SessionConfig(), on_event, chunk_samples)
            for log in logs
        )
    )
    wall = time.monotonic() - t0
    cpu = time.process_time() - cpu0
    stats1 = _cache_stats(engine)
    hits = misses = None
    if stats0 is not None and stats1 is not None:
        hits, misses = stats1[0] - stats0[0], stats1[1] - stats0[1]
    summary = summarize(
        logs,
        wall_s=wall,
        cpu_s=cpu,
        batch_sizes=engine.stats.since(batches0).sizes,
        cache_hits=hits,
        cache_misses=misses,
    )
    return SimulationResult(logs, summary)


def _cache_stats(engine: Engine) -> tuple[int, int] | None:
    hits = misses = 0
    seen: list[object] = []
    for decoder in (engine.decoder, engine.final_decoder):
        if any(decoder is d for d in seen):
            continue
        seen.append(decoder)
        stats = getattr(decoder, "cache_stats", None)
        if stats is None:
            return None
        s = stats()
        hits += int(s.hits)
        misses += int(s.misses)
    return hits, misses


def _stream_audio(clips: Sequence[Clip]) -> np.ndarray:
    gap = np.zeros(int(GAP_SECONDS * SAMPLE_RATE), dtype=np.float32)
    parts: list[np.ndarray] = []
    for i, clip in enumerate(clips):
        if i:
            parts.append(gap)
        parts.append(np.asarray(clip.audio, dtype=np.float32))
    parts.append(gap)  # trailing silence: the last utterance ends by endpoint, not by stop
    return np.concatenate(parts)


async def _play(
    engine: Engine,
    log: StreamLog,
    realtime: bool,
    config: SessionConfig,
    on_event: Callable[[dict[str, Any]], None] | None,
    chunk: int,
) -> None:
    audio = _stream_audio(log.clips)
    stream = engine.open_stream(config)
    start = time.monotonic()

    async def read(stream: Stream) -> None:
        async for event in stream:
            wall = time.monotonic() - start
            log.events.append((wall, event))
            if isinstance(event, Final):
                # Asked as each final arrives: the session keeps only recent end decisions.
                decided = stream.endpoint_sample(event.utterance)
                if decided is not None:
                    log.endpoints[event.utterance] = decided
            if on_event is not None:
                on_event(event_record(event, stream=log.index, wall=wall))

    reader = asyncio.create_task(read(stream))
    try:
        for pos in range(0, len(audio), chunk):
            piece = audio[pos : pos + chunk]
            end = pos + len(piece)
            if realtime:
                delay = start + end / SAMPLE_RATE - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            else:
                await stream.wait_idle()
            stream.feed_audio(piece)
            log.fed.append((end, time.monotonic() - start))
            if not realtime:
                await asyncio.sleep(0)  # let the engine pick up what this chunk asked for
        stream.stop()
        await reader
    finally:
        if not reader.done():
            stream.abort()
            reader.cancel()
