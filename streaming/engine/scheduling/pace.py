"""How far a stream's client runs ahead of real time: the audio it sent beyond the clock.

A leaky bucket counted in audio seconds: each audio message adds its length, and the bucket
drains at ``LEAK`` audio seconds per wall second, a little faster than real time. A client
that sends in real time keeps it near one message's length; one that sends faster (a file
pushed at full speed, a flooder admitted at twice real time) fills it; a client that burst
once (a reconnect sending again the audio no final covers) is forgiven after a while (a 10 s
burst in 40 s). The scheduler lets such a stream's requests go after those of streams that
are not ahead (``scheduler.py``): the live ones, whose users are waiting on each word.

Pure: every call is given ``now`` (seconds on any monotonic clock).
"""

from __future__ import annotations

LEAK = 1.25  # audio seconds per wall second the bucket drains
AHEAD_S = 3.0  # more than this ahead of real time: the stream yields to live ones


class PaceMeter:
    def __init__(self, now: float) -> None:
        self._level = 0.0
        self._last = now

    def feed(self, audio_s: float, now: float) -> None:
        """The client sent ``audio_s`` seconds of audio at ``now``."""
        self._drain(now)
        self._level += max(0.0, audio_s)

    def ahead_s(self, now: float) -> float:
        """Audio seconds sent beyond real time (with the leak's slack), as of ``now``."""
        self._drain(now)
        return self._level

    def ahead(self, now: float) -> bool:
        return self.ahead_s(now) > AHEAD_S

    def _drain(self, now: float) -> None:
        elapsed = max(0.0, now - self._last)
        self._last = max(self._last, now)
        self._level = max(0.0, self._level - elapsed * LEAK)
