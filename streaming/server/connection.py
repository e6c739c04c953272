"""One connection's lifecycle, deadlines and text-message rate. Pure: every call gets `now`.

The states, in order (a connection may skip ahead, never go back):

- open: messages flow; deadlines are the idle timeout and the maximum session length;
- stopped: no more input is used (client `stop`, idle, max length, shutdown); the finals
  and the protocol's closing message must be out within the finish timeout;
- finished: the closing message is out (or the engine was let go); no deadline any more.

`close_code` is what the connection closes with after its closing message: 1000, or 1001
once the server is shutting down (1012 when a drain ran out of time).
"""

from __future__ import annotations

from dataclasses import dataclass

from kettle.streaming.protocols.base import CLOSE_GOING_AWAY, CLOSE_NORMAL
from kettle.streaming.server.limits import TokenBucket

IDLE = "idle"
MAX_DURATION = "max_duration"
FINISH_TIMEOUT = "finish_timeout"


@dataclass(frozen=True)
class ConnectionLimits:
    idle_timeout_s: float = 60.0
    max_session_s: float = 4 * 3600.0
    finish_timeout_s: float = 300.0
    max_messages_per_second: float = 20.0


class ConnectionState:
    def __init__(self, limits: ConnectionLimits, now: float) -> None:
        self.limits = limits
        self.started = now
        self.last_message = now
        self.stopped = False
        self.stopped_at = now
        self.finished = False  # the closing message is out, or nothing more will come
        self.close_code = CLOSE_NORMAL
        rate = limits.max_messages_per_second
        self._rate = TokenBucket(rate, max(1.0, 2 * rate), now)
        self._rate_limited = False

    def deadline(self) -> tuple[float, str] | None:
        """The next deadline and what happens there, or None when nothing is awaited."""
        if self.stopped:
            if self.finished:
                return None
            return (self.stopped_at + self.limits.finish_timeout_s, FINISH_TIMEOUT)
        idle = self.last_message + self.limits.idle_timeout_s
        longest = self.started + self.limits.max_session_s
        return (idle, IDLE) if idle <= longest else (longest, MAX_DURATION)

    def on_message(self, now: float) -> bool:
        """A client message arrived; False when it is to be ignored (after stop)."""
        if self.stopped:
            return False
        self.last_message = now
        return True

    def stop(self, now: float) -> bool:
        """Enter the stopped state; False when already there."""
        if self.stopped:
            return False
        self.stopped = True
        self.stopped_at = now
        return True

    def shutting_down(self, code: int = CLOSE_GOING_AWAY) -> None:
        self.close_code = code

    def rate_gate(self, now: float) -> RateVerdict:
        return RateVerdict(self, now)

    def _check_rate(self, now: float) -> str:
        if self._rate.allow(now):
            self._rate_limited = False
            return "allow"
        first = not self._rate_limited
        self._rate_limited = True
        return "notify" if first else "drop"


class RateVerdict:
    """The `RateGate` a codec gets for one message (see protocols/base.py)."""

    def __init__(self, state: ConnectionState, now: float) -> None:
        self._state = state
        self._now = now

    def check(self) -> str:
        return self._state._check_rate(self._now)
