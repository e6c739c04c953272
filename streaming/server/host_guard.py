"""The ASGI middleware that refuses requests for hosts this server does not serve (hosts.py).

It runs before every route, HTTP and WebSocket alike, so a DNS-rebinding page can neither
open a session nor read `/v1/info` or `/metrics`. A refused request gets 400 with a message
that names the option to change; a refused WebSocket handshake gets the same answer as an
HTTP response (no WebSocket is opened). Starlette's TrustedHostMiddleware does the same for
fixed patterns, but it cannot allow every IP address, and it refuses requests that carry no
`Host` (HAProxy's HTTP/1.0 health checks).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kettle.streaming.server.hosts import HostPolicy

logger = logging.getLogger(__name__)

Scope = dict[str, Any]
Receive = Callable[[], Any]
Send = Callable[[dict[str, Any]], Any]

_LOGGED_HOSTS_MAX = 64  # refused hosts logged once each; bounded, so a scanner cannot grow it


class HostGuard:
    """Wraps an ASGI app; `on_refused(kind)` counts each refusal ("http" or "websocket")."""

    def __init__(
        self,
        app: Callable[[Scope, Receive, Send], Any],
        policy: HostPolicy,
        on_refused: Callable[[str], None] = lambda kind: None,
    ) -> None:
        self.app = app
        self.policy = policy
        self.on_refused = on_refused
        self._logged: set[str] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        host = _header(scope, b"host")
        if self.policy.allows(host):
            await self.app(scope, receive, send)
            return
        self.on_refused(kind)
        self._log_once(host or "")
        body = (
            f"kettle does not serve the host {host!r}: start it with --allowed-hosts naming "
            "it (or * behind a proxy that checks Host)\n"
        ).encode()
        prefix = "websocket.http." if kind == "websocket" else "http."
        if kind == "websocket":
            await receive()  # websocket.connect, before any answer
        await send(
            {
                "type": prefix + "response.start",
                "status": 400,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()),
                    (b"cache-control", b"no-cache"),
                ],
            }
        )
        await send({"type": prefix + "response.body", "body": body})

    def _log_once(self, host: str) -> None:
        if host in self._logged or len(self._logged) >= _LOGGED_HOSTS_MAX:
            return
        self._logged.add(host)
        logger.warning(
            "refused a request for host %r (a DNS-rebinding page, or a name kettle was not "
            "told about: --allowed-hosts)",
            host,
        )


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None
