"""The Wyoming listener (``kettle serve --wyoming tcp://HOST:PORT``): Home Assistant's
speech-to-text link, on the same engine, session slots and metrics as the HTTP port.

The ``wyoming`` library serves (its `AsyncTcpServer`, one `AsyncEventHandler` per
connection) and writes (its `async_write_event`), but its reader cannot refuse anything: a
malformed header reads as the end of the stream, and it reads whatever lengths a header
declares. So the handler's `run()` is kettle's own: each connection takes a session slot from
the gate (refused: an ``error`` event and the close), then is run like any WebSocket by a
connection runner with the Wyoming codec, over `WyomingTransport`, which reads one event at
a time within `frames`' bounds. Its idle timeout is the stall timeout: a client that sends
nothing, or stops inside an event, for ``idle_timeout_s`` gets a ``timeout`` error and the
close, while every other connection goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

from kettle.streaming.protocols.handshake import HandshakeRequest
from kettle.streaming.protocols.wyoming import frames
from kettle.streaming.protocols.wyoming.address import parse_uri
from kettle.streaming.protocols.wyoming.route import ROUTE
from kettle.streaming.server.connections import Connections
from kettle.streaming.server.gate import ConnectionGate
from kettle.streaming.server.transport import PeerGone
from wyoming.error import Error as WyomingError
from wyoming.event import Event, async_write_event
from wyoming.server import AsyncEventHandler, AsyncTcpServer

logger = logging.getLogger(__name__)


class WyomingTransport:
    """One TCP connection as the runner's `Transport`: `receive()` gives one event's bytes
    (header line, data, payload), read within the bounds `frames` sets; what breaks them is
    handed over as far as it was read, for the codec to refuse. Cancel-safe: a read cut
    short by a deadline goes on, and the next `receive()` gets its event."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, max_payload: int
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._max_payload = max_payload
        self._next: asyncio.Future[bytes | None] | None = None
        self._gone = False

    async def receive(self) -> bytes | None:
        if self._gone:
            return None
        if self._next is None:
            self._next = asyncio.ensure_future(self._read_event())
        raw = await asyncio.shield(self._next)
        self._next = None
        self._gone = raw is None
        return raw

    async def _read_event(self) -> bytes | None:
        reader = self._reader
        try:
            try:
                line = await reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                return exc.partial or None  # a header cut short, or a clean end
            except asyncio.LimitOverrunError:
                return await reader.readexactly(frames.MAX_HEADER_BYTES)  # no newline: too long
            try:
                header = frames.parse_header(line, self._max_payload)
            except frames.FrameError:
                return line  # the codec refuses it (nothing after it is read)
            rest = header.data_length + header.payload_length
            if not rest:
                return line
            try:
                return line + await reader.readexactly(rest)
            except asyncio.IncompleteReadError as exc:
                return line + exc.partial  # the lengths lied: refused as truncated
        except (ConnectionError, OSError):
            return None

    async def send(self, text: str) -> None:
        event = Event.from_dict(json.loads(text))
        try:
            await async_write_event(event, self._writer)
        except (ConnectionError, OSError, RuntimeError) as exc:
            self._gone = True
            raise PeerGone(str(exc)) from None

    async def close(self, code: int, reason: str = "") -> None:
        """TCP has no close code: the socket closes (what was written is flushed first)."""
        self._gone = True
        if self._next is not None:
            self._next.cancel()
        with contextlib.suppress(ConnectionError, OSError, RuntimeError):
            if self._writer.can_write_eof():
                self._writer.write_eof()
        self._writer.close()
        with contextlib.suppress(ConnectionError, OSError, RuntimeError):
            await self._writer.wait_closed()


class WyomingHandler(AsyncEventHandler):
    """One Wyoming connection: a session slot, then the connection runner until it closes."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        gate: ConnectionGate,
        connections: Connections,
    ) -> None:
        super().__init__(reader, writer)
        self.gate = gate
        self.connections = connections

    async def handle_event(self, event: Event) -> bool:  # pragma: no cover - run() reads
        return False

    async def run(self) -> None:
        """Not the library's loop: the runner reads, through the bounded transport."""
        limits = self.connections.limits
        transport = WyomingTransport(self.reader, self.writer, limits.max_frame_bytes)
        refusal = self.gate.reserve(1)
        if refusal is not None:
            with contextlib.suppress(PeerGone):
                await transport.send(_error_text(refusal.message, refusal.reason))
            await transport.close(0)
            return
        try:
            await self.connections.run(transport, ROUTE.prepare(_NO_REQUEST, None), ROUTE)
        finally:
            self.gate.release_slot(1)
            await transport.close(0)


def _error_text(text: str, code: str) -> str:
    return json.dumps(WyomingError(text, code).event().to_dict())


class _Listener(AsyncTcpServer):
    """The library's TCP server, with its listening socket in view (port 0 in tests)."""

    @property
    def socket_server(self) -> asyncio.Server | None:
        server = self._server
        return server if isinstance(server, asyncio.Server) else None


class WyomingListener:
    """``--wyoming tcp://HOST:PORT``: listens beside the HTTP port until `close()`."""

    def __init__(self, uri: str, gate: ConnectionGate, connections: Connections) -> None:
        host, port = parse_uri(uri)
        self._server = _Listener(host, port)
        self._gate = gate
        self._connections = connections

    async def start(self) -> None:
        await self._server.start(self._handler)
        logger.info("Wyoming speech-to-text on tcp://%s:%d", self._server.host, self.port)

    def _handler(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> Any:
        return WyomingHandler(reader, writer, gate=self._gate, connections=self._connections)

    @property
    def port(self) -> int:
        """The port listened on (the real one when port 0 was asked)."""
        listening = self._server.socket_server
        if listening is None or not listening.sockets:
            raise RuntimeError("the Wyoming listener is not listening")
        return int(listening.sockets[0].getsockname()[1])

    def close(self) -> None:
        """Stop taking connections; open ones finish with the server's other sessions."""
        listening = self._server.socket_server
        if listening is not None:
            listening.close()


_NO_REQUEST = HandshakeRequest(path=ROUTE.path)  # Wyoming has no handshake to look at

__all__ = ["WyomingHandler", "WyomingListener", "WyomingTransport"]
