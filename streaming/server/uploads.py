"""One REST upload from its body to its transcript: what the OpenAI and Deepgram upload routes
share (openai_routes.py, deepgram_routes.py), so both hold and free their slots the same way.

`Uploads.transcribe`, in order:

1. a free upload slot now (`UploadsFull` otherwise: 429, before any reading);
2. the body, read holding no slot (upload_body.py): up to the byte limit (`UploadTooLarge`:
   413; Content-Length is checked first), within the byte budget all bodies share
   (`UploadsFull`: 429), at the pace it must come at (`BodyTimeout`: 408, counted by
   ``on_cut``), to its Content-Length (`BodyEndedEarly`: 400);
3. the route's own reading of the body (`prepare`, which raises its API's errors);
4. an upload slot, held from here until the work has ended (`UploadsFull` when the others
   took the last one meanwhile);
5. the audio decoded from the bytes it names (`UnreadableAudio`: 400);
6. the transcription on the engine at offline priority (offline.py; `KettleError` on failure),
   with `UploadJob.diarize` its segments' speakers from the engine's speaker thread.

So a slot is held by work, never by a body still coming: clients that send slowly hold only
what they have sent of the budget, until their pace cuts them. The body's bytes stay in the
budget until the upload ends.

From the end of the body on, a client that goes away (the next ASGI message is the
disconnect) cancels steps 3-6, withdraws what is still queued and frees the slot at once;
the call raises Starlette's `ClientDisconnect`, as a client gone during the body does.
Each route renders the refusals in its own API's error shape (upload_errors.py's mapping).

A drain (server.py) lets the uploads in flight finish, bodies still being read included:
`wait_idle` returns once none is in `transcribe` and every route wrapped by `answered` has
sent its response. At the drain's end (or at once on a plain shutdown) `close` cuts what
still runs short: its work (or its reading) is cancelled and the call raises
`UploadsUnavailable`, which each route answers with 503 and Retry-After.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

import numpy as np
from kettle.streaming.engine.offline import diarize_offline, transcribe_offline
from kettle.streaming.server.access import SessionSlots
from kettle.streaming.server.upload_body import read_body
from kettle.streaming.server.upload_errors import (
    BodyEndedEarly,
    BodyTimeout,
    UnreadableAudio,
    UploadError,
    UploadFailure,
    UploadsFull,
    UploadsUnavailable,
    UploadTooLarge,
    upload_failure,
)
from kettle.streaming.server.upload_limits import BodyPace, ByteBudget
from kettle.transcribe.audio.read import RawFormat, load_audio, load_audio_channels
from kettle.transcribe.errors import AudioError
from kettle.transcribe.files.pipeline import PipelineConfig
from kettle.transcribe.transcript import Transcript
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import request_response
from starlette.types import ASGIApp, Receive, Scope, Send

if TYPE_CHECKING:
    from kettle.streaming.engine.engine import Engine

P = TypeVar("P")
T = TypeVar("T")


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


class Uploads:
    """The upload slots, body limits and byte budget that every REST API's uploads share.

    ``pace``: how fast a body must come (default `BodyPace()`); ``budget_bytes``: the bytes
    of bodies held at once, read or being transcribed (default: ``max_uploads`` bodies of
    ``max_bytes``); ``on_cut``: told the reason ("slow", "deadline") of each body cut."""

    def __init__(
        self,
        max_uploads: int,
        max_bytes: int,
        *,
        pace: BodyPace | None = None,
        budget_bytes: int | None = None,
        on_cut: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._slots = SessionSlots(max_uploads)
        self.max_bytes = max_bytes
        self.pace = pace or BodyPace()
        self.budget = ByteBudget(budget_bytes or max_uploads * max_bytes)
        self._on_cut = on_cut or (lambda reason: None)
        self._clock = clock
        self._reading = 0  # bodies being read
        self._busy = 0  # calls of `transcribe` plus requests of `answered` routes not answered
        self._idle = asyncio.Event()  # set while _busy is 0
        self._idle.set()
        self._closed = asyncio.Event()

    @property
    def active(self) -> int:
        """Uploads holding a slot: being decoded or transcribed."""
        return self._slots.active

    @property
    def reading(self) -> int:
        """Bodies being read now (holding no slot)."""
        return self._reading

    @property
    def full(self) -> bool:
        return self._slots.full

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    async def wait_idle(self) -> None:
        """Return once no call of `transcribe` runs (none reads a body or holds a slot) and
        every `answered` route's request has had its response sent."""
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
        """Steps 1-6 of the module's docstring for one request."""
        if self.closed:
            raise UploadsUnavailable("the server is shutting down")
        if self._slots.full:  # refused before a byte is read, as busy as the server is
            raise UploadsFull(_SLOTS_FULL)
        with self._holding():
            upload = self._upload(request, engine, prepare)
            return await _unless(upload, self._closed.wait(), _cut_short)

    async def _upload(
        self,
        request: Request,
        engine: Engine,
        prepare: Callable[[bytes], Awaitable[UploadJob[P]]],
    ) -> Transcribed[P]:
        with self.budget.share() as share:
            self._reading += 1
            try:
                body = await read_body(
                    request, self.max_bytes, pace=self.pace, share=share, clock=self._clock
                )
            except BodyTimeout as exc:
                self._on_cut(exc.reason)
                raise
            finally:
                self._reading -= 1
            work = self._work(engine, body, prepare)
            parsed, transcripts, split = await unless_disconnected(request, work)
        return Transcribed(parsed, body, transcripts[0], transcripts if split else ())

    async def _work(
        self, engine: Engine, body: bytes, prepare: Callable[[bytes], Awaitable[UploadJob[P]]]
    ) -> tuple[P, tuple[Transcript, ...], bool]:
        """Steps 3-6: the job, then within a slot its transcript(s)."""
        job = await prepare(body)
        if not self._slots.try_acquire():  # others' bodies ended first and took the last
            raise UploadsFull(_SLOTS_FULL)
        try:
            return await _transcribe(engine, job)
        finally:
            self._slots.release()


_SLOTS_FULL = "as many uploads as kettle takes are running"


class _Answered:
    """An ASGI app that holds its `Uploads` busy until the response has been sent."""

    def __init__(self, uploads: Uploads, app: ASGIApp) -> None:
        self._uploads, self._app = uploads, app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        with self._uploads._holding():
            await self._app(scope, receive, send)


def _cut_short() -> UploadsUnavailable:
    return UploadsUnavailable("the server shut down before the transcription finished")


async def _transcribe(engine: Engine, job: UploadJob[P]) -> tuple[P, tuple[Transcript, ...], bool]:
    """The transcript, or with split channels one per channel; and whether they were split."""
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
    "BodyEndedEarly",
    "BodyPace",
    "BodyTimeout",
    "Transcribed",
    "UnreadableAudio",
    "UploadError",
    "UploadFailure",
    "UploadJob",
    "UploadTooLarge",
    "Uploads",
    "UploadsFull",
    "UploadsUnavailable",
    "read_body",
    "unless_disconnected",
    "upload_failure",
]
