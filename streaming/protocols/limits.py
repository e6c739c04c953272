"""A connection's limits, in one record with their defaults stated once.

`ServerConfig.limits()` derives it from what `kettle serve` was given (the flags show these
defaults); the connection gate (session slots), the connection runner (timeouts, message
rate, outbox), the audio budget (rate, burst, backlog, length in audio time) and the codecs
(frame size, message rate, announced session length) all read this one record. A protocol
route picks its own idle timeout from it (`ProtocolRoute.idle_timeout`). It lives with the
protocols because codecs may import only core and protocols.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kettle.transcribe.errors import ConfigError


@dataclass(frozen=True)
class Limits:
    # The first three, in this order, are what codecs read (tests pass them by position).
    max_frame_bytes: int = 1 << 20  # one binary audio message; codecs refuse larger ones
    max_messages_per_second: float = 20.0  # text messages, bursts of twice as many
    # A session's longest life, in wall time (the runner) and in audio time (the audio
    # budget); some codecs announce it to their clients.
    max_session_s: float = 4 * 3600.0
    max_message_bytes: int = 16 << 20  # any one message; the socket closes with 1009 beyond
    max_sessions: int = 64  # engine streams open at once, all connections together
    idle_timeout_s: float = 60.0  # no client message for this long: the session stops
    # Deepgram's live socket (/v1/listen) ends after this long with neither audio nor a
    # text message (KeepAlive, ...), as Deepgram's does: finals, Metadata, close 1011
    # (NET-0001). Its route picks it as its idle timeout.
    deepgram_audio_timeout_s: float = 10.0
    # After stop, the finals and done must be out within this; else internal error and 1011.
    finish_timeout_s: float = 300.0
    outbox_limit: int = 1000  # messages waiting for a reader that reads nothing: 1008
    # Audio admission (audio_budget.py): sustained x real time, initial burst, and the
    # untranscribed audio a session may hold (more than one 30 s utterance).
    audio_rate: float = 2.0
    audio_burst_s: float = 10.0
    max_backlog_s: float = 120.0

    def __post_init__(self) -> None:
        problems = _problems(self)
        if problems:
            raise ConfigError("; ".join(problems))


def _problems(limits: Limits) -> list[str]:
    """What is wrong with these values (empty when nothing is)."""
    found = []
    for name in ("max_sessions", "max_frame_bytes", "outbox_limit"):
        if getattr(limits, name) < 1:
            found.append(f"{name} must be at least 1")
    if limits.max_message_bytes < limits.max_frame_bytes:
        found.append("max_message_bytes must be at least max_frame_bytes")
    for name in (
        "idle_timeout_s",
        "deepgram_audio_timeout_s",
        "max_messages_per_second",
        "finish_timeout_s",
    ):
        if not getattr(limits, name) > 0:
            found.append(f"{name} must be positive")
    # The audio budget counts with these: finite too.
    for name in ("max_session_s", "audio_rate", "audio_burst_s", "max_backlog_s"):
        value = getattr(limits, name)
        if not (value > 0 and math.isfinite(value)):
            found.append(f"{name} must be a positive number, got {value!r}")
    return found


DEFAULT_LIMITS = Limits()
