"""What a refused handshake answers: its status, message, metrics label and headers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Refusal:
    """A refused handshake: the HTTP status, a message for the client, extra headers."""

    status: int
    message: str
    reason: str  # the label of kettle_sessions_rejected_total
    headers: Mapping[str, str] = field(default_factory=dict)
