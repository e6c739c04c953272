"""The asyncio engine: owns the streams' sessions, the scheduler and the inference thread.

One dedicated thread (a single-worker executor) is the only thread that touches the model(s).
The engine's task runs on the event loop: it asks the scheduler for a batch, runs it in that
thread, routes the results back to the sessions and their event queues, and otherwise sleeps
until new work arrives or the scheduler's next deadline (an asyncio timer; no polling).

Failures: a batch that raises fails its requests, not the engine. Failed partials are dropped
quietly (the session asks again later); each failed final is retried once on its own, and if
that fails too its stream gets a non-fatal ``Error("internal")`` and goes on.

Stream methods are called from the event loop's thread (the server's connection handlers).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import TracebackType
from typing import Protocol

import numpy as np
from kettle.streaming.events import Done, Error, Event, Final, Partial
from kettle.streaming.scheduler import Scheduler, SchedulerConfig, Ticket
from kettle.streaming.session import Session, SessionConfig
from kettle.transcribe.errors import ConfigError, KettleError
from kettle.transcribe.types import DecodeKind, Decoder, DecodeRequest, DecodeResult

logger = logging.getLogger(__name__)

# Stream ids are unique in the process, not just per engine: they key the adapter's encoder
# cache, which may outlive an engine (a decoder shared by engines, or reused after a restart).
_STREAM_IDS = itertools.count(1)


@dataclass(frozen=True)
class EngineConfig:
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    # Events a stream may hold unread; beyond it the oldest partials are dropped (finals,
    # errors and done never are).
    event_queue_size: int = 256
    # Bounded shutdown: close() waits this long for open streams' finals.
    close_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if not 8 <= self.event_queue_size <= 1_000_000:
            raise ConfigError(
                f"event_queue_size must be within 8..1e6, not {self.event_queue_size}"
            )
        if not 0.0 <= self.close_timeout_s <= 3600:
            raise ConfigError(f"close_timeout_s must be within 0..3600, not {self.close_timeout_s}")


class EngineObserver(Protocol):
    """Hooks for metrics; called on the event loop's thread."""

    def on_batch(
        self,
        size: int,
        finals: int,
        queue_waits_s: Sequence[float],
        decode_s: float,
        cache_hits: int,
    ) -> None: ...

    def on_batch_failed(self, size: int, error: str) -> None: ...


@dataclass(frozen=True)
class _Outcome:
    results: list[DecodeResult] | None
    error: str | None
    decode_s: float


class Stream:
    """One live stream: audio and control in, events out. Created by Engine.open_stream."""

    def __init__(self, engine: Engine, stream_id: str, session: Session, queue_size: int) -> None:
        self.stream_id = stream_id
        self._engine = engine
        self._session = session
        self._events: deque[Event] = deque()
        self._queue_size = queue_size
        self._wakeup = asyncio.Event()
        self._finished = False  # Done returned to the reader (or aborted)
        self._aborted = False
        self._partials_dropped = 0
        self._idle = asyncio.Event()  # set while no decode of this stream is pending
        self._idle.set()

    # --- inputs --------------------------------------------------------------------------
    @property
    def samples_fed(self) -> int:
        return self._session.samples_fed

    @property
    def session(self) -> Session:
        return self._session

    def feed_audio(self, samples: np.ndarray) -> None:
        """Float32 mono 16 kHz, any size. Never blocks; ignored after stop or abort."""
        if self._aborted:
            return
        self._session.feed_audio(samples)
        self._engine._collect(self)

    def finalize(self) -> None:
        if self._aborted:
            return
        self._session.finalize()
        self._engine._collect(self)

    def stop(self, reason: str | None = None) -> None:
        """Finalize what it holds; the remaining finals then Done follow. Idempotent."""
        if self._aborted:
            return
        self._session.stop(reason)
        self._engine._collect(self)

    def abort(self) -> None:
        """The client vanished: drop queued work, release everything, no more events."""
        if self._aborted:
            return
        self._aborted = True
        self._events.clear()
        self._idle.set()
        self._engine._release(self)
        self._wakeup.set()

    async def wait_idle(self) -> None:
        """Wait until none of this stream's decodes is queued or running (for ``simulate
        --fast``, which feeds audio as fast as the engine takes it)."""
        await self._idle.wait()

    def endpoint_sample(self, utterance: int) -> int | None:
        """Stream position at which the session decided that utterance's end (for latency)."""
        return self._session.endpoints.get(utterance)

    # --- outputs -------------------------------------------------------------------------
    async def next_event(self) -> Event:
        while True:
            if self._aborted or self._finished:
                raise StopAsyncIteration
            if self._events:
                event = self._events.popleft()
                if isinstance(event, Done):
                    self._finished = True
                return event
            self._wakeup.clear()
            await self._wakeup.wait()

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Event]:
        while True:
            try:
                yield await self.next_event()
            except StopAsyncIteration:
                return

    # --- engine side ---------------------------------------------------------------------
    def _push(self, events: list[Event]) -> None:
        if self._aborted:
            return
        for event in events:
            self._events.append(event)
        while len(self._events) > self._queue_size:
            # The reader lags: drop the oldest partial (a newer one replaces it anyway).
            for i, ev in enumerate(self._events):
                if isinstance(ev, Partial):
                    del self._events[i]
                    self._partials_dropped += 1
                    break
            else:
                break
        if events:
            self._wakeup.set()


class Engine:
    def __init__(
        self,
        decoder: Decoder,
        config: EngineConfig | None = None,
        *,
        final_decoder: Decoder | None = None,
        observer: EngineObserver | None = None,
    ) -> None:
        self._decoder = decoder
        self._final_decoder = final_decoder
        self.config = config or EngineConfig()
        self._observer = observer
        self._scheduler = Scheduler(self.config.scheduler)
        self._streams: dict[str, Stream] = {}
        self._executor: ThreadPoolExecutor | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._closing = False
        self._busy = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._drained: asyncio.Event | None = None
        self.batches_run = 0
        self.batch_sizes: list[int] = []

    # --- lifecycle -----------------------------------------------------------------------
    async def start(self) -> None:
        if self._task is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kettle-inference")
        self._closing = False
        self._task = asyncio.create_task(self._run(), name="kettle-engine")

    async def close(self) -> None:
        """Stop open streams (their finals still go out, within close_timeout_s), then end."""
        if self._task is None:
            return
        for stream in list(self._streams.values()):
            stream.stop("shutdown")
        deadline = time.monotonic() + self.config.close_timeout_s
        while self._streams and time.monotonic() < deadline and not self._task.done():
            # Woken by _release when a stream finishes; the timeout bounds the wait.
            self._drained = asyncio.Event()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._drained.wait(), deadline - time.monotonic())
        for stream in list(self._streams.values()):
            stream.abort()
        self._closing = True
        assert self._wake is not None
        self._wake.set()
        task, self._task = self._task, None
        with contextlib.suppress(asyncio.CancelledError):
            await task
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    async def __aenter__(self) -> Engine:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # --- public API ----------------------------------------------------------------------
    def open_stream(self, config: SessionConfig | None = None) -> Stream:
        if self._task is None or self._closing:
            raise KettleError("the engine is not running")
        stream_id = f"s{next(_STREAM_IDS)}"
        session = Session(config or SessionConfig(), session_id=stream_id)
        stream = Stream(self, stream_id, session, self.config.event_queue_size)
        self._streams[stream_id] = stream
        return stream

    @property
    def overloaded(self) -> bool:
        return self._scheduler.overloaded(time.monotonic())

    @property
    def queue_depth(self) -> int:
        return len(self._scheduler)

    @property
    def streams_open(self) -> int:
        return len(self._streams)

    @property
    def decoder(self) -> Decoder:
        return self._decoder

    @property
    def final_decoder(self) -> Decoder:
        return self._final_decoder or self._decoder

    # --- stream plumbing (event-loop thread) ---------------------------------------------
    def _collect(self, stream: Stream) -> None:
        """Move a session's new requests to the scheduler and its events to the stream."""
        session = stream.session
        requests = session.poll_requests()
        released = stream.stream_id not in self._streams
        if released:
            requests = []  # released (failed or finished): nothing more runs for it
        now = time.monotonic()
        for request in requests:
            self._scheduler.submit(request, now, owner=stream.stream_id)
        events = session.poll_events()
        stream._push(events)
        if released or session.in_flight is None or session.done:
            stream._idle.set()
        else:
            stream._idle.clear()
        if session.done:
            self._release(stream, keep_events=True)
        if requests and self._wake is not None:
            self._wake.set()

    def _release(self, stream: Stream, keep_events: bool = False) -> None:
        if self._streams.pop(stream.stream_id, None) is None:
            return
        if not keep_events:
            self._scheduler.cancel(stream.stream_id)
        if not self._streams and self._drained is not None:
            self._drained.set()

    # --- the engine loop -----------------------------------------------------------------
    async def _run(self) -> None:
        assert self._wake is not None and self._loop is not None
        loop = self._loop
        while not self._closing:
            now = time.monotonic()
            try:
                batch = self._scheduler.next_batch(now, sources=len(self._streams))
                self._route_dropped()
                if batch:
                    await self._run_batch(batch, loop)
                    continue
            except Exception:  # a bug in routing must not stop every stream
                logger.exception("engine loop error")
                continue
            deadline = self._scheduler.next_deadline(now)
            self._wake.clear()
            timeout = None if deadline is None else max(0.0, deadline - now)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)

    def _route_dropped(self) -> None:
        for dropped in self._scheduler.take_dropped():
            stream = self._streams.get(str(dropped.ticket.owner))
            if stream is None:
                continue
            try:
                stream.session.on_dropped(
                    dropped.ticket.request.request_id, overloaded=dropped.reason == "overload"
                )
                self._collect(stream)
            except Exception as exc:
                self._fail_stream(stream, exc)

    async def _run_batch(self, batch: list[Ticket], loop: asyncio.AbstractEventLoop) -> None:
        assert self._executor is not None
        started = time.monotonic()
        waits = [started - t.submitted for t in batch]
        finals = sum(1 for t in batch if t.kind is DecodeKind.FINAL)
        decoder = self.final_decoder if finals else self._decoder
        requests = [t.request for t in batch]
        self._busy = True
        try:
            outcome = await loop.run_in_executor(self._executor, _decode, decoder, requests)
        finally:
            self._busy = False
        self.batches_run += 1
        self.batch_sizes.append(len(batch))
        if outcome.results is not None:
            kind = DecodeKind.FINAL if finals else DecodeKind.PARTIAL
            self._scheduler.observe(kind, len(batch), outcome.decode_s)
            hits = sum(1 for r in outcome.results if r.encoder_cache_hit)
            self._notify_batch(len(batch), finals, waits, outcome.decode_s, hits)
            for ticket, result in zip(batch, outcome.results, strict=True):
                self._deliver(ticket, result)
            return
        error = outcome.error or "decode failed"
        logger.warning("decode batch of %d failed: %s", len(batch), error)
        if self._observer is not None:
            self._observer.on_batch_failed(len(batch), error)
        for ticket in batch:
            if ticket.kind is DecodeKind.PARTIAL:
                stream = self._streams.get(str(ticket.owner))
                if stream is not None:
                    stream.session.on_dropped(ticket.request.request_id)
                    self._collect(stream)
        for ticket in batch:
            if ticket.kind is DecodeKind.FINAL:
                await self._retry_final(ticket, loop)

    async def _retry_final(self, ticket: Ticket, loop: asyncio.AbstractEventLoop) -> None:
        assert self._executor is not None
        if str(ticket.owner) not in self._streams:
            return
        outcome = await loop.run_in_executor(
            self._executor, _decode, self.final_decoder, [ticket.request]
        )
        if outcome.results is not None:
            hits = sum(1 for r in outcome.results if r.encoder_cache_hit)
            self._notify_batch(1, 1, [time.monotonic() - ticket.submitted], outcome.decode_s, hits)
            self._deliver(ticket, outcome.results[0])
            return
        error = outcome.error or "decode failed"
        logger.error("final %s failed twice: %s", ticket.request.request_id, error)
        if self._observer is not None:
            self._observer.on_batch_failed(1, error)
        stream = self._streams.get(str(ticket.owner))
        if stream is not None:
            stream.session.on_failed(ticket.request.request_id, error)
            self._collect(stream)

    def _deliver(self, ticket: Ticket, result: DecodeResult) -> None:
        stream = self._streams.get(str(ticket.owner))
        if stream is None:
            return  # aborted meanwhile
        try:
            if result.error is not None and ticket.kind is DecodeKind.PARTIAL:
                stream.session.on_dropped(ticket.request.request_id)
            else:
                stream.session.on_result(result)
            self._collect(stream)
        except Exception as exc:  # a bug in one session must not stall the others
            self._fail_stream(stream, exc)

    def _fail_stream(self, stream: Stream, exc: Exception) -> None:
        """End one stream after an internal error: a fatal Error, then Done; others go on."""
        logger.exception("stream %s failed", stream.stream_id, exc_info=exc)
        session = stream.session
        stream._push(
            [
                Error("internal", f"internal error: {type(exc).__name__}", fatal=True),
                Done(session.samples_fed, session.finals_sent, "error"),
            ]
        )
        stream._idle.set()
        self._release(stream)

    def _notify_batch(
        self, size: int, finals: int, waits: list[float], decode_s: float, hits: int
    ) -> None:
        if self._observer is None:
            return
        try:
            self._observer.on_batch(size, finals, waits, decode_s, hits)
        except Exception:  # a metrics hook must not take the engine down
            logger.exception("engine observer failed")


def _decode(decoder: Decoder, requests: list[DecodeRequest]) -> _Outcome:
    """Runs in the inference thread."""
    t0 = time.perf_counter()
    try:
        results = decoder.decode_batch(requests)
        if len(results) != len(requests):
            raise KettleError(f"decoder returned {len(results)} results for {len(requests)}")
        by_id: dict[Hashable, DecodeResult] = {r.request_id: r for r in results}
        ordered = [by_id.get(r.request_id, res) for r, res in zip(requests, results, strict=True)]
    except Exception as exc:
        return _Outcome(None, f"{type(exc).__name__}: {exc}", time.perf_counter() - t0)
    return _Outcome(ordered, None, time.perf_counter() - t0)


__all__ = [
    "Done",
    "Engine",
    "EngineConfig",
    "EngineObserver",
    "Error",
    "Final",
    "Partial",
    "Stream",
]
