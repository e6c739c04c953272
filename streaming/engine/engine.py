"""The asyncio engine: owns the streams, the scheduler and the inference worker.

The engine's task runs on the event loop: it asks the scheduler for a batch, has the
inference worker (``worker.py``, the one thread that touches the model) run it, routes the
results back to the sessions and their streams, and otherwise sleeps until new work arrives
or the scheduler's next deadline. Every timer goes through an injected ``Clock``.

Priorities (``scheduler.Priority``): finals > partials > speculative finals > offline work
(``decode_offline``, for files and uploads). A session's queued request that became useless
(a partial while its final is due, a speculation that speech resuming made void) is withdrawn
and reported dropped to the session, so its final never waits behind it; a speculative final
whose utterance ended on the speculated window is promoted to a final. Within a class, a
stream whose client sends audio faster than real time yields to live streams, and owners
share the model fairly (the engine reports each stream's audio to the scheduler's pace).

Each temperature-fallback round of a live final is a request of its own
(``DecodeRequest.fallback_round``): a final that needs a retry goes back in the queue and the
rest of its batch is delivered at once.

Failures: each request fails on its own. A failed partial is dropped quietly (the session asks
again later); a failed final or offline request is retried alone ``RetryPolicy.retries``
times, then its stream gets a non-fatal ``Error("internal")`` naming the utterance and goes on
(an offline request gets a result with ``error`` set). Model failures back off exponentially,
and ``model_failing`` is true while they keep coming (readiness reads it).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import itertools
import logging
import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import numpy as np
from kettle.streaming.core.events import Done, Error, Event, Final, Partial
from kettle.streaming.core.session import Session, SessionConfig
from kettle.streaming.engine.clock import Clock, MonotonicClock
from kettle.streaming.engine.degrade import STRETCH, DegradeConfig, Degrader, Level
from kettle.streaming.engine.native_memory import MemoryRelease, load_malloc_trim
from kettle.streaming.engine.report import (
    BatchReport,
    BatchStats,
    EngineObserver,
    notify,
    notify_degradation,
)
from kettle.streaming.engine.scheduling.scheduler import (
    Priority,
    Scheduler,
    SchedulerConfig,
    Ticket,
)
from kettle.streaming.engine.stream import Stream
from kettle.streaming.engine.worker import InferenceWorker, RetryPolicy
from kettle.transcribe.costs import CostProfile
from kettle.transcribe.errors import ConfigError, KettleError
from kettle.transcribe.types import SAMPLE_RATE, DecodeKind, Decoder, DecodeRequest, DecodeResult

logger = logging.getLogger(__name__)

# Stream ids are unique in the process, not just per engine: they key the adapter's encoder
# cache, which may outlive an engine (a decoder shared by engines, or reused after a restart).
_STREAM_IDS = itertools.count(1)
NOTICE_INTERVAL_S = 5.0  # PROTOCOL.md: overloaded notices at most once every 5 s
MIN_RECHECK_S = 0.05  # while degraded, the load is looked at again at least this far apart


@dataclass(frozen=True)
class EngineConfig:
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    # Events a stream may hold unread before it reports overflow. Stale partials are replaced
    # by newer ones; finals, errors and done are never dropped (backlog.py, as the outbox).
    event_queue_size: int = 256
    # Bounded shutdown: close() waits this long for open streams' finals.
    close_timeout_s: float = 30.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    # A folder where measured costs are kept per model, device, compute type, threads and
    # machine (transcribe/cost_cache.py), so a restart need not measure again; None: measure
    # at every start. ``remeasure_costs``: measure anyway and replace what is kept.
    cost_cache: Path | None = None
    remeasure_costs: bool = False
    # Partial cadence from the measured decode cost: each stream's partial interval is at
    # least what keeps the model's busy fraction from partials at busy_target. False: the
    # sessions' configured interval only (the cadence before scheduler v2).
    adaptive_cadence: bool = True
    busy_target: float = 0.6
    # The cost-based interval never exceeds this: past it partials stop being useful, and
    # when the model still cannot keep up the degradation steps take over.
    max_cadence_s: float = 2.0
    degrade: DegradeConfig = field(default_factory=DegradeConfig)
    # Seconds between returns of glibc's free heap to the OS after work: while idle, or
    # between batches when the model was busy the whole time (native_memory.py); None:
    # never (glibc's own policy; no-op off glibc anyway).
    release_memory_s: float | None = None

    def __post_init__(self) -> None:
        if not 8 <= self.event_queue_size <= 1_000_000:
            raise ConfigError(
                f"event_queue_size must be within 8..1e6, not {self.event_queue_size}"
            )
        if not 0.0 <= self.close_timeout_s <= 3600:
            raise ConfigError(f"close_timeout_s must be within 0..3600, not {self.close_timeout_s}")
        if not 0.1 <= self.max_cadence_s <= 10.0:
            raise ConfigError(f"max_cadence_s must be within 0.1..10, not {self.max_cadence_s}")
        if not 0.05 <= self.busy_target <= 1.0:
            raise ConfigError(f"busy_target must be within 0.05..1, not {self.busy_target}")
        if self.release_memory_s is not None and not self.release_memory_s > 0:
            raise ConfigError(f"release_memory_s must be positive, not {self.release_memory_s}")


@dataclass(eq=False)
class _OfflineCall:
    """One decode_offline call: its results by position, filled as batches finish."""

    results: list[DecodeResult | None]
    future: asyncio.Future[list[DecodeResult]]
    remaining: int

    def settle(self, index: int, result: DecodeResult) -> None:
        if self.results[index] is not None or self.future.done():
            return
        self.results[index] = result
        self.remaining -= 1
        if self.remaining == 0:
            self.future.set_result([r for r in self.results if r is not None])


@dataclass(frozen=True)
class _Tag:
    """What travels with a request through retries and fallback rounds."""

    index: int = 0  # position in an offline call
    attempt: int = 0  # retries so far
    rounds: tuple[DecodeResult, ...] = ()  # earlier fallback rounds' results


class Engine:
    def __init__(
        self,
        decoder: Decoder,
        config: EngineConfig | None = None,
        *,
        final_decoder: Decoder | None = None,
        observer: EngineObserver | None = None,
        clock: Clock | None = None,
        release_memory: Callable[[], None] | None = None,
    ) -> None:
        """``release_memory``: what returns free memory to the OS when
        ``config.release_memory_s`` is set (default: glibc's malloc_trim, where present)."""
        self._decoder = decoder
        self._final_decoder = final_decoder
        self.config = config or EngineConfig()
        self._observer = observer
        self._clock: Clock = clock or MonotonicClock()
        self._scheduler = Scheduler(self.config.scheduler)
        self._degrader = Degrader(self.config.degrade)
        self._cadence_s: float | None = None  # the partial interval hint given to sessions
        self._worker = InferenceWorker(self._clock, self.config.retry)
        self._streams: dict[str, Stream] = {}
        self._offline: set[_OfflineCall] = set()
        self._tags: dict[int, _Tag] = {}  # ticket seq -> tag, for tickets queued or running
        self._keys: dict[str, Hashable] = {}  # stream id -> stream key of its latest request
        self._fed: dict[str, int] = {}  # stream id -> samples its pace was told of
        self._noticed: dict[str, float] = {}  # stream id -> when it last got a load notice
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._closing = False
        self._drained: asyncio.Event | None = None
        self.stats = BatchStats()
        self._trim = _memory_release(self.config.release_memory_s, release_memory)

    # --- lifecycle -----------------------------------------------------------------------
    async def start(self) -> None:
        if self._task is not None:
            return
        self._wake = asyncio.Event()
        self._worker.start()
        await self._measure_costs()  # a no-op for decoders without measure_costs() (fakes)
        self._closing = False
        self._task = asyncio.create_task(self._run(), name="kettle-engine")

    async def close(self) -> None:
        """Stop open streams (their finals still go out, within close_timeout_s), then end."""
        if self._task is None:
            return
        for stream in list(self._streams.values()):
            stream.stop("shutdown")
        deadline = self._clock.now() + self.config.close_timeout_s
        while self._streams and self._clock.now() < deadline and not self._task.done():
            # Woken by stream_aborted/_release when a stream finishes; the deadline bounds it.
            self._drained = asyncio.Event()
            await self._clock.wait(self._drained, deadline)
        for stream in list(self._streams.values()):
            stream.abort()
        for call in list(self._offline):
            if not call.future.done():
                call.future.set_exception(KettleError("the engine shut down"))
        self._offline.clear()
        self._closing = True
        assert self._wake is not None
        self._wake.set()
        task, self._task = self._task, None
        with contextlib.suppress(asyncio.CancelledError):
            await task
        self._worker.shutdown()

    async def _measure_costs(self) -> None:
        """Profile each model that has measure_costs() (the real adapter) on its thread, or
        read its profile from the cost cache (EngineConfig.cost_cache)."""
        profiles: dict[DecodeKind, CostProfile] = {}
        for kind, decoder in (
            (DecodeKind.PARTIAL, self._decoder),
            (DecodeKind.FINAL, self.final_decoder),
        ):
            if kind is DecodeKind.FINAL and decoder is self._decoder:
                if DecodeKind.PARTIAL in profiles:  # one model serves both: measured once
                    profiles[kind] = profiles[DecodeKind.PARTIAL]
                continue
            measure = getattr(decoder, "measure_costs", None)
            if measure is None:
                continue
            cache, refresh = self.config.cost_cache, self.config.remeasure_costs
            try:
                if cache is None and not refresh:
                    profiles[kind] = await self._worker.call(measure)
                else:
                    profiles[kind] = await self._worker.call(
                        functools.partial(measure, cache, refresh=refresh)
                    )
            except Exception:  # no profile: batches are sized from measured times instead
                logger.exception("could not measure the costs of %s", decoder.name)
        self._scheduler.costs.profiles.update(profiles)

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
        config = config or SessionConfig()
        if config.language is None and (
            self._decoder.multilingual or self.final_decoder.multilingual
        ):
            # The model detects each window's language: no context (see SessionConfig).
            config = dataclasses.replace(config, multilingual=True)
        session = Session(config, session_id=stream_id)
        session.interval_hint_s = self._cadence_s
        stream = Stream(self, stream_id, session, self.config.event_queue_size)
        self._streams[stream_id] = stream
        self._update_cadence()
        return stream

    async def decode_offline(self, requests: Sequence[DecodeRequest]) -> list[DecodeResult]:
        """Decode requests at the lowest priority (files, uploads); results in request order.

        Live streams always go first: this work runs only when no live request is queued, so
        a long upload delays a live final by at most the one batch already running. A request
        that fails (after its retry) comes back with ``error`` set; the others are unaffected.
        Cancelling the caller withdraws what is still queued. Raises KettleError when the
        engine is not running or shuts down first.
        """
        if self._task is None or self._closing:
            raise KettleError("the engine is not running")
        if not requests:
            return []
        loop = asyncio.get_running_loop()
        call = _OfflineCall([None] * len(requests), loop.create_future(), len(requests))
        self._offline.add(call)
        now = self._clock.now()
        for i, request in enumerate(requests):
            self._submit(request, now, call, Priority.OFFLINE, _Tag(index=i))
        self._kick()
        try:
            return await call.future
        finally:
            self._offline.discard(call)
            for ticket in self._scheduler.cancel(call):
                self._tags.pop(ticket.seq, None)

    @property
    def overloaded(self) -> bool:
        return self._scheduler.overloaded(self._clock.now())

    @property
    def model_failing(self) -> bool:
        """True while model errors keep coming (readiness turns false); a success clears it."""
        return self._worker.model_failing

    @property
    def healthy(self) -> bool:
        """Running, and the model is not failing."""
        return self._task is not None and not self._closing and not self._worker.model_failing

    @property
    def degradation(self) -> Level:
        """The current degradation level (degrade.py); Level.FULL when none."""
        return self._degrader.level

    @property
    def partial_interval_hint_s(self) -> float | None:
        """The partial interval sessions are asked to keep at least (None: their own)."""
        return self._cadence_s

    @property
    def cost_profiles(self) -> dict[DecodeKind, CostProfile]:
        return dict(self._scheduler.costs.profiles)

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

    # --- StreamHost ----------------------------------------------------------------------
    def stream_changed(self, stream: Stream) -> None:
        """Move a session's new requests to the scheduler and its events to the stream."""
        session = stream.session
        released = stream.stream_id not in self._streams
        self._withdraw_superseded(stream)
        requests = session.poll_requests()
        if released:
            requests = []  # released (failed or finished): nothing more runs for it
        now = self._clock.now()
        fed = session.samples_fed - self._fed.get(stream.stream_id, 0)
        if fed > 0 and not released:
            # The client's pace: a stream ahead of real time yields to live ones.
            self._fed[stream.stream_id] = session.samples_fed
            self._scheduler.observe_audio(stream.stream_id, fed / SAMPLE_RATE, now)
        for request in requests:
            if request.stream_key is not None:
                self._track_key(stream.stream_id, request.stream_key)
            self._submit(request, now, stream.stream_id)
        if not released and session.final_due and session.in_flight is not None:
            # The utterance ended on the speculated window: the speculation is the final.
            self._scheduler.promote(stream.stream_id, session.in_flight, Priority.FINAL)
        stream.deliver(session.poll_events())
        stream.set_pending(not (released or session.in_flight is None or session.done))
        if session.done:
            self._release(stream, keep_events=True)
        if requests:
            self._kick()

    def stream_aborted(self, stream: Stream) -> None:
        self._release(stream)

    def _withdraw_superseded(self, stream: Stream) -> None:
        # Loops because the session's next request may itself be superseded (rare).
        for _ in range(4):
            rid = stream.session.superseded
            if rid is None:
                return
            ticket = self._scheduler.withdraw(stream.stream_id, rid)
            if ticket is None:
                return  # already running: its result comes back and is handled then
            self._tags.pop(ticket.seq, None)
            stream.session.on_dropped(rid)

    def _release(self, stream: Stream, keep_events: bool = False) -> None:
        if self._streams.pop(stream.stream_id, None) is None:
            return
        self._track_key(stream.stream_id, None)
        self._noticed.pop(stream.stream_id, None)
        if not keep_events:
            for ticket in self._scheduler.cancel(stream.stream_id):
                self._tags.pop(ticket.seq, None)
        self._scheduler.forget(stream.stream_id)
        self._fed.pop(stream.stream_id, None)
        if not self._streams and self._drained is not None:
            self._drained.set()

    def _submit(
        self,
        request: DecodeRequest,
        now: float,
        owner: Hashable,
        priority: Priority | None = None,
        tag: _Tag | None = None,
    ) -> None:
        live = not isinstance(owner, _OfflineCall)
        if live and request.kind is DecodeKind.FINAL:
            # Live finals ask the model for one temperature-fallback round at a time.
            if request.fallback_round is None:
                request = dataclasses.replace(request, fallback_round=0)
            if self._degrader.level >= Level.FINALS_GREEDY and request.beam_size != 1:
                request = dataclasses.replace(request, beam_size=1)
        elif (
            live
            and request.beam_size not in (None, 1)
            and self._degrader.level >= Level.PARTIALS_STRETCHED
        ):
            # A partial's beam is the first thing to give up under pressure.
            request = dataclasses.replace(request, beam_size=1)
        ticket = self._scheduler.submit(request, now, owner=owner, priority=priority)
        self._tags[ticket.seq] = tag or _Tag()

    def _kick(self) -> None:
        if self._wake is not None:
            self._wake.set()

    # --- the engine loop -----------------------------------------------------------------
    async def _run(self) -> None:
        assert self._wake is not None
        while not self._closing:
            now = self._clock.now()
            hold = self._worker.ready_at  # backing off after model failures
            if hold is not None and hold > now:
                deadline: float | None = hold
            else:
                try:
                    pausing = self._live_pausing(now)
                    batch = self._scheduler.next_batch(
                        now, sources=len(self._streams), live_pausing=pausing
                    )
                    self._route_dropped()
                    if batch:
                        await self._run_batch(batch)
                        await self._release_memory(idle=False)
                        continue
                except Exception:  # a bug in routing must not stop every stream
                    logger.exception("engine loop error")
                    await asyncio.sleep(0)
                    continue
                if await self._release_memory(idle=True):
                    continue
                deadline = self._scheduler.next_deadline(now, live_pausing=pausing)
                deadline = self._check_pressure(now, deadline)
            self._wake.clear()
            await self._clock.wait(self._wake, deadline)

    def _live_pausing(self, now: float) -> bool:
        """Whether a live stream (not ahead of real time) is in a pause, its final near."""
        return any(
            stream.session.pausing and not self._scheduler.ahead(stream_id, now)
            for stream_id, stream in self._streams.items()
        )

    async def _release_memory(self, *, idle: bool) -> bool:
        """Return free native memory to the OS if due (native_memory.py); True if it ran."""
        now = self._clock.now()
        if self._trim is None or not self._trim.due(now, idle=idle):
            return False
        await self._worker.call(functools.partial(self._trim.run, now))
        return True

    def _route_dropped(self) -> None:
        for dropped in self._scheduler.take_dropped():
            self._tags.pop(dropped.ticket.seq, None)
            stream = self._streams.get(str(dropped.ticket.owner))
            if stream is None:
                continue
            try:
                stream.session.on_dropped(
                    dropped.ticket.request.request_id, overloaded=dropped.reason == "overload"
                )
                self.stream_changed(stream)
            except Exception as exc:
                self._fail_stream(stream, exc)

    async def _run_batch(self, batch: list[Ticket]) -> None:
        started = self._clock.now()
        waits = [started - t.submitted for t in batch]
        final = batch[0].kind is DecodeKind.FINAL
        decoder = self.final_decoder if final else self._decoder
        outcome = await self._worker.run(decoder, [t.request for t in batch])
        if self._trim is not None:
            self._trim.note_work(started)
        if outcome.results is not None:
            kind = DecodeKind.FINAL if final else DecodeKind.PARTIAL
            self._scheduler.observe_batch(batch, outcome.decode_s, self._clock.now())
            # The latency targets apply to live classes, and not to streams that run ahead
            # of real time (their requests yield, so they wait by design).
            live = batch[0].priority <= Priority.PARTIAL and not all(
                self._scheduler.ahead(t.owner, started) for t in batch
            )
            now = self._clock.now()
            if live and self._degrader.observe(now, kind, max(waits), outcome.decode_s):
                self._level_changed()
            if kind is DecodeKind.PARTIAL:
                self._update_cadence()
            hits = sum(1 for r in outcome.results if r.encoder_cache_hit)
            finals = len(batch) if final else 0
            report = BatchReport(len(batch), finals, tuple(waits), outcome.decode_s, hits)
            self._notify(lambda o: o.on_batch(report))
            for ticket, result in zip(batch, outcome.results, strict=True):
                self._guarded(ticket, functools.partial(self._on_result, ticket, result))
            return
        error = outcome.error or "decode failed"
        logger.warning("decode batch of %d failed: %s", len(batch), error)
        self._notify(lambda o: o.on_batch_failed(len(batch), error))
        for ticket in batch:
            self._guarded(ticket, functools.partial(self._on_failure, ticket, error))

    # --- load: degradation and cadence ---------------------------------------------------
    def _check_pressure(self, now: float, deadline: float | None) -> float | None:
        """Step the degradation on queued finals' age or calm; the next time to look again."""
        cfg = self._degrader.config
        oldest = self._scheduler.oldest(Priority.FINAL, now)  # live streams' finals
        changed = False
        if oldest is not None and now - oldest > cfg.share * cfg.final_target_s:
            changed = self._degrader.pressure(now)
        else:
            changed = self._degrader.tick(now)
        if changed:
            self._level_changed()
        if self._degrader.level is not Level.FULL:
            wake = now + max(MIN_RECHECK_S, min(cfg.calm_s, cfg.step_s))
            deadline = wake if deadline is None else min(deadline, wake)
        return deadline

    def _level_changed(self) -> None:
        level = self._degrader.level
        logger.warning("degradation level: %s", level.label)
        notify_degradation(self._observer, level.label)
        self._update_cadence()
        if level is Level.FULL:
            return
        now = self._clock.now()
        for stream in list(self._streams.values()):
            # At most one notice per stream per window, however the level moves meanwhile.
            last = self._noticed.get(stream.stream_id)
            if last is None or now - last >= NOTICE_INTERVAL_S:
                self._noticed[stream.stream_id] = now
                stream.deliver([Error("overloaded", level.notice)])

    def _update_cadence(self) -> None:
        """Give every session the partial interval the model can afford (and the level)."""
        hint: float | None = None
        if self.config.adaptive_cadence and self._streams:
            like = _TYPICAL_PARTIAL
            cost = self._scheduler.costs.predict([like] * len(self._streams))
            if cost is not None:
                hint = min(cost / self.config.busy_target, self.config.max_cadence_s)
        level = self._degrader.level
        if level >= Level.PARTIALS_PAUSED:
            hint = math.inf
        elif level >= Level.PARTIALS_STRETCHED:
            base = max(
                hint or 0.0,
                *(s.session.config.partial_interval_s for s in self._streams.values()),
                0.0,
            )
            hint = base * STRETCH
        self._cadence_s = hint
        for stream in self._streams.values():
            stream.session.interval_hint_s = hint

    # --- per-request outcomes ------------------------------------------------------------
    def _on_result(self, ticket: Ticket, result: DecodeResult) -> None:
        tag = self._tags.pop(ticket.seq, _Tag())
        if result.error is not None:
            self._tags[ticket.seq] = tag
            self._on_failure(ticket, result.error)
            return
        if result.next_round is not None:
            # This temperature failed the checks: the next round is a request of its own.
            retry = dataclasses.replace(ticket.request, fallback_round=result.next_round)
            again = dataclasses.replace(tag, rounds=(*tag.rounds, result))
            self._submit(retry, self._clock.now(), ticket.owner, ticket.priority, again)
            return
        if tag.rounds:
            result = _pick_after_fallback((*tag.rounds, result))
        self._complete(ticket, tag, result)

    def _on_failure(self, ticket: Ticket, error: str) -> None:
        tag = self._tags.pop(ticket.seq, _Tag())
        if not self._owner_alive(ticket.owner):
            return
        if ticket.kind is DecodeKind.PARTIAL and not isinstance(ticket.owner, _OfflineCall):
            stream = self._streams[str(ticket.owner)]
            stream.session.on_dropped(ticket.request.request_id)
            self.stream_changed(stream)
            return
        if tag.attempt < self.config.retry.retries:
            # Alone, so a request that breaks the model cannot fail the others again.
            again = dataclasses.replace(tag, attempt=tag.attempt + 1)
            self._submit_solo(ticket, again)
            return
        logger.error("request %r failed for good: %s", ticket.request.request_id, error)
        if isinstance(ticket.owner, _OfflineCall):
            ticket.owner.settle(tag.index, _error_result(ticket.request, error))
            return
        stream = self._streams[str(ticket.owner)]
        stream.session.on_failed(ticket.request.request_id, error)
        self.stream_changed(stream)

    def _submit_solo(self, ticket: Ticket, tag: _Tag) -> None:
        retry = self._scheduler.submit(
            ticket.request,
            self._clock.now(),
            owner=ticket.owner,
            priority=ticket.priority,
            solo=True,
        )
        self._tags[retry.seq] = tag

    def _complete(self, ticket: Ticket, tag: _Tag, result: DecodeResult) -> None:
        owner = ticket.owner
        if isinstance(owner, _OfflineCall):
            owner.settle(tag.index, result)
            return
        stream = self._streams.get(str(owner))
        if stream is None:
            return  # aborted meanwhile
        stream.session.on_result(result)
        self.stream_changed(stream)

    def _track_key(self, stream_id: str, key: Hashable | None) -> None:
        """A stream's requests carry one stream key per utterance, in order: when a new key
        appears (or the stream ends) the previous utterance is over and the model may drop
        its incremental features. The adapter itself knows no lifecycles."""
        previous = self._keys.get(stream_id)
        if previous is not None and previous != key:
            release = getattr(self._decoder, "release_stream", None)
            if release is not None:
                release(previous)
        if key is None:
            self._keys.pop(stream_id, None)
        else:
            self._keys[stream_id] = key

    def _owner_alive(self, owner: Hashable) -> bool:
        if isinstance(owner, _OfflineCall):
            return owner in self._offline
        return str(owner) in self._streams

    def _guarded(self, ticket: Ticket, action: Callable[[], None]) -> None:
        """Run one request's handling; a bug there ends only that request's stream (or
        offline call), and the rest of the batch is still handled."""
        try:
            action()
        except Exception as exc:
            owner = ticket.owner
            if isinstance(owner, _OfflineCall):
                logger.exception("offline request failed")
                if not owner.future.done():
                    owner.future.set_exception(KettleError(f"internal error: {exc}"))
                return
            stream = self._streams.get(str(owner))
            if stream is not None:
                self._fail_stream(stream, exc)

    def _fail_stream(self, stream: Stream, exc: Exception) -> None:
        """End one stream after an internal error: a fatal Error, then Done; others go on."""
        try:
            logger.error("stream %s failed", stream.stream_id, exc_info=exc)
            stream.fail(f"internal error: {type(exc).__name__}")
        finally:
            self._release(stream)

    def _notify(self, call: Callable[[EngineObserver], None]) -> None:
        notify((self.stats, self._observer), call)


# What one stream's partial typically decodes, for the cadence: a few seconds of speech.
_TYPICAL_PARTIAL = DecodeRequest(
    audio=np.zeros(3 * SAMPLE_RATE, dtype=np.float32),
    kind=DecodeKind.PARTIAL,
    beam_size=1,
    max_new_tokens=96,
)


def _memory_release(
    interval_s: float | None, release: Callable[[], None] | None
) -> MemoryRelease | None:
    if interval_s is None:
        return None
    release = release or load_malloc_trim()
    return None if release is None else MemoryRelease(interval_s, release)


def _pick_after_fallback(rounds: Sequence[DecodeResult]) -> DecodeResult:
    """Whisper's rule when every temperature failed: the most likely attempt that is not too
    repetitive; if the last round passed, it is the one."""
    last = rounds[-1]
    if last.fallback is None:
        return last
    candidates = [r for r in rounds if r.fallback != "repetitive"] or list(rounds)
    return max(candidates, key=lambda r: r.avg_logprob)


def _error_result(request: DecodeRequest, error: str) -> DecodeResult:
    return DecodeResult(request.request_id, request.kind, "", error=error)


__all__ = [
    "BatchReport",
    "BatchStats",
    "Done",
    "Engine",
    "EngineConfig",
    "EngineObserver",
    "Error",
    "Event",
    "Final",
    "Partial",
    "Stream",
]
