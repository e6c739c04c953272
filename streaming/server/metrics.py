"""Prometheus metrics of one server (a private registry, so servers and tests never collide)
and the per-session arrival log that end-to-end lag is measured against.

Lag is end to end on the server: from the wall time the audio at an event's `end` sample
arrived in a WebSocket message to the wall time the event's message was sent.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from kettle.streaming.engine.report import BatchReport
from kettle.transcribe.types import SAMPLE_RATE
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

METRICS_CONTENT_TYPE = CONTENT_TYPE_LATEST

_LAG_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0)
_WAIT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0, 5.0)
_DECODE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0, 5.0, 10.0)
_BATCH_BUCKETS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64)
_REVISION_BUCKETS = (0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 20.0, 30.0)
# Fine around the 20 ms responsiveness target: lag is a few ms when all is well.
_LOOP_LAG_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.015, 0.02, 0.03, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)


class ServerMetrics:
    """Every metric the server exports; also the engine's observer (batch figures)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.sessions_active = Gauge(
            "kettle_sessions_active", "WebSocket sessions open now", registry=r
        )
        self.sessions_total = Counter("kettle_sessions", "WebSocket sessions accepted", registry=r)
        self.sessions_rejected = Counter(
            "kettle_sessions_rejected",
            "Handshakes refused, by reason",
            ["reason"],
            registry=r,
        )
        self.hosts_refused = Counter(
            "kettle_hosts_refused",
            "Requests refused for naming a host not served (DNS-rebinding guard), by kind",
            ["kind"],
            registry=r,
        )
        self.audio_seconds = Counter(
            "kettle_audio_seconds", "Seconds of audio received (at the input rate)", registry=r
        )
        self.partial_lag = Histogram(
            "kettle_partial_lag_seconds",
            "From arrival of the audio at a partial's end to sending the partial",
            buckets=_LAG_BUCKETS,
            registry=r,
        )
        self.final_lag = Histogram(
            "kettle_final_lag_seconds",
            "From arrival of the audio at a final's end to sending the final",
            buckets=_LAG_BUCKETS,
            registry=r,
        )
        self.refinements = Counter(
            "kettle_refinements",
            "Finals offered to the refinement pass, by outcome: revised (a revision was sent), "
            "unchanged, kept (the model was less sure of the new words), skipped (load, "
            "failure, stale), last (nothing followed before stop)",
            ["outcome"],
            registry=r,
        )
        self.revision_delay = Histogram(
            "kettle_revision_delay_seconds",
            "From arrival of the audio at a final's end to sending its revision",
            buckets=_REVISION_BUCKETS,
            registry=r,
        )
        self.queue_wait = Histogram(
            "kettle_queue_wait_seconds",
            "Time a decode request waited in the scheduler",
            buckets=_WAIT_BUCKETS,
            registry=r,
        )
        self.batch_size = Histogram(
            "kettle_batch_size", "Requests per decoded batch", buckets=_BATCH_BUCKETS, registry=r
        )
        self.decode_seconds = Histogram(
            "kettle_decode_seconds",
            "Model time per decoded batch",
            buckets=_DECODE_BUCKETS,
            registry=r,
        )
        self.encoder_cache_hits = Counter(
            "kettle_encoder_cache_hits", "Decode requests served from the encoder cache", registry=r
        )
        self.batches_failed = Counter(
            "kettle_batches_failed", "Decode batches that raised", registry=r
        )
        self.errors = Counter(
            "kettle_errors", "Error messages sent to clients, by code", ["code"], registry=r
        )
        self.messages_dropped = Counter(
            "kettle_messages_dropped",
            "Server messages not sent, by kind (stale partials for a slow reader)",
            ["kind"],
            registry=r,
        )
        self.degradation = Gauge(
            "kettle_degradation",
            "1 for the engine's current degradation step (full, partials_stretched, "
            "partials_paused, finals_greedy), 0 for the others",
            ["step"],
            registry=r,
        )
        self.degradation.labels(step="full").set(1)
        self.degradation_changes = Counter(
            "kettle_degradation_changes",
            "Times the engine entered a degradation step, by step",
            ["step"],
            registry=r,
        )

        self.loop_lag = Histogram(
            "kettle_event_loop_lag_seconds",
            "How late the event loop woke a task that slept (server responsiveness)",
            buckets=_LOOP_LAG_BUCKETS,
            registry=r,
        )
        self.encoder_cache_bytes = Gauge(
            "kettle_encoder_cache_bytes",
            "Bytes of encoder outputs the models' encoder caches hold now",
            registry=r,
        )
        self.engine_streams = Gauge(
            "kettle_engine_streams_open",
            "Streams the engine holds now (after every client left: 0, or a leak)",
            registry=r,
        )
        self.admission_paused = Counter(
            "kettle_admission_paused_seconds",
            "Time reads were paused because clients sent audio faster than admitted",
            registry=r,
        )
        self.uploads_cut = Counter(
            "kettle_uploads_cut",
            "Upload bodies cut with 408, by reason: slow (under the minimum rate on average "
            "after the grace period), deadline (not all in within the body timeout)",
            ["reason"],
            registry=r,
        )
        for reason in ("slow", "deadline"):
            self.uploads_cut.labels(reason=reason)
        self.backlog_closes = Counter(
            "kettle_backlog_closes",
            "Sessions ended because they held too much audio not yet transcribed",
            registry=r,
        )

    # EngineObserver ---------------------------------------------------------------------

    def on_batch(self, report: BatchReport) -> None:
        self.batch_size.observe(report.size)
        self.decode_seconds.observe(report.decode_s)
        for wait in report.queue_waits_s:
            self.queue_wait.observe(wait)
        if report.cache_hits:
            self.encoder_cache_hits.inc(report.cache_hits)

    def on_batch_failed(self, size: int, error: str) -> None:
        self.batches_failed.inc()

    def on_degradation(self, level: str) -> None:
        for step in ("full", "partials_stretched", "partials_paused", "finals_greedy"):
            self.degradation.labels(step=step).set(1 if step == level else 0)
        self.degradation_changes.labels(step=level).inc()

    # -------------------------------------------------------------------------------------

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def value(self, name: str, labels: dict[str, str] | None = None) -> float:
        """A sample's current value (tests and readiness checks); 0 when absent."""
        got = self.registry.get_sample_value(name, labels or {})
        return 0.0 if got is None else float(got)


def encoder_cache_bytes(decoders: Iterable[object]) -> int:
    """Bytes the decoders' encoder caches hold now (each decoder once; a decoder whose
    ``cache_stats`` does not tell bytes counts 0)."""
    total = 0
    seen: list[object] = []
    for decoder in decoders:
        if any(decoder is d for d in seen):
            continue
        seen.append(decoder)
        stats = getattr(decoder, "cache_stats", None)
        if stats is not None:
            total += int(getattr(stats(), "bytes", 0))
    return total


class ArrivalLog:
    """When each input sample frame arrived, to map an event's end sample to a wall time.

    One entry per audio message: the input frame count after it and its arrival time. Entries
    before the last final's end are pruned (finals come in order, and nothing later refers to
    audio before them), so a long session keeps only the open utterance's messages.
    """

    def __init__(self, sample_rate: int) -> None:
        self.sample_rate = sample_rate
        self._frames: list[int] = []
        self._times: list[float] = []

    def record(self, frames_total: int, arrived: float) -> None:
        if self._frames and frames_total <= self._frames[-1]:
            return  # a message with no whole frame moves nothing
        self._frames.append(frames_total)
        self._times.append(arrived)

    def arrival_of(self, sample_16k: int) -> float | None:
        """The arrival time of the message that completed audio up to this 16 kHz sample."""
        if not self._frames:
            return None
        frame = -(-sample_16k * self.sample_rate // SAMPLE_RATE)  # ceil
        i = bisect.bisect_left(self._frames, frame)
        return self._times[min(i, len(self._times) - 1)]

    def prune_before(self, sample_16k: int) -> None:
        frame = sample_16k * self.sample_rate // SAMPLE_RATE
        i = bisect.bisect_left(self._frames, frame)
        if i > 1:
            # Keep the entry that covers `frame` itself.
            del self._frames[: i - 1]
            del self._times[: i - 1]

    def __len__(self) -> int:
        return len(self._frames)
