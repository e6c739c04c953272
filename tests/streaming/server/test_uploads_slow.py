"""Slow and short upload bodies on a real server over the fake model, beside honest uploads:
a body being read holds no upload slot, so four clients dribbling bytes lock nobody out; a
body too slow or past its deadline gets 408 in its API's error shape, then the connection
closes, and the cut is counted; a body that ends (half-close) before its Content-Length is
answered 400. Slow clients are raw sockets; honest ones httpx. No wall-clock asserts: the
pace is configured small and each step waits for an answer or the server's own state."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from kettle.streaming.server.server import KettleServer
from kettle.transcribe.model.fake import FakeDecoder
from kettle.transcribe.types import DecodeRequest

from tests.streaming.server import upload_apis

KEY = upload_apis.KEY  # the key Api.request sends
GUARD = 60  # seconds: a deadlock guard only
DRIBBLE = 32  # bytes a slow client sends at a time


def said(request: DecodeRequest) -> str:
    return "Hello, world."


@dataclass(frozen=True)
class Api(upload_apis.Api):
    """The drain tests' upload of each API, also as the raw bytes a socket client sends."""

    def raw(self, url: str) -> tuple[bytes, bytes]:
        """The request's head and body as a raw client sends them."""
        request = self.request(url)
        body = request.read()
        lines = [f"POST {request.url.raw_path.decode()} HTTP/1.1"]
        lines += [f"{k}: {v}" for k, v in request.headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode(), body

    def assert_error(self, answer: Answer, status: int, code: str, match: str) -> None:
        """``status`` in the API's own error shape."""
        assert answer.status == status, answer
        body = answer.json()
        if self.name == "openai":
            assert set(body) == {"error"}
            error = body["error"]
            assert set(error) == {"message", "type", "param", "code"}
            assert error["type"] == "invalid_request_error" and error["code"] == code
            assert match in error["message"]
        else:
            assert set(body) == {"err_code", "err_msg", "request_id"}
            assert body["err_code"] == code and match in body["err_msg"]
            assert body["request_id"]


OPENAI = Api("openai", "/v1/audio/transcriptions")
DEEPGRAM = Api("deepgram", "/v1/listen")
APIS = [OPENAI, DEEPGRAM]
TIMEOUT_CODE = {"openai": "request_timeout", "deepgram": "REQUEST_TIMEOUT"}
ENDED_CODE = {"openai": "incomplete_body", "deepgram": "Bad Request"}


@dataclass
class Answer:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    def json(self) -> Any:
        return json.loads(self.body)


def parse(raw: bytes) -> Answer:
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines)
    return Answer(int(status_line.split()[1]), {k.lower(): v for k, v in headers.items()}, body)


async def dribble(api: Api, server: KettleServer, started: asyncio.Event | None = None) -> Answer:
    """A slow client: the head, then ``DRIBBLE`` bytes of the body every 0.1 s until the
    server answers; the answer, read to the server's close."""
    url = httpx.URL(server.url)
    head, body = api.raw(server.url)
    reader, writer = await asyncio.open_connection(url.host, url.port)
    writer.write(head)
    await writer.drain()
    if started is not None:
        started.set()

    async def send() -> None:
        for at in range(0, len(body), DRIBBLE):
            writer.write(body[at : at + DRIBBLE])
            await writer.drain()
            await asyncio.sleep(0.1)

    sending = asyncio.create_task(send())
    try:
        async with asyncio.timeout(GUARD):
            raw = await reader.read()  # the answer, to the server's close
    finally:
        sending.cancel()
        await asyncio.gather(sending, return_exceptions=True)  # (a write may meet the close)
        writer.close()
    return parse(raw)


async def honest(api: Api, server: KettleServer) -> httpx.Response:
    async with httpx.AsyncClient(timeout=GUARD) as client:
        return await client.send(api.request(server.url))


@pytest.fixture
def server_settings() -> dict[str, Any]:
    return {"api_keys": (KEY,)}


@pytest.fixture
def load_model() -> Callable[[], FakeDecoder]:
    return lambda: FakeDecoder(text_for=said)


async def test_bodies_still_coming_hold_no_slot(
    make_server: Callable[..., Awaitable[KettleServer]],
) -> None:
    # A pace no slow client here breaks: they read on as long as the test lasts.
    server = await make_server(max_uploads=4, upload_body_grace_s=GUARD)
    slow = [asyncio.create_task(dribble(api, server)) for api in APIS * 2]
    async with asyncio.timeout(GUARD):
        while server.uploads.reading < len(slow):  # all four are reading their bodies
            await asyncio.sleep(0.01)
    assert server.uploads.active == 0  # and hold none of the four slots
    answers = await asyncio.gather(*(honest(api, server) for api in APIS * 2))
    assert [a.status_code for a in answers] == [200] * 4, [a.text for a in answers]
    assert server.uploads.reading == len(slow)  # the slow ones were there all along
    for task in slow:
        task.cancel()
    await asyncio.gather(*slow, return_exceptions=True)
    async with asyncio.timeout(GUARD):
        await server.uploads.wait_idle()  # the slow ones' going frees what they held


async def test_slow_bodies_get_408_in_their_apis_shape_and_are_counted(
    make_server: Callable[..., Awaitable[KettleServer]],
) -> None:
    server = await make_server(max_uploads=4, upload_body_grace_s=1.0, upload_min_bytes_per_s=1024)
    slow = [asyncio.create_task(dribble(api, server)) for api in APIS * 2]
    answers = await asyncio.gather(*(honest(api, server) for api in APIS * 2))
    assert [a.status_code for a in answers] == [200] * 4, [a.text for a in answers]
    for api, task in zip(APIS * 2, slow, strict=True):
        cut = await task  # read to the close: the server closed after its answer
        api.assert_error(cut, 408, TIMEOUT_CODE[api.name], "too slowly")
        assert cut.headers["connection"] == "close"
    assert server.metrics.value("kettle_uploads_cut_total", {"reason": "slow"}) == 4
    assert server.metrics.value("kettle_uploads_cut_total", {"reason": "deadline"}) == 0
    async with httpx.AsyncClient(timeout=GUARD) as client:
        metrics = await client.get(f"{server.url}/metrics")
    assert 'kettle_uploads_cut_total{reason="slow"} 4.0' in metrics.text
    after = await asyncio.gather(*(honest(api, server) for api in APIS))
    assert [a.status_code for a in after] == [200, 200]


async def test_a_body_past_its_deadline_gets_408(
    make_server: Callable[..., Awaitable[KettleServer]],
) -> None:
    # Any rate is fast enough: only the deadline cuts.
    server = await make_server(upload_body_timeout_s=1.0, upload_min_bytes_per_s=0)
    cuts = await asyncio.gather(*(dribble(api, server) for api in APIS))
    for api, cut in zip(APIS, cuts, strict=True):
        api.assert_error(cut, 408, TIMEOUT_CODE[api.name], "within 1 s")
    assert server.metrics.value("kettle_uploads_cut_total", {"reason": "deadline"}) == 2
    assert server.metrics.value("kettle_uploads_cut_total", {"reason": "slow"}) == 0


@pytest.mark.parametrize("api", APIS, ids=lambda a: a.name)
async def test_a_half_close_before_the_content_length_is_answered_400(
    make_server: Callable[..., Awaitable[KettleServer]], api: Api
) -> None:
    server = await make_server()
    url = httpx.URL(server.url)
    head, body = api.raw(server.url)
    reader, writer = await asyncio.open_connection(url.host, url.port)
    writer.write(head + body[: len(body) // 2])
    await writer.drain()
    writer.write_eof()  # done sending, short of the Content-Length; waiting for the answer
    async with asyncio.timeout(GUARD):
        answer = parse(await reader.read())
    writer.close()
    api.assert_error(answer, 400, ENDED_CODE[api.name], f"of the {len(body)} bytes")
    assert answer.headers["connection"] == "close"
    async with asyncio.timeout(GUARD):
        await server.uploads.wait_idle()
    assert server.uploads.budget.held == 0 and server.uploads.active == 0
