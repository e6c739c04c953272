"""Streams ahead of real time: which owners are, and when their requests may run.

Each live owner's pace is a ``PaceMeter`` (``pace.py``; the engine reports each stream's
audio). Requests of owners ahead of real time run only when no live final or partial is
queued (``scheduler.py``), and besides:

- while a live stream is open, only within their share of the model's time
  (``ahead_share.py``);
- not while a live stream's utterance is pausing (its final may be asked for at any moment,
  and a decode cannot be preempted), unless their oldest request, and their last batch, are
  ``AHEAD_STARVE_S`` ago: with many live streams one is nearly always pausing.

Pure: every call is given ``now`` (seconds on any monotonic clock).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from kettle.streaming.engine.scheduling.ahead_share import AheadShare
from kettle.streaming.engine.scheduling.pace import PaceMeter

AHEAD_STARVE_S = 2.0


class AheadOfRealTime:
    """The owners' pace meters and the model share of those ahead."""

    def __init__(self) -> None:
        self.share = AheadShare()
        self._meters: dict[Hashable, PaceMeter] = {}
        self._served: float | None = None  # when a stream ahead last got a batch

    def observe_audio(self, owner: Hashable, audio_s: float, now: float) -> None:
        """A live owner's client sent ``audio_s`` seconds of audio."""
        meter = self._meters.get(owner)
        if meter is None:
            meter = self._meters[owner] = PaceMeter(now)
        meter.feed(audio_s, now)

    def ahead(self, owner: Hashable, now: float) -> bool:
        """Whether an owner's client runs ahead of real time (its requests yield)."""
        meter = self._meters.get(owner)
        return meter is not None and meter.ahead(now)

    def forget(self, owner: Hashable) -> None:
        self._meters.pop(owner, None)

    def holding(self, now: float) -> bool:
        """Whether their requests wait for their share of the model: it is used up, and a
        live stream is open to protect."""
        if self.share.open(now):
            return False
        return any(not meter.ahead(now) for meter in self._meters.values())

    def held_for_pause(self, now: float, live_pausing: bool, waiting: Sequence[float]) -> bool:
        """Whether a live stream's pause holds their requests (submitted at ``waiting``)."""
        if not live_pausing:
            return False
        if not waiting:
            return True
        since = min(waiting)
        if self._served is not None:
            since = max(since, self._served)
        return now - since < AHEAD_STARVE_S

    def served(self, now: float) -> None:
        """A batch with their requests went at ``now``."""
        self._served = now

    def used(self, seconds: float, now: float) -> None:
        """Their requests had ``seconds`` of the model, ending at ``now``."""
        self.share.used(seconds, now)

    def opens_at(self, now: float) -> float:
        return self.share.opens_at(now)
