"""Fixtures and helpers shared by the server tests.

- ``fake`` and ``serve_in_thread``: one module's fake model, and servers in threads of their
  own for blocking clients (the OpenAI SDK's sync client);
- a raw kettle v1 WebSocket client (``open_ws``, ``send_chunks``, ``read_all``) and what it
  checks (``kinds``, ``check_finals``) over ``THREE_UTTERANCES``;
- ``Script``: a scripted peer for a ConnectionRunner, no sockets.

``make_server`` and ``server`` (in-process servers on loopback) are in tests/streaming/conftest.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kettle.streaming.server.runner import PeerGone
from kettle.streaming.server.server import KettleServer, ServerConfig
from kettle.transcribe.model.fake import FakeDecoder, scripted_audio
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from tests.streaming.server.server_thread import ServerThread

READ_GUARD_S = 30  # a deadlock guard on reading a session to its close, not a speed requirement

# Three utterances of voice-like audio, with silences long enough to end each one.
THREE_UTTERANCES = scripted_audio(
    [("silence", 0.3), ("voice", 1.5), ("silence", 1.0), ("voice", 2.0), ("silence", 1.0),
     ("voice", 1.0), ("silence", 0.8)]
)  # fmt: skip


# -- servers in threads ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def fake() -> FakeDecoder:
    """The fake model a module's threaded server loads (a module may override it)."""
    return FakeDecoder()


@pytest.fixture(scope="module")
def serve_in_thread() -> Iterator[Callable[..., ServerThread]]:
    """``serve_in_thread(decoder=None, *, speakers=None, **settings)``: a ServerThread on port
    0 over ``decoder`` (else a fresh fake), closed at the module's end."""
    started: list[ServerThread] = []

    def start(decoder: Any = None, *, speakers: Any = None, **settings: Any) -> ServerThread:
        load = FakeDecoder if decoder is None else lambda: decoder
        running = ServerThread(ServerConfig(port=0, **settings), load, speakers=speakers)
        started.append(running)
        return running

    yield start
    for running in started:
        running.close()


# -- a raw kettle v1 client ----------------------------------------------------------------


async def open_ws(server: KettleServer, query: str = "", **kwargs: Any) -> ClientConnection:
    url = server.ws_url + (f"?{query}" if query else "")
    return await connect(url, max_size=None, **kwargs)


async def read_all(ws: ClientConnection) -> tuple[list[dict[str, Any]], int | None]:
    """Every server message until the server closes, and the close code."""
    messages: list[dict[str, Any]] = []

    async def reader() -> None:
        try:
            async for raw in ws:
                assert isinstance(raw, str), "the server sends text only"
                messages.append(json.loads(raw))
        except ConnectionClosed:
            pass

    await asyncio.wait_for(reader(), READ_GUARD_S)
    return messages, ws.close_code


async def send_chunks(ws: ClientConnection, data: bytes, size: int = 3200) -> None:
    for i in range(0, len(data), size):
        await ws.send(data[i : i + size])


def kinds(messages: list[dict[str, Any]]) -> list[str]:
    return [m["type"] for m in messages]


def check_finals(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Finals numbered 0..n-1 in order, done last with their count; returns the finals."""
    finals = [m for m in messages if m["type"] == "final"]
    assert [f["utterance"] for f in finals] == list(range(len(finals)))
    assert messages[-1]["type"] == "done"
    assert messages[-1]["utterances"] == len(finals)
    for f in finals:
        assert 0 <= f["start"] < f["end"]
    return finals


# -- a scripted peer -------------------------------------------------------------------------


class Script:
    """A peer that sends `incoming`, then waits (or leaves, with `leave`)."""

    def __init__(self, incoming: list[str | bytes], leave: bool = False, reads: bool = True):
        self.incoming = list(incoming)
        self.leave = leave
        self.reads = reads
        self.sent: list[dict[str, Any]] = []
        self.closed_with: tuple[int, str] | None = None

    async def receive(self) -> str | bytes | None:
        if self.incoming:
            return self.incoming.pop(0)
        if self.leave:
            return None
        await asyncio.Event().wait()
        return None

    async def send(self, text: str) -> None:
        if self.closed_with is not None:
            raise PeerGone("closed")
        if not self.reads:
            await asyncio.Event().wait()
        self.sent.append(json.loads(text))

    async def close(self, code: int, reason: str = "") -> None:
        self.closed_with = (code, reason)
