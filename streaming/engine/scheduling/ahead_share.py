"""The model time that streams ahead of real time may take while live streams are served.

``pace.py`` says which streams run ahead of real time (a flooder admitted at twice real time,
a file pushed at full speed) and the scheduler serves their requests after live ones. That
alone does not protect a live stream: a decode cannot be preempted, so a live final that
arrives while a flooder's final runs waits for it, and with the model otherwise idle the
flooder's work fills every gap. (Measured in the soak: once partials got cheaper, the flooder
took 1.65x real time of audio and the honest streams' final lag P95 rose by 30 %.)

So while a live stream is open, requests of streams ahead of real time run only within a
share of the model's time (``SHARE``): a leaky bucket of model seconds, filled with the
decode time their batches took and drained at ``SHARE`` seconds per wall second; their
requests may go only while it is empty. With no live stream open the scheduler does not ask
(a file pushed at full speed onto an idle server gets the whole model).

Pure: every call is given ``now`` (seconds on any monotonic clock).
"""

from __future__ import annotations

SHARE = 0.25  # of the model's time, for all streams ahead of real time together


class AheadShare:
    def __init__(self, share: float = SHARE) -> None:
        if not 0.0 < share <= 1.0:
            raise ValueError(f"the share must be within (0, 1], not {share}")
        self.share = share
        self._level = 0.0  # model seconds used beyond the share
        self._last: float | None = None

    def used(self, seconds: float, now: float) -> None:
        """Streams ahead of real time had ``seconds`` of the model, ending at ``now`` (the
        time it ran counts towards the wall time that pays for it)."""
        seconds = max(0.0, seconds)
        self._drain(now - seconds)
        self._level += seconds

    def open(self, now: float) -> bool:
        """Whether their next request may go now."""
        self._drain(now)
        return self._level <= 0.0

    def opens_at(self, now: float) -> float:
        """When their next request may go (``now`` if it may already)."""
        self._drain(now)
        return now + self._level / self.share

    def _drain(self, now: float) -> None:
        if self._last is not None:
            self._level = max(0.0, self._level - max(0.0, now - self._last) * self.share)
        self._last = now if self._last is None else max(self._last, now)
