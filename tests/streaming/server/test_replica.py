"""`kettle serve` as a well-behaved replica: /readyz is 503 while the model is failing, and
SIGTERM drains (out of the rotation at once, live sessions go on until --drain-timeout, then
get their finals and 1012; an upload in flight is answered). Real servers; no wall-clock
asserts."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from kettle.streaming.client.client import ClientOptions, stream_audio
from kettle.streaming.server.server import KettleServer, ServerConfig
from kettle.transcribe.model.fake import FakeDecoder, scripted_audio
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

if TYPE_CHECKING:
    from tests.conftest import Replica

# slow: real replica processes drained by signals, and the engine's real backoff.
pytestmark = pytest.mark.slow

GUARD_S = 60.0
UTTERANCE = [("voice", 1.5), ("silence", 1.0)]
AUDIO = scripted_audio([*UTTERANCE, *UTTERANCE, ("voice", 1.5), ("silence", 0.8)])
FLAC = (Path(__file__).resolve().parents[2] / "data" / "jfk.flac").read_bytes()


def _readyz(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url + "/readyz", timeout=30) as response:
            return response.status, response.read().decode().strip()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode().strip()


async def _until_unready(url: str) -> tuple[int, str]:
    deadline = time.monotonic() + GUARD_S
    while True:
        status, text = await asyncio.to_thread(_readyz, url)
        if status != 200 or time.monotonic() > deadline:
            return status, text
        await asyncio.sleep(0.05)


async def test_a_draining_replica_refuses_new_sessions_and_lets_live_ones_finish(
    serve_replica: Callable[..., Replica],
) -> None:
    replica = serve_replica("--drain-timeout", "600")
    assert _readyz(replica.url) == (200, "ready")
    signalled = asyncio.Event()

    def on_message(message: dict[str, Any], _at: float) -> None:
        if message["type"] == "partial" and not signalled.is_set():
            replica.terminate()
            signalled.set()

    options = ClientOptions(url=replica.ws_url, realtime=True, chunk_ms=100, reconnects=0)
    live = asyncio.create_task(stream_audio(AUDIO, options, on_message))
    await asyncio.wait_for(signalled.wait(), GUARD_S)
    assert await _until_unready(replica.url) == (503, "shutting down")
    with pytest.raises(InvalidStatus) as refused:
        async with connect(replica.ws_url):
            pass
    assert refused.value.response.status_code == 503
    assert int(refused.value.response.headers["Retry-After"]) >= 1
    result = await live  # the live session was not cut: it ends as it would have
    assert result.complete and result.close_code == 1000 and len(result.finals) == 3
    assert replica.proc is not None
    assert await asyncio.to_thread(replica.proc.wait, GUARD_S) == 0  # then the replica exits


async def test_a_drain_that_runs_out_sends_finals_then_1012(
    serve_replica: Callable[..., Replica],
) -> None:
    replica = serve_replica("--drain-timeout", "0.2")
    signalled: list[bool] = []

    def on_message(message: dict[str, Any], _at: float) -> None:
        if message["type"] == "final" and not signalled:
            replica.terminate()
            signalled.append(True)

    # The stream is 7.3 s long in real time and the drain lasts 0.2 s after the first final.
    options = ClientOptions(url=replica.ws_url, realtime=True, chunk_ms=100, reconnects=0)
    result = await stream_audio(AUDIO, options, on_message)
    assert signalled and result.close_code == 1012 and not result.complete
    assert result.done is not None and result.done["reason"] == "shutdown"
    # What the replica held when the drain ran out came back as finals, numbered on.
    assert [f["utterance"] for f in result.finals] == list(range(len(result.finals)))
    assert result.done["utterances"] == len(result.finals) >= 1
    assert replica.proc is not None
    assert await asyncio.to_thread(replica.proc.wait, GUARD_S) == 0


async def test_readiness_is_503_while_the_model_fails_and_200_once_it_works() -> None:
    failing = {"on": True}
    decoder = FakeDecoder(fail=lambda _requests: failing["on"])
    server = KettleServer(ServerConfig(port=0), lambda: decoder)
    await server.start()
    try:
        assert await asyncio.to_thread(_readyz, server.url) == (200, "ready")
        options = ClientOptions(url=server.ws_url, reconnects=0)
        # Failed decodes (partials, finals and their retries) until the engine calls the
        # model failing; the session itself goes on and ends.
        await stream_audio(AUDIO, options)
        assert await _until_unready(server.url) == (503, "model failing")
        failing["on"] = False
        result = await stream_audio(AUDIO, options)  # readiness is advice: a session may come
        assert result.complete and result.finals
        assert await asyncio.to_thread(_readyz, server.url) == (200, "ready")
    finally:
        await server.shutdown(timeout=5)


async def test_sigterm_lets_an_upload_in_flight_finish(
    serve_replica: Callable[..., Replica],
) -> None:
    replica = serve_replica("--drain-timeout", "600")
    reader, writer = await asyncio.open_connection("127.0.0.1", replica.port)
    # With Expect: 100-continue the server says Continue once the route reads the body: the
    # upload holds its slot and its body is half sent when SIGTERM comes.
    head = (
        f"POST /v1/listen HTTP/1.1\r\nHost: 127.0.0.1:{replica.port}\r\n"
        f"Content-Length: {len(FLAC)}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n"
    )
    half = len(FLAC) // 2
    try:
        writer.write(head.encode())
        await writer.drain()
        continued = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), GUARD_S)
        assert continued.startswith(b"HTTP/1.1 100 ")
        writer.write(FLAC[:half])
        await writer.drain()
        replica.terminate()
        assert await _until_unready(replica.url) == (503, "shutting down")
        async with httpx.AsyncClient(timeout=GUARD_S) as client:  # a new upload: elsewhere
            late = await client.post(replica.url + "/v1/listen", content=FLAC)
        assert late.status_code == 503 and int(late.headers["Retry-After"]) >= 1
        assert late.json()["err_code"] == "SERVICE_UNAVAILABLE"
        writer.write(FLAC[half:])  # the rest of the upload in flight
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), GUARD_S)  # up to the close
    finally:
        writer.close()
    status, _, body = answer.partition(b"\r\n\r\n")
    assert status.startswith(b"HTTP/1.1 200 "), answer[:500]
    results = json.loads(body)["results"]
    assert results["channels"][0]["alternatives"][0]["transcript"]
    assert replica.proc is not None
    assert await asyncio.to_thread(replica.proc.wait, GUARD_S) == 0
