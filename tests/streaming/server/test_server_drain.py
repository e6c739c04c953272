"""A drain and a shutdown with uploads in flight, on a real server over a fake model that
holds each decode until the test lets it go: an upload running when the drain begins is
answered with its transcript, one that starts during the drain gets 503 + Retry-After, one
still running at the drain's end (or at a shutdown) gets 503 + Retry-After, in the error shape
of its API (OpenAI's JSON error, Deepgram's error JSON). No wall-clock asserts: each step
waits for the server's own state."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from kettle.streaming.server.server import KettleServer
from kettle.transcribe.model.fake import FakeDecoder
from kettle.transcribe.types import DecodeRequest

from tests.streaming.conftest import MakeServer
from tests.streaming.server.upload_apis import KEY, RETRY_AFTER, Api

GUARD = 60  # seconds: a deadlock guard only


class Gate:
    """A fake model whose decodes wait until the gate opens; ``decoding`` once one has begun."""

    def __init__(self) -> None:
        self.decoding, self.open = threading.Event(), threading.Event()
        self.decoder = FakeDecoder(text_for=self._text)

    def _text(self, request: DecodeRequest) -> str:
        self.decoding.set()
        self.open.wait(GUARD)
        return "held"

    async def until_decoding(self) -> None:
        assert await asyncio.to_thread(self.decoding.wait, GUARD)


APIS = [Api("openai", "/v1/audio/transcriptions"), Api("deepgram", "/v1/listen")]


@pytest.fixture
def server_settings() -> dict[str, Any]:
    return {"api_keys": (KEY,), "retry_after_s": RETRY_AFTER}


@pytest.fixture
def make_server(make_server: MakeServer) -> Callable[..., Awaitable[KettleServer]]:
    """The shared factory, over a gate's decoder."""

    def start(gate: Gate, **overrides: Any) -> Awaitable[KettleServer]:
        return make_server(gate.decoder, **overrides)

    return start


async def post(api: Api, server: KettleServer) -> httpx.Response:
    async with httpx.AsyncClient(timeout=GUARD) as client:
        return await client.send(api.request(server.url))


async def drain_begun(server: KettleServer, timeout: float) -> asyncio.Task[None]:
    drain = asyncio.create_task(server.drain(timeout))
    await asyncio.sleep(0)  # the drain's first step: out of the rotation, synchronously
    assert server.draining and not server.ready
    return drain


@pytest.mark.parametrize("api", APIS, ids=lambda a: a.name)
async def test_an_upload_in_flight_when_the_drain_begins_is_answered(
    make_server: Callable[..., Awaitable[KettleServer]], api: Api
) -> None:
    gate = Gate()
    server = await make_server(gate)
    running = asyncio.create_task(post(api, server))
    await gate.until_decoding()
    drain = await drain_begun(server, GUARD)
    for late in APIS:  # a new upload, of either API, is turned away meanwhile
        late.assert_unavailable(await post(late, server))
    assert not drain.done()  # the drain waits for the upload in flight
    gate.open.set()
    answer = await running
    assert answer.status_code == 200, answer.text
    assert set(api.transcript(answer).split()) == {"held"}
    await asyncio.wait_for(drain, GUARD)  # then ends well before its timeout


@pytest.mark.parametrize("api", APIS, ids=lambda a: a.name)
async def test_an_upload_that_outlives_the_drain_gets_503(
    make_server: Callable[..., Awaitable[KettleServer]], api: Api
) -> None:
    gate = Gate()
    server = await make_server(gate)
    running = asyncio.create_task(post(api, server))
    await gate.until_decoding()
    try:
        drain = asyncio.create_task(server.drain(0.05))  # runs out: the model holds on
        api.assert_unavailable(await running)
        assert server.uploads.active == 0
    finally:
        gate.open.set()  # the engine's close waits for the decode the model holds
    await asyncio.wait_for(drain, GUARD)


async def test_a_shutdown_answers_uploads_in_flight_503_at_once(
    make_server: Callable[..., Awaitable[KettleServer]],
) -> None:
    gate = Gate()
    server = await make_server(gate, max_uploads=2)
    running = [asyncio.create_task(post(api, server)) for api in APIS]
    await gate.until_decoding()
    try:
        async with asyncio.timeout(GUARD):
            while server.uploads.active < len(APIS):  # both hold their slot
                await asyncio.sleep(0.01)
        shutdown = asyncio.create_task(server.shutdown(timeout=GUARD))  # as on SIGINT
        for api, task in zip(APIS, running, strict=True):
            api.assert_unavailable(await task)
    finally:
        gate.open.set()  # the engine's close waits for the decode the model holds
    await asyncio.wait_for(shutdown, GUARD)
