"""uvicorn's HTTP/1.1 protocol (httptools) with two changes for request bodies that do not
arrive whole, so that such a client always gets its answer:

- **A half-close before the Content-Length.** uvicorn takes the end of the client's stream
  (a FIN) for a disconnect: the app's next message is ``http.disconnect`` and the socket is
  closed, so nothing can answer. Here, while a body with a Content-Length is still coming,
  the FIN ends the body instead (``more_body`` false, short of its length, which the app
  checks: uploads answer 400) and the socket stays open for the answer, then closes. After
  a whole body a FIN still means the client left (the upload's work is cancelled), as with
  uvicorn and nginx: a half-close cannot be told from a close. Chunked bodies, and TLS,
  where the client's close_notify ends the session, keep uvicorn's disconnect.
- **A lingering close.** A response that asks to close the connection (``Connection:
  close``: a 408 for a body too slow) while its request's body is still coming is not
  followed by a plain close: the client's unread bytes would make the kernel send a reset,
  which can destroy the response before the client has read it. The server sends the
  response and its FIN, reads and discards what the client still sends for up to
  `LINGER_S`, then closes (Apache and nginx do the same).
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

# How long a connection closed with its request's body still coming reads and discards
# what the client sends before closing: time for its answer to reach the client first.
LINGER_S = 5.0


class KettleHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, answering bodies cut short (see the module)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lingering = False
        self._linger_timer: asyncio.TimerHandle | None = None

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not None and cycle.scope is self.scope:  # a request, not an upgrade
            cycle.transport = _CycleTransport(self, cycle)

    # asyncio.Protocol's signature: True keeps the socket open (uvicorn's says None).
    def eof_received(self) -> bool | None:  # type: ignore[override]
        cycle = self.cycle
        lingering, tls = self._lingering, self.scheme == "https"
        if lingering or tls or cycle is None or not _sized_body_coming(cycle):
            return None  # uvicorn's: the transport closes, the app sees a disconnect
        cycle.more_body = False  # the body ends here, short of its Content-Length
        cycle.keep_alive = False  # and the connection with the answer
        cycle.message_event.set()
        return True  # the socket stays open for the answer

    def data_received(self, data: bytes) -> None:
        if self._lingering:
            return  # the rest of a body nobody reads
        super().data_received(data)

    def on_response_complete(self) -> None:
        if self._lingering:
            self.server_state.total_requests += 1
            return  # no keep-alive: the connection is closing
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._linger_timer is not None:
            self._linger_timer.cancel()
        super().connection_lost(exc)

    def close_after(self, cycle: RequestResponseCycle) -> None:
        """Close the connection for ``cycle``: lingering while its body is still coming."""
        transport = self.transport
        if self._lingering or transport.is_closing() or not cycle.more_body:
            transport.close()
            return
        self._lingering = True
        if transport.can_write_eof():
            transport.write_eof()  # the FIN goes after the response
        self.flow.resume_reading()
        self._linger_timer = self.loop.call_later(LINGER_S, transport.close)


def _sized_body_coming(cycle: RequestResponseCycle) -> bool:
    """Whether ``cycle``'s request, not yet answered, has a Content-Length body still
    coming."""
    if cycle.response_complete or not cycle.more_body:
        return False
    return any(name == b"content-length" for name, _ in cycle.scope["headers"])


class _CycleTransport(asyncio.Transport):
    """The transport as one request's cycle sees it: its close is the protocol's
    `close_after`; all else is the connection's own."""

    def __init__(self, protocol: KettleHttpProtocol, cycle: RequestResponseCycle) -> None:
        super().__init__()
        self._protocol, self._cycle = protocol, cycle
        self._transport = protocol.transport

    def close(self) -> None:
        self._protocol.close_after(self._cycle)

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._transport.write(data)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)


__all__ = ["LINGER_S", "KettleHttpProtocol"]
