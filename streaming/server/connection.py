"""One connection's lifecycle, deadlines and text-message rate. Pure: every call gets `now`.

The phases, and every change between them, are here and nowhere else (`TRANSITIONS`); a
change the table does not list raises `IllegalTransition`:

- OPEN: messages flow; deadlines are the idle timeout and the maximum session length;
- STOPPED: no more input is used (client `stop`, idle, max length, shutdown, bad audio, a
  backlog over the limit); the finals and the protocol's closing message must be out within
  the finish timeout;
- FINISHED: the closing message is out, or the engine was let go (a close at once, a failure,
  a peer gone); no deadline any more, and nothing more is read.

`close_code` is what the connection closes with after its closing message: 1000, or 1001
once the server is shutting down (1012 when a drain ran out of time), or 1008 when the
session was ended by a policy (bad audio, a backlog over the limit).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from kettle.streaming.protocols.base import CLOSE_GOING_AWAY, CLOSE_NORMAL
from kettle.streaming.protocols.limits import Limits
from kettle.streaming.server.access import TokenBucket

IDLE = "idle"
MAX_DURATION = "max_duration"
FINISH_TIMEOUT = "finish_timeout"


class Phase(enum.Enum):
    OPEN = "open"
    STOPPED = "stopped"
    FINISHED = "finished"


# Every change of phase a connection may make: forward only, never back.
TRANSITIONS: Mapping[Phase, frozenset[Phase]] = {
    Phase.OPEN: frozenset({Phase.STOPPED, Phase.FINISHED}),
    Phase.STOPPED: frozenset({Phase.FINISHED}),
    Phase.FINISHED: frozenset(),
}


class IllegalTransition(RuntimeError):
    """A change of phase that `TRANSITIONS` does not allow (a bug in the runner)."""

    def __init__(self, old: Phase, new: Phase) -> None:
        super().__init__(f"a connection cannot go from {old.value} to {new.value}")
        self.old, self.new = old, new


class ConnectionState:
    def __init__(self, limits: Limits, now: float) -> None:
        self.limits = limits
        self.phase = Phase.OPEN
        self.started = now
        self.last_message = now
        self.stopped_at = now
        self.close_code = CLOSE_NORMAL
        rate = limits.max_messages_per_second
        self._rate = TokenBucket(rate, max(1.0, 2 * rate), now)
        self._rate_limited = False

    def enter(self, phase: Phase) -> None:
        """Move to ``phase``; raises IllegalTransition when the table does not allow it."""
        if phase not in TRANSITIONS[self.phase]:
            raise IllegalTransition(self.phase, phase)
        self.phase = phase

    @property
    def open(self) -> bool:
        """Input is taken (audio fed, the stream finalized or reconfigured)."""
        return self.phase is Phase.OPEN

    def stop(self, now: float) -> bool:
        """Stop taking input; False when it had stopped already (or the connection finished)."""
        if self.phase is not Phase.OPEN:
            return False
        self.enter(Phase.STOPPED)
        self.stopped_at = now
        return True

    def finish(self) -> bool:
        """Nothing more will come (closing message out, or the engine let go); False when
        that was so already."""
        if self.phase is Phase.FINISHED:
            return False
        self.enter(Phase.FINISHED)
        return True

    def deadline(self) -> tuple[float, str] | None:
        """The next deadline and what happens there, or None when nothing is awaited."""
        if self.phase is Phase.FINISHED:
            return None
        if self.phase is Phase.STOPPED:
            return (self.stopped_at + self.limits.finish_timeout_s, FINISH_TIMEOUT)
        idle = self.last_message + self.limits.idle_timeout_s
        longest = self.started + self.limits.max_session_s
        return (idle, IDLE) if idle <= longest else (longest, MAX_DURATION)

    def on_message(self, now: float) -> bool:
        """A client message arrived; False when it is to be ignored (after stop)."""
        if self.phase is not Phase.OPEN:
            return False
        self.last_message = now
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
