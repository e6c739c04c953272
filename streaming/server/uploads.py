"""One REST upload from its body to its transcript: what the OpenAI and Deepgram upload routes
share (openai_routes.py, deepgram_http.py), so both hold and free their slots the same way.

`Uploads.transcribe`, in order:

1. a free upload slot (`UploadsFull` otherwise: 429), held until the work has ended;
2. the body, read up to the limit (`UploadTooLarge`: 413; Content-Length is checked first);
3. the route's own reading of the body (`prepare`, which raises its API's errors);
4. the audio decoded from the bytes it names (`UnreadableAudio`: 400);
5. the transcription on the engine at offline priority (offline.py; `KettleError` on failure),
   with `UploadJob.diarize` its segments' speakers from the engine's speaker thread.

From the end of the body on, a client that goes away (the next ASGI message is the
disconnect) cancels steps 3-5, withdraws what is still queued and frees the slot at once;
the call raises Starlette's `ClientDisconnect`, as a client gone during the body does.
Each route renders the refusals in its own API's error shape.

A drain (server.py) lets the uploads in flight finish: `wait_idle` returns once none holds a
slot and every route wrapped by `answered` has sent its response. At the drain's end (or at
once on a plain shutdown) `close` cuts what still runs short: its work is cancelled and the
call raises `UploadsUnavailable`, which each route answers with 503 and Retry-After.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

import numpy as np
from kettle.streaming.engine.offline import diarize_offline, transcribe_offline
from kettle.streaming.server.limits import SessionSlots
from kettle.transcribe.audio_io import RawFormat, load_audio, load_audio_channels
from kettle.transcribe.errors import AudioError, KettleError
from kettle.transcribe.pipeline import PipelineConfig
from kettle.transcribe.transcript import Transcript
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import request_response
from starlette.types import ASGIApp, Receive, Scope, Send

if TYPE_CHECKING:
    from kettle.streaming.engine.engine import Engine
    from kettle.streaming.server.server import KettleServer

P = TypeVar("P")
T = TypeVar("T")


class UploadError(Exception):
    """An upload refused before its transcription; the route renders it its own way."""


class UploadsUnavailable(UploadError):
    """The server takes no uploads now (model loading or failing, shutting down): 503."""


class UploadsFull(UploadError):
    """Every upload slot is taken: 429."""


class UploadTooLarge(UploadError):
    def __init__(self, limit: int) -> None:
        super().__init__(f"the body is over the limit of {limit} bytes")
        self.limit = limit


class UnreadableAudio(UploadError):
    """The bytes are not audio the file reader can decode: 400."""


@dataclass(frozen=True)
class UploadFailure:
    """How a failed upload is answered, whatever the API: the status and what went wrong."""

    status: int
    kind: str  # "busy", "unavailable", "too_large", "unreadable" or "failed"
    message: str
    retry: bool = False  # a Retry-After goes with it
    limit: int | None = None  # the byte limit an upload was over ("too_large")


def upload_failure(exc: Exception, *, draining: bool) -> UploadFailure | None:
    """The one HTTP mapping of an upload's failure, for every REST API; None: unexpected."""
    match exc:
        case UploadsFull():
            return UploadFailure(429, "busy", str(exc), retry=True)
        case UploadsUnavailable():  # cut short by the server's shutdown
            return UploadFailure(503, "unavailable", str(exc), retry=True)
        case UploadTooLarge(limit=limit):
            return UploadFailure(413, "too_large", str(exc), limit=limit)
        case UnreadableAudio():
            return UploadFailure(400, "unreadable", str(exc))
        case KettleError() if draining:  # the shutdown stopped the engine under it: retry
            return UploadFailure(503, "unavailable", str(exc), retry=True)
        case KettleError():
            return UploadFailure(500, "failed", str(exc))
    return None


@dataclass(frozen=True)
class UploadJob(Generic[P]):
    """What a route makes of a body: the audio's bytes, how to read and transcribe them, and
    its own parsed request (``parsed``), handed back with the transcript."""

    parsed: P
    audio: bytes
    config: PipelineConfig
    raw: RawFormat | None = None  # None: a container, found from the bytes
    split_channels: bool = False  # each channel transcribed on its own (Transcribed.channels)
    diarize: bool = False  # segments labeled with their speaker (per channel when split)
    # Other work on the decoded audio and its transcript within the upload's slot (OpenAI's
    # diarization with known speakers); runs after ``diarize``'s labels, if both are set.
    finish: Callable[[np.ndarray, Transcript], Awaitable[Transcript]] | None = None


@dataclass(frozen=True)
class Transcribed(Generic[P]):
    parsed: P
    body: bytes
    transcript: Transcript  # (with split channels: the first channel's)
    channels: tuple[Transcript, ...] = ()  # with split channels: one per channel


def upload_engine(server: KettleServer) -> Engine:
    """The engine, when the server takes uploads now; `UploadsUnavailable` otherwise."""
    engine = server.engine
    if server.draining:
        raise UploadsUnavailable("the server is shutting down")
    if engine is None:
        raise UploadsUnavailable("the model is loading")
    if not engine.healthy:
        stopped = not engine.model_failing
        raise UploadsUnavailable("the engine has stopped" if stopped else "the model is failing")
    return engine


class Uploads:
    """The upload slots and body limit that every REST API's uploads share."""

    def __init__(self, max_uploads: int, max_bytes: int) -> None:
        self._slots = SessionSlots(max_uploads)
        self.max_bytes = max_bytes
        self._busy = 0  # slots held plus requests of `answered` routes not yet answered
        self._idle = asyncio.Event()  # set while _busy is 0
        self._idle.set()
        self._closed = asyncio.Event()

    @property
    def active(self) -> int:
        return self._slots.active

    @property
    def full(self) -> bool:
        return self._slots.full

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    async def wait_idle(self) -> None:
        """Return once no upload holds a slot and every `answered` route's request has had
        its response sent."""
        await self._idle.wait()

    def close(self) -> None:
        """Cut the uploads short: each one in flight, and each later, raises
        `UploadsUnavailable` instead of giving its transcript (its work is cancelled)."""
        self._closed.set()

    def answered(self, endpoint: Callable[[Request], Awaitable[Response]]) -> ASGIApp:
        """A route's ASGI app for ``endpoint`` whose requests `wait_idle` waits for until
        the response is sent, not only until the transcription is over."""
        return _Answered(self, request_response(endpoint))

    @contextlib.contextmanager
    def _holding(self) -> Iterator[None]:
        self._busy += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._busy -= 1
            if self._busy == 0:
                self._idle.set()

    async def transcribe(
        self,
        request: Request,
        engine: Engine,
        prepare: Callable[[bytes], Awaitable[UploadJob[P]]],
    ) -> Transcribed[P]:
        """Steps 1-5 of the module's docstring for one request."""
        if self.closed:
            raise UploadsUnavailable("the server is shutting down")
        if not self._slots.try_acquire():
            raise UploadsFull("as many uploads as kettle takes are running")
        try:
            with self._holding():
                upload = _upload(request, self.max_bytes, engine, prepare)
                return await _unless(upload, self._closed.wait(), _cut_short)
        finally:
            self._slots.release()


class _Answered:
    """An ASGI app that holds its `Uploads` busy until the response has been sent."""

    def __init__(self, uploads: Uploads, app: ASGIApp) -> None:
        self._uploads, self._app = uploads, app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        with self._uploads._holding():
            await self._app(scope, receive, send)


def _cut_short() -> UploadsUnavailable:
    return UploadsUnavailable("the server shut down before the transcription finished")


async def _upload(
    request: Request,
    limit: int,
    engine: Engine,
    prepare: Callable[[bytes], Awaitable[UploadJob[P]]],
) -> Transcribed[P]:
    body = await read_body(request, limit)
    work = _transcribe(engine, body, prepare)
    parsed, transcripts, split = await unless_disconnected(request, work)
    return Transcribed(parsed, body, transcripts[0], transcripts if split else ())


async def _transcribe(
    engine: Engine, body: bytes, prepare: Callable[[bytes], Awaitable[UploadJob[P]]]
) -> tuple[P, tuple[Transcript, ...], bool]:
    """The transcript, or with split channels one per channel; and whether they were split."""
    job = await prepare(body)
    try:
        if job.split_channels:
            channels = await asyncio.to_thread(load_audio_channels, job.audio, job.raw)
        else:
            audio = await asyncio.to_thread(load_audio, job.audio, job.raw)
    except AudioError as exc:
        raise UnreadableAudio(str(exc)) from None
    if not job.split_channels:
        return job.parsed, (await _transcript(engine, audio, job),), False
    # The channels share the upload's slot and queue at the engine's offline priority.
    done = await asyncio.gather(*(_transcript(engine, a, job) for a in channels))
    return job.parsed, tuple(done), True


async def _transcript(engine: Engine, audio: np.ndarray, job: UploadJob[P]) -> Transcript:
    transcript = await transcribe_offline(engine, audio, job.config)
    if job.diarize:
        transcript = await diarize_offline(engine, audio, transcript)
    if job.finish is not None:
        transcript = await job.finish(audio, transcript)
    return transcript


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, or `UploadTooLarge` as soon as it is known to exceed ``limit``."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise UploadTooLarge(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise UploadTooLarge(limit)
        chunks.append(chunk)
    return b"".join(chunks)


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T:
    """Await ``work``, cancelling it if the client goes away first (call it once the body
    is read, so the next ASGI message is the disconnect); then `ClientDisconnect`."""
    return await _unless(work, _disconnected(request), ClientDisconnect)


async def _unless(
    work: Awaitable[T], interrupt: Awaitable[object], error: Callable[[], BaseException]
) -> T:
    """Await ``work``; if ``interrupt`` comes first, cancel the work and raise ``error()``."""
    job = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(interrupt)
    try:
        await asyncio.wait({job, watcher}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        await _stop(job)  # the caller itself was cancelled: so is its work
        raise
    finally:
        watcher.cancel()
    if not job.done():
        await _stop(job)
        raise error()
    return job.result()


async def _stop(job: asyncio.Future[T]) -> None:
    job.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await job


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


__all__ = [
    "Transcribed",
    "UnreadableAudio",
    "UploadError",
    "UploadJob",
    "UploadTooLarge",
    "Uploads",
    "UploadsFull",
    "UploadsUnavailable",
    "read_body",
    "unless_disconnected",
    "upload_engine",
]
