"""The listening sockets (bounded buffers, dead-peer detection) and the stopping signals."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from collections.abc import Iterator
from typing import Any

import uvicorn

# The kernel's receive buffer per connection (Linux doubles it for bookkeeping): ~4 s of
# 16 kHz 16-bit audio, far more than any link needs for audio.
RECEIVE_BUFFER_BYTES = 128 * 1024


class Uvicorn(uvicorn.Server):
    """uvicorn's server without its signal handling: kettle's entry point owns signals."""

    @contextlib.contextmanager
    def capture_signals(self) -> Any:
        yield


def _dead_peer_detection(sock: socket.socket) -> None:
    """TCP keepalive probes after 30 s of silence, and a 60 s limit on unacknowledged data:
    a peer that vanished is dropped within about a minute, however much of its audio is
    still queued (the kernel answers probes, whatever the application has read). Accepted
    connections inherit these; where the platform lacks an option it is left out."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (
        ("TCP_KEEPIDLE", 30),
        ("TCP_KEEPINTVL", 10),
        ("TCP_KEEPCNT", 3),
        ("TCP_USER_TIMEOUT", 60_000),
    ):
        option = getattr(socket, name, None)
        if option is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, option, value)


def bind(host: str, port: int) -> list[socket.socket]:
    """Sockets on every address `host` resolves to (localhost: IPv4 and IPv6), one port.

    With port 0 the first socket picks a free port and the others take the same one.
    """
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    seen: set[tuple[int, object]] = set()
    try:
        for family, kind, proto, _, address in infos:
            if (int(family), address[0]) in seen:
                continue
            seen.add((int(family), address[0]))
            if sockets:
                address = (address[0], sockets[0].getsockname()[1], *address[2:])
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            # Accepted connections inherit a bounded receive buffer. Autotuning would let the
            # kernel hold megabytes per connection for a client that sends faster than it is
            # read (audio admission pauses reads); bounded, TCP pushes back after a few
            # seconds of audio, and the client's pong to a keepalive ping is never queued
            # behind more.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER_BYTES)
            _dead_peer_detection(sock)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.setblocking(False)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


@contextlib.contextmanager
def caught_signals() -> Iterator[asyncio.Queue[signal.Signals]]:
    """SIGTERM and SIGINT put on a queue (not the default handlers) while the block runs."""
    loop = asyncio.get_running_loop()
    signals: asyncio.Queue[signal.Signals] = asyncio.Queue()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, signals.put_nowait, sig)
    try:
        yield signals
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError):
                loop.remove_signal_handler(sig)
