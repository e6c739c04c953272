"""uploads.py on its own: the body's limit, the slot taken only once the body is in and freed
on every outcome, the work cancelled when the client leaves. Requests are Starlette's over a
scripted ASGI receive, the engine a real one over the fake model; the body's pace is
test_upload_body.py's, the routes' own tests are test_deepgram_routes.py, test_openai_sdk.py
and (slow and short bodies on a real server) test_uploads_slow.py."""

from __future__ import annotations

import asyncio
import io
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import numpy as np
import pytest
import soundfile as sf
from kettle.streaming.engine.engine import Engine, EngineConfig
from kettle.streaming.server.serving import Serving
from kettle.streaming.server.uploads import (
    BodyEndedEarly,
    BodyPace,
    BodyTimeout,
    UnreadableAudio,
    UploadJob,
    Uploads,
    UploadsFull,
    UploadsUnavailable,
    UploadTooLarge,
    read_body,
    unless_disconnected,
    upload_failure,
)
from kettle.transcribe.errors import KettleError
from kettle.transcribe.files.pipeline import PipelineConfig
from kettle.transcribe.files.windows import WindowConfig
from kettle.transcribe.model.fake import FakeDecoder, scripted_audio
from kettle.transcribe.types import DecodeRequest
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

GUARD = 60  # seconds: a deadlock guard only
WHOLE = PipelineConfig(windows=WindowConfig(vad=False))  # one window, whatever the VAD hears
AUDIO = scripted_audio([("silence", 0.5), ("voice", 2.0), ("silence", 0.5)])


def wav(audio: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    sf.write(buffer, audio, 16000, format="WAV", subtype="PCM_16")
    return buffer.getvalue()


class Client:
    """An ASGI client: the body in ``chunks``, then nothing until it leaves."""

    def __init__(self, chunks: list[bytes], declared: int | None = None) -> None:
        self.messages = [
            {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
            for i, c in enumerate(chunks)
        ]
        self.gone = asyncio.Event()
        self.reads = 0
        headers = [] if declared is None else [(b"content-length", str(declared).encode())]
        scope = {"type": "http", "method": "POST", "path": "/", "headers": headers}
        self.request = Request(scope, self._receive)

    async def _receive(self) -> dict[str, Any]:
        self.reads += 1
        if self.messages:
            return self.messages.pop(0)
        await self.gone.wait()
        return {"type": "http.disconnect"}


def holding_decoder() -> tuple[threading.Event, threading.Event, Callable[[DecodeRequest], str]]:
    """A FakeDecoder text function that holds the model until ``release``; ``decoding`` is
    set once a window is on the model."""
    decoding, release = threading.Event(), threading.Event()

    def held(request: DecodeRequest) -> str:
        decoding.set()
        release.wait(GUARD)
        return "held"

    return decoding, release, held


async def test_read_body_within_and_over_the_limit() -> None:
    assert await read_body(Client([b"ab", b"cd"]).request, 4) == b"abcd"
    streamed = Client([b"ab", b"cde", b"never read"])
    with pytest.raises(UploadTooLarge) as info:
        await read_body(streamed.request, 4)
    assert info.value.limit == 4 and streamed.reads == 2  # stopped at the chunk over it
    declared = Client([b"abcde"], declared=5)
    with pytest.raises(UploadTooLarge):
        await read_body(declared.request, 4)
    assert declared.reads == 0  # refused on Content-Length, before any reading


class _Endless:
    """Work that never ends by itself: says when it starts and when it is cancelled."""

    def __init__(self) -> None:
        self.started, self.cancelled = asyncio.Event(), asyncio.Event()

    async def run(self) -> None:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise


async def test_unless_disconnected_returns_the_work_or_cancels_it() -> None:
    client = Client([b""])
    await read_body(client.request, 10)

    async def answer() -> int:
        return 42

    assert await unless_disconnected(client.request, answer()) == 42
    work = _Endless()
    waiting = asyncio.create_task(unless_disconnected(client.request, work.run()))
    await work.started.wait()
    client.gone.set()
    with pytest.raises(ClientDisconnect):
        await waiting
    assert work.cancelled.is_set()


async def test_a_cancelled_caller_cancels_the_work() -> None:
    client = Client([b""])
    await read_body(client.request, 10)
    work = _Endless()
    waiting = asyncio.create_task(unless_disconnected(client.request, work.run()))
    await work.started.wait()
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert work.cancelled.is_set()


def job(audio: bytes) -> Callable[[bytes], Awaitable[UploadJob[str]]]:
    async def prepare(body: bytes) -> UploadJob[str]:
        return UploadJob("parsed", audio, WHOLE)

    return prepare


async def test_transcribe_holds_one_slot_and_frees_it_on_every_outcome() -> None:
    decoding, release, held = holding_decoder()

    uploads = Uploads(max_uploads=1, max_bytes=1 << 20)
    body = wav(AUDIO)
    async with Engine(FakeDecoder(text_for=held), EngineConfig()) as engine:
        first = Client([body])
        running = asyncio.create_task(uploads.transcribe(first.request, engine, job(body)))
        assert await asyncio.to_thread(decoding.wait, GUARD)
        assert uploads.active == 1 and uploads.full
        with pytest.raises(UploadsFull):
            await uploads.transcribe(Client([body]).request, engine, job(body))
        release.set()
        done = await running
        assert (done.parsed, done.body) == ("parsed", body)
        assert set(done.transcript.text.split()) == {"held"}
        assert uploads.active == 0
        for chunks, failure in [
            ([b"x" * 2048], UploadTooLarge),  # over max_bytes below
            ([b"not audio"], UnreadableAudio),
        ]:
            small = Uploads(max_uploads=1, max_bytes=1024)
            with pytest.raises(failure):
                await small.transcribe(Client(chunks).request, engine, job(chunks[0]))
            assert small.active == 0
            await small.wait_idle()


async def test_a_client_that_leaves_frees_the_slot_before_the_model_does() -> None:
    decoding, release, held = holding_decoder()

    uploads = Uploads(max_uploads=1, max_bytes=1 << 20)
    body = wav(AUDIO)
    try:
        async with Engine(FakeDecoder(text_for=held), EngineConfig()) as engine:
            client = Client([body])
            running = asyncio.create_task(uploads.transcribe(client.request, engine, job(body)))
            assert await asyncio.to_thread(decoding.wait, GUARD)
            client.gone.set()  # while the model still holds the window
            with pytest.raises(ClientDisconnect):
                await running
            assert uploads.active == 0
            release.set()
    finally:
        release.set()


def serving(engine: Engine | None, draining: bool) -> Serving:
    served = Serving()
    served.engine, served.draining = engine, draining
    return served


async def test_upload_engine_refuses_while_the_server_takes_no_uploads() -> None:
    async with Engine(FakeDecoder(), EngineConfig()) as engine:
        ok = serving(engine, draining=False)
        assert ok.upload_engine() is engine
        for server, reason in [
            (serving(engine, draining=True), "shutting down"),
            (serving(None, draining=False), "loading"),
        ]:
            with pytest.raises(UploadsUnavailable, match=reason):
                server.upload_engine()
    stopped = serving(engine, draining=False)  # the engine has stopped
    with pytest.raises(UploadsUnavailable, match="stopped"):
        stopped.upload_engine()


async def test_close_cuts_uploads_short_and_refuses_later_ones() -> None:
    decoding, release, held = holding_decoder()

    uploads = Uploads(max_uploads=2, max_bytes=1 << 20)
    body = wav(AUDIO)
    try:
        async with Engine(FakeDecoder(text_for=held), EngineConfig()) as engine:
            running = asyncio.create_task(
                uploads.transcribe(Client([body]).request, engine, job(body))
            )
            assert await asyncio.to_thread(decoding.wait, GUARD)
            reading = Client([body[:10], body[10:]])  # one still reading its body, too
            reading.messages.pop()  # its second chunk never comes
            waiting = asyncio.create_task(uploads.transcribe(reading.request, engine, job(body)))
            while reading.reads < 2:  # it has read its first chunk and waits for more
                await asyncio.sleep(0)
            uploads.close()
            for task in (running, waiting):
                with pytest.raises(UploadsUnavailable, match="shut down"):
                    await task
            assert uploads.active == 0 and uploads.closed
            await uploads.wait_idle()
            later = Client([body])
            with pytest.raises(UploadsUnavailable, match="shutting down"):
                await uploads.transcribe(later.request, engine, job(body))
            assert later.reads == 0
            release.set()
    finally:
        release.set()


async def test_answered_holds_wait_idle_until_the_response_is_sent() -> None:
    uploads = Uploads(max_uploads=1, max_bytes=1024)
    sending, sent = asyncio.Event(), asyncio.Event()

    async def endpoint(request: Request) -> Response:
        return Response("ok")

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.body":
            sending.set()
            await sent.wait()  # the socket takes the body only when the test says

    app = uploads.answered(endpoint)
    scope = {"type": "http", "method": "POST", "path": "/", "headers": [], "query_string": b""}
    serving = asyncio.ensure_future(app(scope, Client([b""]).request.receive, send))
    await asyncio.wait_for(sending.wait(), GUARD)  # answered, its body not sent yet
    idle = asyncio.create_task(uploads.wait_idle())
    await asyncio.sleep(0)
    assert not idle.done()
    sent.set()
    await asyncio.wait_for(serving, GUARD)
    await asyncio.wait_for(idle, GUARD)


class Fed:
    """An ASGI client whose body comes a chunk at a time, when the test feeds it."""

    def __init__(self) -> None:
        self.chunks: asyncio.Queue[tuple[bytes, bool]] = asyncio.Queue()
        self.request = Request({"type": "http", "method": "POST", "headers": []}, self._rx)
        self.ended = asyncio.Event()

    def feed(self, chunk: bytes, more: bool = True) -> None:
        self.chunks.put_nowait((chunk, more))

    async def _rx(self) -> dict[str, Any]:
        if self.chunks.empty() and self.ended.is_set():
            await asyncio.Event().wait()  # after the body: nobody leaves
        chunk, more = await self.chunks.get()
        if not more:
            self.ended.set()
        return {"type": "http.request", "body": chunk, "more_body": more}


async def test_a_body_still_coming_holds_no_slot_until_it_is_in() -> None:
    decoding, release, held = holding_decoder()

    uploads = Uploads(max_uploads=1, max_bytes=1 << 20)
    body = wav(AUDIO)
    try:
        async with Engine(FakeDecoder(text_for=held), EngineConfig()) as engine:
            slow = Fed()
            slow.feed(body[:10])
            reading = asyncio.create_task(uploads.transcribe(slow.request, engine, job(body)))
            while uploads.reading < 1:
                await asyncio.sleep(0)
            assert uploads.active == 0 and not uploads.full  # reading holds no slot
            honest = asyncio.create_task(
                uploads.transcribe(Client([body]).request, engine, job(body))
            )
            assert await asyncio.to_thread(decoding.wait, GUARD)  # it took the slot
            assert uploads.active == 1 and uploads.reading == 1
            assert uploads.budget.held == len(body) + 10  # both bodies' bytes, as they came
            slow.feed(body[10:], more=False)  # its body is in, but the slot is taken now
            with pytest.raises(UploadsFull):
                await reading
            release.set()
            assert (await honest).parsed == "parsed"
            assert uploads.active == 0 and uploads.reading == 0 and uploads.budget.held == 0
    finally:
        release.set()


async def test_a_slow_body_is_cut_and_counted() -> None:
    cuts: list[str] = []
    pace = BodyPace(deadline_s=GUARD, grace_s=0.05, min_rate=1 << 20)  # a real 50 ms grace
    uploads = Uploads(max_uploads=1, max_bytes=1 << 20, pace=pace, on_cut=cuts.append)
    async with Engine(FakeDecoder(), EngineConfig()) as engine:
        slow = Fed()
        slow.feed(b"RIFF")
        with pytest.raises(BodyTimeout):
            await uploads.transcribe(slow.request, engine, job(b""))
        assert cuts == ["slow"] and uploads.reading == 0 and uploads.budget.held == 0
        short = Client([b"RIFF"], declared=100)
        with pytest.raises(BodyEndedEarly):
            await uploads.transcribe(short.request, engine, job(b""))
        assert cuts == ["slow"]  # an early end is not a cut


def test_one_mapping_gives_every_rest_api_its_status() -> None:
    def status(exc: Exception, draining: bool = False) -> int | None:
        failure = upload_failure(exc, draining=draining)
        return None if failure is None else failure.status

    assert status(UploadsFull("full")) == 429
    assert status(BodyTimeout("slow", "slow")) == 408
    assert status(BodyEndedEarly(1, 2)) == 400
    closes = upload_failure(UploadsFull("budget", body_unread=True), draining=False)
    assert closes is not None and closes.close  # its body left unread: Connection: close
    assert status(UploadsUnavailable("closing")) == 503
    assert status(UploadTooLarge(10)) == 413
    assert status(UnreadableAudio("noise")) == 400
    assert status(KettleError("boom")) == 500
    assert status(KettleError("boom"), draining=True) == 503
    assert status(ValueError("unexpected")) is None
