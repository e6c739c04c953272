"""http_protocol.py under uvicorn, with a small ASGI app and raw sockets: a half-close short
of the Content-Length ends the body and is answered; a half-close after the whole body is
still the client leaving; a Connection: close answer while the body is still coming goes
out, then the FIN, while the server still reads what the client sends."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn
from kettle.streaming.server import http_protocol
from kettle.streaming.server.http_protocol import KettleHttpProtocol

GUARD = 60  # seconds: a deadlock guard only


class App:
    """``/read``: reads the body, then answers what it got, or waits for the disconnect
    (``?wait``); ``/refuse``: reads one chunk, then answers 408 with Connection: close."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.gone = asyncio.Event()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        if scope["path"] == "/refuse":
            self.messages.append(await receive())
            await self._answer(send, 408, b"too slow", [(b"connection", b"close")])
            return
        size = 0
        while True:
            message = await receive()
            self.messages.append(message)
            if message["type"] == "http.disconnect":
                self.gone.set()
                return
            size += len(message.get("body", b""))
            if not message.get("more_body", False):
                break
        if scope["query_string"] == b"wait":
            self.messages.append(await receive())
            self.gone.set()
            return
        await self._answer(send, 200, b"got %d" % size, [])

    @staticmethod
    async def _answer(send: Any, status: int, body: bytes, headers: list[Any]) -> None:
        length = [(b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers + length})
        await send({"type": "http.response.body", "body": body})


@pytest.fixture
async def served() -> AsyncIterator[tuple[App, int]]:
    app = App()
    config = uvicorn.Config(
        app, http=KettleHttpProtocol, lifespan="off", log_config=None, access_log=False
    )
    server = uvicorn.Server(config)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    running = asyncio.create_task(server.serve(sockets=[sock]))
    async with asyncio.timeout(GUARD):
        while not server.started:
            await asyncio.sleep(0.01)
    yield app, sock.getsockname()[1]
    server.should_exit = True
    await asyncio.wait_for(running, GUARD)


def head(path: str, length: int) -> bytes:
    return f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n".encode()


async def test_a_half_close_short_of_the_length_ends_the_body_and_is_answered(
    served: tuple[App, int],
) -> None:
    app, port = served
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(head("/read", 1000) + b"a" * 10)
    await writer.drain()
    writer.write_eof()  # the client is done sending, and waits for the answer
    async with asyncio.timeout(GUARD):
        answer = await reader.read()  # to the server's close
    writer.close()
    assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"got 10")
    assert b"connection: close" in answer.lower()
    assert app.messages[-1]["type"] == "http.request"
    assert app.messages[-1]["more_body"] is False  # the body ended, not the client


async def test_a_half_close_after_the_whole_body_is_the_client_leaving(
    served: tuple[App, int],
) -> None:
    app, port = served
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(head("/read?wait", 10) + b"a" * 10)
    await writer.drain()
    writer.write_eof()
    async with asyncio.timeout(GUARD):
        await app.gone.wait()
        assert await reader.read() == b""  # closed, unanswered: as uvicorn does
    writer.close()
    assert app.messages[-1] == {"type": "http.disconnect"}


async def test_a_close_while_the_body_comes_lingers_after_the_answer(
    served: tuple[App, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http_protocol, "LINGER_S", GUARD)  # no close by the clock here
    _, port = served
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(head("/refuse", 1 << 20) + b"a" * 100)
    async with asyncio.timeout(GUARD):
        answer = await reader.read()  # the answer, then the server's FIN
        assert answer.startswith(b"HTTP/1.1 408 ") and answer.endswith(b"too slow")
        for _ in range(20):  # the client still sends: read and dropped, never reset
            writer.write(b"b" * 65536)
            await writer.drain()
        writer.write_eof()  # the client is done too: the server closes
        await asyncio.sleep(0)
    writer.close()
    await writer.wait_closed()
