"""The ASGI side of a WebSocket protocol route: handshake decision, accept, run, release.

One `WebSocketEndpoint` per `ProtocolRoute`. It asks the gate to admit the handshake (key,
parameters, capacity, in that order); a refusal is an HTTP response through the ASGI
"websocket.http.response" extension (so a client sees 401/400/503, not a WebSocket close).
An admitted connection is accepted with the route's subprotocol echoed, run by a
connection runner (connections.py), and its session slots (one per engine stream) are
released when the connection has closed.
"""

from __future__ import annotations

import contextlib
from collections.abc import MutableMapping
from typing import Any

from kettle.streaming.protocols.handshake import HandshakeRequest, ProtocolRoute, plain_refusal
from kettle.streaming.server.connections import Connections
from kettle.streaming.server.gate import ConnectionGate, Refusal
from kettle.streaming.server.transport import PeerGone

Scope = MutableMapping[str, Any]  # an ASGI scope, as starlette types it
Message = dict[str, Any]


def handshake_request(scope: Scope, upgrade: bool) -> HandshakeRequest:
    """The parts of an ASGI scope a handshake looks at (header names lowercase)."""
    headers: dict[str, str] = {}
    for raw_name, raw_value in scope.get("headers", ()):
        name = raw_name.decode("latin-1").lower()
        value = raw_value.decode("latin-1")
        # Repeated headers are joined as HTTP allows; Authorization never legitimately repeats.
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return HandshakeRequest(
        path=scope.get("path", ""),
        query=scope.get("query_string", b"").decode("latin-1"),
        headers=headers,
        subprotocols=tuple(scope.get("subprotocols", ())),
        upgrade=upgrade,
    )


def render_refusal(
    route: ProtocolRoute, refusal: Refusal
) -> tuple[int, list[tuple[str, str]], bytes]:
    """Status, headers and body of a refused handshake (or plain GET) on this route."""
    render = route.refusal or plain_refusal
    body, content_type = render(refusal.status, refusal.message)
    headers = [("content-type", content_type), ("cache-control", "no-cache")]
    headers += [(k.lower(), v) for k, v in refusal.headers.items()]
    return refusal.status, headers, body


class AsgiTransport:
    """An accepted ASGI WebSocket as the runner's `Transport`."""

    def __init__(self, receive: Any, send: Any) -> None:
        self._receive = receive
        self._send = send
        self._gone = False

    async def receive(self) -> str | bytes | None:
        if self._gone:
            return None
        message = await self._receive()
        kind = message["type"]
        if kind == "websocket.receive":
            text = message.get("text")
            if text is not None:
                return str(text)
            return bytes(message.get("bytes") or b"")
        self._gone = True  # websocket.disconnect
        return None

    async def send(self, text: str) -> None:
        try:
            await self._send({"type": "websocket.send", "text": text})
        except (OSError, RuntimeError) as exc:  # disconnected, or already closed
            self._gone = True
            raise PeerGone(str(exc)) from None

    async def close(self, code: int, reason: str = "") -> None:
        with contextlib.suppress(OSError, RuntimeError):  # already gone or closed
            await self._send({"type": "websocket.close", "code": code, "reason": reason})
        self._gone = True


class WebSocketEndpoint:
    """The ASGI app of one protocol route (mounted as a Starlette WebSocketRoute)."""

    def __init__(
        self, gate: ConnectionGate, connections: Connections, route: ProtocolRoute
    ) -> None:
        self.gate = gate
        self.connections = connections
        self.route = route

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        request = handshake_request(scope, upgrade=True)
        connect = await receive()
        if connect["type"] != "websocket.connect":  # pragma: no cover - ASGI order
            return
        decision = self.gate.admit(self.route, request)
        if isinstance(decision, Refusal):
            status, headers, body = render_refusal(self.route, decision)
            await send(
                {
                    "type": "websocket.http.response.start",
                    "status": status,
                    "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers],
                }
            )
            await send({"type": "websocket.http.response.body", "body": body})
            return
        try:
            accept: Message = {"type": "websocket.accept"}
            if decision.subprotocol is not None:
                accept["subprotocol"] = decision.subprotocol
            try:
                await send(accept)
            except (OSError, RuntimeError):
                return  # the peer left during the handshake
            await self.connections.run(AsgiTransport(receive, send), decision, self.route)
        finally:
            self.gate.release_slot(decision.slots)
