"""Audio admission in audio seconds: how fast a connection may feed audio. No I/O, no clock.

A token bucket counted in seconds of audio, on the connection's `Limits`. It starts full with
`audio_burst_s` (a client may send a file's first ~10 s at once, or catch up after a network
stall), then refills at `audio_rate` audio seconds per wall second. Audio that was read is
always accepted; the bucket may go negative, and `admit` answers how long the reader should
pause before it reads again. While the reader pauses, the socket's buffers fill and TCP
pushes back on the client: a client that sends too fast is slowed down, loses nothing and
sees no error.

While the engine is overloaded (skipping partials), the rate drops to `OVERLOAD_RATE`
(real time): a client ahead of real time then takes no more of the model than a
live stream does, and the live streams keep their share. So it does while the session holds
more than a third of `max_backlog_s` untranscribed (``slow_backlog_s``): a client ahead of
real time gets only a share of the model while live streams are served (``ahead_share.py``),
so at twice real time its backlog would grow until the limit below ended it.

Two limits end a session instead, each with a clear reason, never by dropping audio:
- `max_backlog_s`: the audio the session holds but has not yet transcribed (the safety net for
  a server that falls behind even at the admitted rate);
- `max_session_s`: the session's length counted in audio time (the wall-time limit lives with
  the connection's other timers).
"""

from __future__ import annotations

from kettle.streaming.protocols.limits import Limits

# The rate while the engine is overloaded or the session's backlog is large: real time.
OVERLOAD_RATE = 1.0


class AudioAdmission:
    """One connection's audio budget. Every call is given `now` (any monotonic seconds)."""

    def __init__(self, limits: Limits, now: float) -> None:
        self.limits = limits
        self._tokens = limits.audio_burst_s
        self._last = now
        self._rate = limits.audio_rate
        self.audio_s = 0.0  # audio admitted so far
        self.paused_s = 0.0  # total pause asked for (observability)

    def _refill(self, now: float) -> None:
        elapsed = max(0.0, now - self._last)
        self._last = max(self._last, now)
        self._tokens = min(self.limits.audio_burst_s, self._tokens + elapsed * self._rate)

    @property
    def rate(self) -> float:
        """Audio seconds admitted per wall second now."""
        return self._rate

    def set_overloaded(self, overloaded: bool, now: float, undecoded_s: float = 0.0) -> None:
        """The engine's state and the session's untranscribed audio: the rate until the next
        change (time so far at the old one)."""
        self._refill(now)
        slow = overloaded or undecoded_s > self.slow_backlog_s
        self._rate = OVERLOAD_RATE if slow else self.limits.audio_rate

    def admit(self, audio_s: float, now: float) -> float:
        """Charge `audio_s` just read; the seconds to wait before reading more (0: read on)."""
        if audio_s < 0:
            raise ValueError("audio_s must not be negative")
        self._refill(now)
        self._tokens -= audio_s
        self.audio_s += audio_s
        pause = self.pause_s(now)
        self.paused_s += pause
        return pause

    def pause_s(self, now: float) -> float:
        """How long until the budget is back to zero (0 when it is not in debt)."""
        self._refill(now)
        if self._tokens >= 0:
            return 0.0
        return -self._tokens / self._rate

    def over_length(self) -> bool:
        """The session has sent its maximum length of audio."""
        return self.audio_s >= self.limits.max_session_s

    @property
    def slow_backlog_s(self) -> float:
        """Past this much untranscribed audio the rate drops as when overloaded."""
        return self.limits.max_backlog_s / 3

    def over_backlog(self, undecoded_s: float) -> bool:
        """The session holds more untranscribed audio than the safety net allows."""
        return undecoded_s > self.limits.max_backlog_s

    def backlog_message(self, undecoded_s: float) -> str:
        return (
            f"the server holds {undecoded_s:.1f} s of this session's audio not yet transcribed, "
            f"over the limit of {self.limits.max_backlog_s:g} s; the session is finishing what "
            "it holds and closing. Send audio no faster than real time."
        )
