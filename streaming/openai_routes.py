"""OpenAI's audio REST API on kettle's port: /v1/audio/transcriptions, /v1/audio/translations,
/v1/models and /v1/models/{id}.

The request's order of checks, cheapest first, so a refused upload costs no reading:

1. the key (401), then whether the server takes work at all (503 while the model loads or the
   server drains) and a free upload slot (429 while ``max_uploads`` are being transcribed),
   both with Retry-After, which the SDK's retry honours;
2. the body, read up to ``max_upload_bytes`` (413 beyond; Content-Length is checked first);
3. the form (400, 404 for an unknown model; see protocols/openai_rest.py), then the audio,
   decoded from its bytes (400 when it is not audio).

The transcription runs through the live engine at offline priority (offline.py), with the
model that decodes finals. A client that goes away cancels the rest of its work and frees
its slot.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Iterable
from typing import TYPE_CHECKING, TypeVar

from kettle.streaming.limits import bearer_token
from kettle.streaming.offline import transcribe_offline
from kettle.streaming.protocols import openai_rest as rest
from kettle.transcribe.audio_io import load_audio
from kettle.transcribe.errors import AudioError, KettleError
from kettle.transcribe.pipeline import PipelineConfig
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

if TYPE_CHECKING:
    from kettle.streaming.server import KettleServer

logger = logging.getLogger(__name__)
T = TypeVar("T")

MODELS_PATH = "/v1/models"
TRANSCRIPTIONS_PATH = "/v1/audio/transcriptions"
TRANSLATIONS_PATH = "/v1/audio/translations"
MAX_FIELDS = 64


def error_response(error: rest.OpenAIError) -> Response:
    return JSONResponse(error.body(), error.status, headers=error.headers)


class OpenAIRest:
    """The routes' handlers, sharing the server and its upload slots."""

    def __init__(self, server: KettleServer) -> None:
        self.server = server
        self.slots = server.upload_slots  # shared with Deepgram's uploads

    def routes(self) -> list[BaseRoute]:
        return [
            Route(MODELS_PATH, self.list_models, methods=["GET"]),
            Route(MODELS_PATH + "/{model_id:path}", self.get_model, methods=["GET"]),
            Route(TRANSCRIPTIONS_PATH, self.transcriptions, methods=["POST"]),
            Route(TRANSLATIONS_PATH, self.translations, methods=["POST"]),
        ]

    # -- checks -----------------------------------------------------------------------------

    def _authorize(self, request: Request) -> None:
        presented = bearer_token(request.headers.get("authorization"))
        if not self.server.authenticator.allows_any([presented]):
            raise rest.unauthorized()

    def catalog(self) -> rest.ModelCatalog:
        engine = self.server.engine
        if engine is None:
            raise rest.busy(self.server.config.retry_after_s, unavailable=True)
        model = engine.final_decoder
        return rest.ModelCatalog((rest.ModelEntry(model.name, model.multilingual),))

    def _available(self) -> None:
        engine = self.server.engine
        retry = self.server.config.retry_after_s
        if engine is None or self.server.draining or not engine.healthy:
            raise rest.busy(retry, unavailable=True)
        if self.slots.full:
            raise rest.busy(retry)

    # -- handlers ---------------------------------------------------------------------------

    async def list_models(self, request: Request) -> Response:
        try:
            self._authorize(request)
            return JSONResponse(self.catalog().list_body())
        except rest.OpenAIError as exc:
            return error_response(exc)

    async def get_model(self, request: Request) -> Response:
        try:
            self._authorize(request)
            return JSONResponse(self.catalog().get_body(request.path_params["model_id"]))
        except rest.OpenAIError as exc:
            return error_response(exc)

    async def transcriptions(self, request: Request) -> Response:
        return await self._audio(request, "transcribe")

    async def translations(self, request: Request) -> Response:
        return await self._audio(request, "translate")

    async def _audio(self, request: Request, task: str) -> Response:
        try:
            self._authorize(request)
            self._available()
        except rest.OpenAIError as exc:
            return error_response(exc)
        if not self.slots.try_acquire():  # pragma: no cover - _available just checked
            return error_response(rest.busy(self.server.config.retry_after_s))
        try:
            return await self._transcribe(request, task)
        except rest.OpenAIError as exc:
            return error_response(exc)
        except ClientDisconnect:
            return Response(status_code=499)  # nobody is listening any more
        except Exception:
            logger.exception("%s request failed", task)
            return error_response(
                rest.OpenAIError(
                    500, "internal server error", type="server_error", code="internal_error"
                )
            )
        finally:
            self.slots.release()

    async def _transcribe(self, request: Request, task: str) -> Response:
        limit = self.server.config.max_upload_bytes
        body = await read_body(request, limit)
        fields, file = await parse_form(request, body)
        parsed = rest.parse_audio_form(fields, file, task=task, catalog=self.catalog())
        engine = self.server.engine
        if engine is None:
            raise rest.busy(self.server.config.retry_after_s, unavailable=True)
        try:
            audio = await asyncio.to_thread(load_audio, parsed.audio)
        except AudioError as exc:
            raise rest.bad_request(f"The file could not be read as audio: {exc}.", "file",
                                   "invalid_file") from None  # fmt: skip
        config = PipelineConfig(
            language=parsed.language,
            word_timestamps=parsed.words,
            task=parsed.task,
            prompt=parsed.prompt,
        )
        try:
            transcript = await _unless_disconnected(
                request, transcribe_offline(engine, audio, config)
            )
        except KettleError as exc:
            if self.server.draining:
                raise rest.busy(self.server.config.retry_after_s, unavailable=True) from None
            raise rest.OpenAIError(500, f"The transcription failed: {exc}", type="server_error",
                                   code="transcription_failed") from None  # fmt: skip
        if parsed.stream:
            return StreamingResponse(
                _iterate(rest.stream_events(transcript)),
                media_type=rest.SSE_CONTENT_TYPE,
                headers={"Cache-Control": "no-cache"},
            )
        text, content_type = rest.render(transcript, parsed)
        return Response(text, media_type=content_type)


async def _unless_disconnected(request: Request, work: Awaitable[T]) -> T:
    """Await ``work``, cancelling it if the client goes away first (the body is read, so
    the next ASGI message is the disconnect): a gone client holds no upload slot."""
    job = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({job, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
    if not job.done():
        job.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await job
        raise ClientDisconnect()
    return job.result()


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _iterate(frames: Iterable[str]) -> AsyncIterator[str]:
    for frame in frames:
        yield frame


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, or 413 as soon as it is known to exceed ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise rest.too_large(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise rest.too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


async def parse_form(request: Request, body: bytes) -> tuple[list[tuple[str, str]], bytes | None]:
    """The text fields and the bytes of the part named ``file`` of a multipart body."""
    content_type = request.headers.get("content-type", "")
    if not content_type.lower().startswith("multipart/form-data"):
        raise rest.bad_request("The request body must be multipart/form-data with the audio "
                               "in the field 'file'.", None, "invalid_request")  # fmt: skip

    async def stream() -> AsyncGenerator[bytes, None]:
        yield body

    parser = MultiPartParser(request.headers, stream(), max_files=1, max_fields=MAX_FIELDS)
    try:
        form = await parser.parse()
    except MultiPartException as exc:
        raise rest.bad_request(f"The multipart body could not be read: {exc.message}", None,
                               "invalid_request") from None  # fmt: skip
    fields: list[tuple[str, str]] = []
    file: bytes | None = None
    try:
        for name, value in form.multi_items():
            if isinstance(value, UploadFile):
                if name == "file":
                    file = await value.read()
            else:
                fields.append((name, value))
    finally:
        await form.close()
    return fields, file


def routes(server: KettleServer) -> list[BaseRoute]:
    return OpenAIRest(server).routes()
