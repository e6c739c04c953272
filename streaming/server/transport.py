"""One accepted WebSocket as the connection runner sees it, whatever serves it (ASGI, a test's
scripted peer)."""

from __future__ import annotations

from typing import Protocol


class PeerGone(Exception):
    """The peer closed the connection or it was lost."""


class Transport(Protocol):
    """One accepted WebSocket, as the runner sees it."""

    async def receive(self) -> str | bytes | None:
        """The next message, or None once the peer is gone. Cancel-safe."""
        ...

    async def send(self, text: str) -> None:
        """Send a text message; raises PeerGone when the peer is gone."""
        ...

    async def close(self, code: int, reason: str = "") -> None: ...
