"""The per-connection queue between a session's events and its socket writer.

A slow reader must never block the engine, so the engine's events are always taken at once
and parked here, bounded by the one policy of ``backlog.py`` (stale partials are replaced,
finals, errors and `done` never dropped; past `limit` messages the outbox reports overflow
and the server ends that session).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

from kettle.streaming.core.backlog import Backlog
from kettle.streaming.protocols.base import OutMessage

__all__ = ["Outbox"]


def _classify(message: OutMessage) -> tuple[str, int]:
    return message.kind, message.utterance


class Outbox:
    def __init__(self, limit: int = 1000) -> None:
        if limit < 1:
            raise ValueError("outbox limit must be at least 1")
        self._backlog: Backlog[OutMessage] = Backlog(limit, _classify)
        self._ready = asyncio.Event()

    @property
    def limit(self) -> int:
        return self._backlog.limit

    @property
    def dropped_partials(self) -> int:
        return self._backlog.dropped_partials

    @property
    def overflowed(self) -> bool:
        return self._backlog.overflowed

    def __len__(self) -> int:
        return len(self._backlog)

    def __iter__(self) -> Iterator[OutMessage]:
        return iter(self._backlog)

    def put(self, message: OutMessage) -> bool:
        """Queue a message, dropping what it makes stale; False once the reader is hopeless."""
        ok = self._backlog.put(message)
        self._ready.set()
        return ok

    def get_nowait(self) -> OutMessage | None:
        message = self._backlog.popleft()
        if message is None:
            self._ready.clear()
        return message

    async def get(self) -> OutMessage:
        while True:
            message = self.get_nowait()
            if message is not None:
                return message
            await self._ready.wait()
