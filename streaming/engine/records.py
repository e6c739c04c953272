"""What the router keeps per open stream, in one record."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from kettle.streaming.engine.stream import Stream


@dataclass(eq=False)
class StreamRecord:
    """One open stream and the router's bookkeeping for it; dropped with the stream."""

    stream: Stream
    key: Hashable | None = None  # stream key of its latest request (its utterance)
    fed: int = 0  # samples its pace was told of
