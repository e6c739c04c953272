"""The asyncio engine: owns the streams, the scheduler and the inference worker.

The engine's task runs on the event loop: it asks the scheduler for a batch, has the
inference worker (``worker.py``, the one thread that touches the model) run it, routes the
results back to the sessions and their streams, and otherwise sleeps until new work arrives
or the scheduler's next deadline. Every timer goes through an injected ``Clock``.

Priorities (``scheduler.Priority``): finals > partials > speculative finals (before
partials once they have waited ``speculative_urgent_s``) > refinements and offline work
(``decode_offline``, for files and uploads), these two in fair order. A session's queued
request that became useless (a partial while its final is due, a speculation that speech
resuming made void) is withdrawn and reported dropped to the session, so its final never
waits behind it; a speculative final whose utterance ended on the speculated window is
promoted to a final. Within a class, a stream whose client sends audio faster than real
time yields to live streams, and owners share the model fairly (the engine reports each
stream's audio to the scheduler's pace).

Every request's state, from submit to its outcome, is held by the request ledger
(``ledger.py``): a stream's requests reach it through ``routing.py`` (which holds the open
streams), each loop turn takes a ``Batch`` record from it, and ``outcomes.py`` consumes the
``BatchOutput`` record of the batch that ran (results, failures, retries). The degradation
level, the partial cadence and the overloaded notices are ``load.py``'s. Model failures
back off exponentially (``worker.py``), and ``model_failing`` is true while they keep
coming (readiness reads it).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import itertools
import logging
from collections.abc import Callable, Sequence
from types import TracebackType

from kettle.streaming.core.events import Done, Error, Event, Final, Partial
from kettle.streaming.core.session import Session, SessionConfig
from kettle.streaming.engine.clock import Clock, MonotonicClock
from kettle.streaming.engine.config import EngineConfig
from kettle.streaming.engine.degrade import Degrader, Level
from kettle.streaming.engine.ledger import Batch, BatchOutput, Ledger
from kettle.streaming.engine.load import LoadControl
from kettle.streaming.engine.measure import measure_costs
from kettle.streaming.engine.native_memory import memory_release
from kettle.streaming.engine.outcomes import Outcomes
from kettle.streaming.engine.report import BatchReport, BatchStats, EngineObserver, notify
from kettle.streaming.engine.routing import Router
from kettle.streaming.engine.scheduling.scheduler import Scheduler
from kettle.streaming.engine.speakers import SpeakerService
from kettle.streaming.engine.stream import Stream
from kettle.streaming.engine.uploads import Uploads
from kettle.streaming.engine.worker import InferenceWorker
from kettle.transcribe.errors import KettleError
from kettle.transcribe.model.costs import CostProfile
from kettle.transcribe.types import DecodeKind, Decoder, DecodeRequest, DecodeResult, Purpose

logger = logging.getLogger(__name__)

# Stream ids are unique in the process, not just per engine: they key the adapter's encoder
# cache, which may outlive an engine (a decoder shared by engines, or reused after a restart).
_STREAM_IDS = itertools.count(1)


class Engine:
    def __init__(
        self,
        decoder: Decoder,
        config: EngineConfig | None = None,
        *,
        final_decoder: Decoder | None = None,
        refine_decoder: Decoder | None = None,
        observer: EngineObserver | None = None,
        clock: Clock | None = None,
        release_memory: Callable[[], None] | None = None,
        speakers: SpeakerService | None = None,
    ) -> None:
        """``final_decoder`` decodes live finals and ``refine_decoder`` refinements (each
        default: the one before it). ``release_memory``: what returns free memory to the OS
        when ``config.release_memory_s`` is set (default: glibc's malloc_trim, where present).
        ``speakers`` labels the finals of streams opened with diarize (engine/speakers.py)."""
        self.speakers = speakers
        self._decoder = decoder
        self._final_decoder = final_decoder
        self._refine_decoder = refine_decoder
        self.config = config or EngineConfig()
        self._observer = observer
        self._clock: Clock = clock or MonotonicClock()
        self._scheduler = Scheduler(self.config.scheduler)
        self._ledger = Ledger(self._scheduler)
        self._worker = InferenceWorker(self._clock, self.config.retry)
        self._load = LoadControl(self.config, self._scheduler, self._clock, observer)
        self._router = Router(
            self._ledger,
            self._scheduler,
            self._clock,
            self._load,
            decoder=decoder,
            kick=self._kick,
            drained=self._drained_now,
        )
        self._outcomes = Outcomes(
            self._ledger, self._clock, self.config.retry, self._router, self._load
        )
        self._uploads = Uploads(self._ledger, self._clock, self._kick)
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._closing = False
        self._drained: asyncio.Event | None = None
        self.stats = BatchStats()
        self._trim = memory_release(self.config.release_memory_s, release_memory)

    # --- lifecycle -----------------------------------------------------------------------
    async def start(self) -> None:
        if self._task is not None:
            return
        self._wake = asyncio.Event()
        self._worker.start()
        profiles = await measure_costs(
            self._worker,
            self._decoder,
            self.final_decoder,
            self.config.cost_cache,
            self.config.remeasure_costs,
        )
        self._scheduler.costs.profiles.update(profiles)
        self._closing = False
        self._task = asyncio.create_task(self._run(), name="kettle-engine")

    async def close(self) -> None:
        """Stop open streams (their finals still go out, within close_timeout_s), then end."""
        if self._task is None:
            return
        for stream in self._router.streams:
            stream.stop("shutdown")
        deadline = self._clock.now() + self.config.close_timeout_s
        while len(self._router) and self._clock.now() < deadline and not self._task.done():
            # Woken by _drained_now when a stream finishes; the deadline bounds it.
            self._drained = asyncio.Event()
            await self._clock.wait(self._drained, deadline)
        for stream in self._router.streams:
            stream.abort()
        self._uploads.close()
        self._closing = True
        assert self._wake is not None
        self._wake.set()
        task, self._task = self._task, None
        with contextlib.suppress(asyncio.CancelledError):
            await task
        self._worker.shutdown()

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
        if self._decoder.multilingual or self.final_decoder.multilingual:
            # With no language the model detects each window's: no context (SessionConfig),
            # also after a reconfigure that drops the language.
            config = dataclasses.replace(config, multilingual=True)
        if config.diarize and self.speakers is None:
            raise KettleError("diarize needs a speaker model (the engine has none)")
        session = Session(config, session_id=stream_id)
        session.interval_hint_s = self._load.cadence_s
        stream = Stream(
            self._router, stream_id, session, self.config.event_queue_size, self.speakers
        )
        self._router.open(stream)
        self._load.update_cadence(self._router.streams)
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
        return await self._uploads.decode(requests)

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
        return self._load.level

    @property
    def partial_interval_hint_s(self) -> float | None:
        """The partial interval sessions are asked to keep at least (None: their own)."""
        return self._load.cadence_s

    @property
    def cost_profiles(self) -> dict[DecodeKind, CostProfile]:
        return dict(self._scheduler.costs.profiles)

    @property
    def queue_depth(self) -> int:
        return len(self._scheduler)

    @property
    def streams_open(self) -> int:
        return len(self._router)

    @property
    def decoder(self) -> Decoder:
        return self._decoder

    @property
    def final_decoder(self) -> Decoder:
        return self._final_decoder or self._decoder

    @property
    def refine_decoder(self) -> Decoder:
        return self._refine_decoder or self.final_decoder

    @property
    def refinements_skipped(self) -> int:
        """Refinements the scheduler dropped after waiting too long (load)."""
        return self._scheduler.refinements_skipped

    @property
    def _degrader(self) -> Degrader:
        return self._load.degrader  # tests drive the level directly

    def _level_changed(self) -> None:
        self._load.level_changed(self._router.streams)

    # --- the router's callbacks (the router is the streams' host) ------------------------
    def _drained_now(self) -> None:
        if self._drained is not None:
            self._drained.set()  # close() waits for it

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
                    pausing = self._router.live_pausing(now)
                    headroom = self._router.final_headroom(now)
                    batch = self._ledger.schedule(
                        now,
                        sources=len(self._router),
                        live_pausing=pausing,
                        final_headroom_s=headroom,
                    )
                    self._outcomes.route_dropped(batch.dropped)
                    if batch.entries:
                        await self._run_batch(batch)
                        await self._release_memory(idle=False)
                        continue
                except Exception:  # a bug in routing must not stop every stream
                    logger.exception("engine loop error")
                    await asyncio.sleep(0)
                    continue
                if await self._release_memory(idle=True):
                    continue
                deadline = self._scheduler.next_deadline(
                    now, live_pausing=pausing, final_headroom_s=headroom
                )
                deadline = self._load.check_pressure(now, deadline, self._router.streams)
            self._wake.clear()
            await self._clock.wait(self._wake, deadline)

    async def _release_memory(self, *, idle: bool) -> bool:
        """Return free native memory to the OS if due (native_memory.py); True if it ran."""
        now = self._clock.now()
        if self._trim is None or not self._trim.due(now, idle=idle):
            return False
        await self._worker.call(functools.partial(self._trim.run, now))
        return True

    def _decoder_for(self, request: DecodeRequest) -> Decoder:
        if request.purpose is Purpose.REFINEMENT:
            return self.refine_decoder
        return self.final_decoder if request.kind is DecodeKind.FINAL else self._decoder

    async def _run_batch(self, batch: Batch) -> None:
        started = self._clock.now()
        tickets = [entry.ticket for entry in batch.entries]
        waits = [started - t.submitted for t in tickets]
        first = tickets[0].request  # a batch holds one kind and one class
        requests = [t.request for t in tickets]
        outcome = await self._worker.run(self._decoder_for(first), requests)
        if self._trim is not None:
            self._trim.note_work(started)
        if outcome.results is not None:
            self._scheduler.observe_batch(tickets, outcome.decode_s, self._clock.now())
            streams = self._router.streams
            self._load.observe_batch(tickets, waits, outcome.decode_s, started, streams)
            hits = sum(1 for r in outcome.results if r.encoder_cache_hit)
            final = first.kind is DecodeKind.FINAL and first.purpose is not Purpose.REFINEMENT
            report = BatchReport(
                len(tickets), len(tickets) if final else 0, tuple(waits), outcome.decode_s, hits
            )
            self._notify(lambda o: o.on_batch(report))
            output = BatchOutput(batch.entries, tuple(outcome.results))
            self._outcomes.update_from_output(output)
            return
        error = outcome.error or "decode failed"
        logger.warning("decode batch of %d failed: %s", len(tickets), error)
        self._notify(lambda o: o.on_batch_failed(len(tickets), error))
        self._outcomes.update_from_output(BatchOutput(batch.entries, None, error))

    def _notify(self, call: Callable[[EngineObserver], None]) -> None:
        notify((self.stats, self._observer), call)


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
