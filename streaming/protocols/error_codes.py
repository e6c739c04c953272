"""Kettle's own error codes: what an engine ``Error`` carries, what kettle v1 sends as they
are (docs/protocol.md#error's, plus kettle's additions), and what kettle_errors_total{code} counts.
Every protocol reads them from here; the others map them to their own shapes."""

from __future__ import annotations

BAD_MESSAGE = "bad_message"
BAD_AUDIO = "bad_audio"
OVERLOADED = "overloaded"
INTERNAL = "internal"
RATE_LIMITED = "rate_limited"  # addition: a text message over the per-session rate, dropped

__all__ = ["BAD_AUDIO", "BAD_MESSAGE", "INTERNAL", "OVERLOADED", "RATE_LIMITED"]
