"""Load control: the degradation level, the partial cadence and the overloaded notices.

The one producer of ``overloaded`` notices, for both of their causes (a step of the
degradation level, a partial skipped for load), with one throttle per stream.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Sequence

import numpy as np
from kettle.streaming.core.events import Error
from kettle.streaming.engine.clock import Clock
from kettle.streaming.engine.config import EngineConfig
from kettle.streaming.engine.degrade import STRETCH, Degrader, Level
from kettle.streaming.engine.report import EngineObserver, notify_degradation
from kettle.streaming.engine.scheduling.scheduler import Priority, Scheduler, Ticket
from kettle.streaming.engine.stream import Stream
from kettle.transcribe.model.defaults import PARTIAL_MAX_TOKENS
from kettle.transcribe.types import SAMPLE_RATE, DecodeKind, DecodeRequest, Purpose

logger = logging.getLogger(__name__)

NOTICE_INTERVAL_S = 5.0  # docs/protocol.md#error: overloaded at most once every 5 s
SKIPPING = "the server is skipping partials for now; finals follow"
MIN_RECHECK_S = 0.05  # while degraded, the load is looked at again at least this far apart

# What one stream's partial typically decodes, for the cadence: a few seconds of speech.
TYPICAL_PARTIAL = DecodeRequest(
    audio=np.zeros(3 * SAMPLE_RATE, dtype=np.float32),
    kind=DecodeKind.PARTIAL,
    purpose=Purpose.PARTIAL,
    beam_size=1,
    max_new_tokens=PARTIAL_MAX_TOKENS,
)


class LoadControl:
    """Steps the degradation on live waits and queued finals' age, tells the sessions the
    partial interval the model can afford, and the clients that the server is overloaded.
    The engine passes the open streams to each call that reaches them."""

    def __init__(
        self,
        config: EngineConfig,
        scheduler: Scheduler,
        clock: Clock,
        observer: EngineObserver | None,
    ) -> None:
        self.config = config
        self.degrader = Degrader(config.degrade)
        self.cadence_s: float | None = None  # the partial interval hint given to sessions
        self._scheduler = scheduler
        self._clock = clock
        self._observer = observer
        self._noticed: dict[str, float] = {}  # stream id -> when it last got a notice

    @property
    def level(self) -> Level:
        return self.degrader.level

    def adjust(self, request: DecodeRequest) -> DecodeRequest:
        """A live request as the current level lets it run (greedy when degraded)."""
        level = self.degrader.level
        if request.kind is DecodeKind.FINAL:
            if level >= Level.FINALS_GREEDY and request.beam_size != 1:
                request = dataclasses.replace(request, beam_size=1)
        elif request.beam_size not in (None, 1) and level >= Level.PARTIALS_STRETCHED:
            # A partial's beam is the first thing to give up under pressure.
            request = dataclasses.replace(request, beam_size=1)
        return request

    def observe_batch(
        self,
        batch: Sequence[Ticket],
        waits: Sequence[float],
        decode_s: float,
        started: float,
        streams: Sequence[Stream],
    ) -> None:
        """Feed a decoded batch's waits and time to the degrader; retune the cadence."""
        kind = DecodeKind.FINAL if batch[0].kind is DecodeKind.FINAL else DecodeKind.PARTIAL
        # The latency targets apply to live classes, and not to streams that run ahead
        # of real time (their requests yield, so they wait by design).
        live = batch[0].priority <= Priority.PARTIAL and not all(
            self._scheduler.ahead(t.owner, started) for t in batch
        )
        now = self._clock.now()
        if live and self.degrader.observe(now, kind, max(waits), decode_s):
            self.level_changed(streams)
        if kind is DecodeKind.PARTIAL:
            self.update_cadence(streams)

    def check_pressure(
        self, now: float, deadline: float | None, streams: Sequence[Stream]
    ) -> float | None:
        """Step the degradation on queued finals' age or calm; the next time to look again."""
        cfg = self.degrader.config
        oldest = self._scheduler.oldest(Priority.FINAL, now)  # live streams' finals
        changed = False
        if oldest is not None and now - oldest > cfg.share * cfg.final_target_s:
            changed = self.degrader.pressure(now)
        else:
            changed = self.degrader.tick(now)
        if changed:
            self.level_changed(streams)
        if self.degrader.level is not Level.FULL:
            wake = now + max(MIN_RECHECK_S, min(cfg.calm_s, cfg.step_s))
            deadline = wake if deadline is None else min(deadline, wake)
        return deadline

    def level_changed(self, streams: Sequence[Stream]) -> None:
        """Log and report the new level, retune the cadence, notify the streams."""
        level = self.degrader.level
        logger.warning("degradation level: %s", level.label)
        notify_degradation(self._observer, level.label)
        self.update_cadence(streams)
        if level is Level.FULL:
            return
        for stream in list(streams):
            self._notice(stream, level.notice)

    def partial_skipped(self, stream: Stream) -> None:
        """The scheduler skipped a stream's partial for load (its session stretches its
        partial interval): tell the client, as the notice window allows."""
        self._notice(stream, SKIPPING)

    def forget(self, stream_id: str) -> None:
        """The stream is gone."""
        self._noticed.pop(stream_id, None)

    def _notice(self, stream: Stream, message: str) -> None:
        # At most one notice per stream per window, whatever its cause and however the
        # level moves meanwhile.
        now = self._clock.now()
        last = self._noticed.get(stream.stream_id)
        if last is None or now - last >= NOTICE_INTERVAL_S:
            self._noticed[stream.stream_id] = now
            stream.deliver([Error("overloaded", message)])

    def update_cadence(self, streams: Sequence[Stream]) -> None:
        """Give every session the partial interval the model can afford (and the level)."""
        hint: float | None = None
        if self.config.adaptive_cadence and streams:
            cost = self._scheduler.costs.predict([TYPICAL_PARTIAL] * len(streams))
            if cost is not None:
                hint = min(cost / self.config.busy_target, self.config.max_cadence_s)
        level = self.degrader.level
        if level >= Level.PARTIALS_PAUSED:
            hint = math.inf
        elif level >= Level.PARTIALS_STRETCHED:
            base = max(
                hint or 0.0,
                *(s.partial_interval_s for s in streams),
                0.0,
            )
            hint = base * STRETCH
        self.cadence_s = hint
        for stream in streams:
            stream.interval_hint_s = hint
