"""One REST upload from its body to its transcript: what the OpenAI and Deepgram upload routes
share (openai_routes.py, deepgram_http.py), so both hold and free their slots the same way.

`Uploads.transcribe`, in order:

1. a free upload slot (`UploadsFull` otherwise: 429), held until the work has ended;
2. the body, read up to the limit (`UploadTooLarge`: 413; Content-Length is checked first);
3. the route's own reading of the body (`prepare`, which raises its API's errors);
4. the audio decoded from the bytes it names (`UnreadableAudio`: 400);
5. the transcription on the engine at offline priority (offline.py; `KettleError` on failure).

From the end of the body on, a client that goes away (the next ASGI message is the
disconnect) cancels steps 3-5, withdraws what is still queued and frees the slot at once;
the call raises Starlette's `ClientDisconnect`, as a client gone during the body does.
Each route renders the refusals in its own API's error shape.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from kettle.streaming.limits import SessionSlots
from kettle.streaming.offline import transcribe_offline
from kettle.transcribe.audio_io import RawFormat, load_audio
from kettle.transcribe.errors import AudioError
from kettle.transcribe.pipeline import PipelineConfig
from kettle.transcribe.transcript import Transcript
from starlette.requests import ClientDisconnect, Request

if TYPE_CHECKING:
    from kettle.streaming.engine import Engine
    from kettle.streaming.server import KettleServer

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
class UploadJob(Generic[P]):
    """What a route makes of a body: the audio's bytes, how to read and transcribe them, and
    its own parsed request (``parsed``), handed back with the transcript."""

    parsed: P
    audio: bytes
    config: PipelineConfig
    raw: RawFormat | None = None  # None: a container, found from the bytes


@dataclass(frozen=True)
class Transcribed(Generic[P]):
    parsed: P
    body: bytes
    transcript: Transcript


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
        self._idle = asyncio.Event()  # set while no upload holds a slot
        self._idle.set()

    @property
    def active(self) -> int:
        return self._slots.active

    @property
    def full(self) -> bool:
        return self._slots.full

    async def wait_idle(self) -> None:
        """Return once no upload holds a slot."""
        await self._idle.wait()

    async def transcribe(
        self,
        request: Request,
        engine: Engine,
        prepare: Callable[[bytes], Awaitable[UploadJob[P]]],
    ) -> Transcribed[P]:
        """Steps 1-5 of the module's docstring for one request."""
        if not self._slots.try_acquire():
            raise UploadsFull("as many uploads as kettle takes are running")
        self._idle.clear()
        try:
            body = await read_body(request, self.max_bytes)
            work = _transcribe(engine, body, prepare)
            parsed, transcript = await unless_disconnected(request, work)
            return Transcribed(parsed, body, transcript)
        finally:
            self._slots.release()
            if self._slots.active == 0:
                self._idle.set()


async def _transcribe(
    engine: Engine, body: bytes, prepare: Callable[[bytes], Awaitable[UploadJob[P]]]
) -> tuple[P, Transcript]:
    job = await prepare(body)
    try:
        audio = await asyncio.to_thread(load_audio, job.audio, job.raw)
    except AudioError as exc:
        raise UnreadableAudio(str(exc)) from None
    return job.parsed, await transcribe_offline(engine, audio, job.config)


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
    job = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({job, watcher}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        await _stop(job)  # the handler itself was cancelled (shutdown): so is its work
        raise
    finally:
        watcher.cancel()
    if not job.done():
        await _stop(job)
        raise ClientDisconnect()
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
