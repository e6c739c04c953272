"""The per-connection queue between a session's events and its socket writer.

A slow reader must never block the engine, so the engine's events are always taken at once
and parked here. What is parked is bounded by this policy:

- a partial replaces every partial still waiting for the same or an earlier utterance (they
  are stale: the client would overwrite them at once), and a final drops waiting partials of
  its utterance; so at most a partial or two wait, however slow the reader;
- finals, errors and `done` are never dropped; they are few (one per utterance), but a peer
  that reads nothing at all would let them grow, so past `limit` messages the outbox reports
  overflow and the server ends that session.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from dataclasses import dataclass

PARTIAL = "partial"
FINAL = "final"
OTHER = "other"


@dataclass(frozen=True)
class OutMessage:
    """One encoded server message. `end` is the 16 kHz end sample of partials and finals."""

    kind: str
    text: str
    utterance: int = -1
    end: int = 0
    closing: bool = False  # the connection closes after this message (done, fatal error)
    fatal: bool = False  # ... with 1011


class Outbox:
    def __init__(self, limit: int = 1000) -> None:
        if limit < 1:
            raise ValueError("outbox limit must be at least 1")
        self.limit = limit
        self._queue: collections.deque[OutMessage] = collections.deque()
        self._ready = asyncio.Event()
        self.dropped_partials = 0
        self.overflowed = False

    def __len__(self) -> int:
        return len(self._queue)

    def put(self, message: OutMessage) -> bool:
        """Queue a message, dropping what it makes stale; False once the reader is hopeless."""
        if message.kind == PARTIAL:
            self._drop_partials(lambda m: m.utterance <= message.utterance)
        elif message.kind == FINAL:
            self._drop_partials(lambda m: m.utterance == message.utterance)
        self._queue.append(message)
        self._ready.set()
        if len(self._queue) > self.limit:
            self.overflowed = True
        return not self.overflowed

    def _drop_partials(self, stale: Callable[[OutMessage], bool]) -> None:
        if not any(m.kind == PARTIAL for m in self._queue):
            return
        kept = [m for m in self._queue if not (m.kind == PARTIAL and stale(m))]
        self.dropped_partials += len(self._queue) - len(kept)
        self._queue = collections.deque(kept)

    def get_nowait(self) -> OutMessage | None:
        if not self._queue:
            self._ready.clear()
            return None
        return self._queue.popleft()

    async def get(self) -> OutMessage:
        while True:
            message = self.get_nowait()
            if message is not None:
                return message
            await self._ready.wait()
