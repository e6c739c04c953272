"""OpenAI's audio REST API on kettle's port: /v1/audio/transcriptions, /v1/audio/translations,
/v1/models and /v1/models/{id}.

The request's order of checks, cheapest first, so a refused upload costs no reading:

1. the key (401), then whether the server takes work at all (503 while the model loads or the
   server drains) and a free upload slot (429 while ``max_uploads`` are being transcribed),
   both with Retry-After, which the SDK's retry honours (an upload in flight when a drain
   begins is answered within the drain's timeout; one a shutdown cuts short gets the 503);
2. the body, read holding no slot: up to ``max_upload_bytes`` (413 beyond; Content-Length is
   checked first), within the bodies' byte budget (429), at the pace it must come at (408,
   ``request_timeout``, which the SDK retries), to its Content-Length (400,
   ``incomplete_body``, when the client half-closed before); the 408 and that 400 close the
   connection after them;
3. the form (400, 404 for an unknown model; see protocols/openai_rest.py); then a slot (429
   if the others took the last one meanwhile) and the audio, decoded from its bytes (400 when
   it is not audio).

The slot, the body's limits, the audio and the transcription (through the live engine at
offline priority, with the model that decodes finals) are uploads.py's, shared with Deepgram's
upload route: a client that goes away cancels the rest of its work and frees its slot.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from kettle.streaming.protocols.handshake import bearer_token
from kettle.streaming.protocols.openai import rest
from kettle.streaming.protocols.openai import rest_render as render
from kettle.streaming.server import openai_diarize
from kettle.streaming.server.services import Services
from kettle.streaming.server.uploads import (
    UploadFailure,
    UploadJob,
    UploadsUnavailable,
    upload_failure,
)
from kettle.transcribe.files.pipeline import PipelineConfig
from kettle.transcribe.files.windows import WindowConfig
from kettle.transcribe.transcript import Transcript
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp

if TYPE_CHECKING:
    from kettle.streaming.engine.engine import Engine

logger = logging.getLogger(__name__)

MODELS_PATH = "/v1/models"
TRANSCRIPTIONS_PATH = "/v1/audio/transcriptions"
TRANSLATIONS_PATH = "/v1/audio/translations"
MAX_FIELDS = 64

# What GET /v1/info says of this API.
INFO: dict[str, Any] = {
    "api": "openai/v1/audio",
    "endpoints": {
        "transcriptions": {"method": "POST", "path": TRANSCRIPTIONS_PATH},
        "translations": {"method": "POST", "path": TRANSLATIONS_PATH},
        "models": {"method": "GET", "path": MODELS_PATH},
        "model": {"method": "GET", "path": MODELS_PATH + "/{model_id}"},
    },
    "body": "multipart/form-data with the audio in the field 'file'",
    "response_formats": list(rest.RESPONSE_FORMATS),
}


def error_response(error: rest.OpenAIError) -> Response:
    return JSONResponse(error.body(), error.status, headers=error.headers)


class OpenAIRest:
    """The routes' handlers, sharing the server's services and its upload slots."""

    def __init__(self, services: Services) -> None:
        self.services = services

    def routes(self) -> list[BaseRoute]:
        return [
            Route(MODELS_PATH, self.list_models, methods=["GET"]),
            Route(MODELS_PATH + "/{model_id:path}", self.get_model, methods=["GET"]),
            Route(TRANSCRIPTIONS_PATH, self._answered(self.transcriptions), methods=["POST"]),
            Route(TRANSLATIONS_PATH, self._answered(self.translations), methods=["POST"]),
        ]

    def _answered(self, endpoint: Callable[[Request], Awaitable[Response]]) -> ASGIApp:
        return self.services.uploads.answered(endpoint)  # a drain waits for its answer

    def _refused(self, error: rest.OpenAIError) -> Response:
        """The error's response, counted under ``kettle_errors{code}`` (as the WebSocket
        protocols' error messages are)."""
        self.services.metrics.errors.labels(code=error.code or error.type).inc()
        return error_response(error)

    # -- checks -----------------------------------------------------------------------------

    def _authorize(self, request: Request) -> None:
        presented = bearer_token(request.headers.get("authorization"))
        if not self.services.authenticator.allows_any([presented]):
            raise rest.unauthorized()

    def catalog(self) -> rest.ModelCatalog:
        engine = self.services.engine
        if engine is None:
            raise rest.busy(self.services.config.retry_after_s, unavailable=True)
        model = engine.final_decoder
        entry = rest.ModelEntry(model.name, model.multilingual)
        return rest.ModelCatalog((entry,), self.services.config.openai_aliases)

    def _engine(self) -> Engine:
        try:
            return self.services.serving.upload_engine()
        except UploadsUnavailable:
            raise rest.busy(self.services.config.retry_after_s, unavailable=True) from None

    # -- handlers ---------------------------------------------------------------------------

    async def list_models(self, request: Request) -> Response:
        try:
            self._authorize(request)
            return JSONResponse(self.catalog().list_body())
        except rest.OpenAIError as exc:
            return self._refused(exc)

    async def get_model(self, request: Request) -> Response:
        try:
            self._authorize(request)
            return JSONResponse(self.catalog().get_body(request.path_params["model_id"]))
        except rest.OpenAIError as exc:
            return self._refused(exc)

    async def transcriptions(self, request: Request) -> Response:
        return await self._audio(request, "transcribe")

    async def translations(self, request: Request) -> Response:
        return await self._audio(request, "translate")

    async def _audio(self, request: Request, task: str) -> Response:
        try:
            self._authorize(request)
            done = await self.services.uploads.transcribe(
                request, self._engine(), lambda body: self._prepare(request, body, task)
            )
        except ClientDisconnect:
            return Response(status_code=499)  # nobody is listening any more
        except Exception as exc:
            return self._refused(self._error(exc, task))
        parsed, speakers = done.parsed.request, done.parsed.speakers
        if parsed.stream:
            return StreamingResponse(
                _iterate(render.stream_events(done.transcript, parsed, speakers)),
                media_type=rest.SSE_CONTENT_TYPE,
                headers={"Cache-Control": "no-cache"},
            )
        text, content_type = render.render(done.transcript, parsed, speakers)
        return Response(text, media_type=content_type)

    def _error(self, exc: Exception, task: str) -> rest.OpenAIError:
        """OpenAI's error for an upload that failed (uploads.py's refusals included)."""
        if isinstance(exc, rest.OpenAIError):
            return exc
        failure = upload_failure(exc, draining=self.services.draining)
        error = self._failure(failure, exc, task)
        if failure is not None and failure.close:  # its body was not read to its end
            error.headers["Connection"] = "close"
        return error

    def _failure(
        self, failure: UploadFailure | None, exc: Exception, task: str
    ) -> rest.OpenAIError:
        retry = self.services.config.retry_after_s
        match failure:
            case UploadFailure(kind="busy"):
                return rest.busy(retry)
            case UploadFailure(kind="timeout"):
                return rest.OpenAIError(408, f"{_sentence(exc)}.", code="request_timeout")
            case UploadFailure(kind="ended_early"):
                return rest.bad_request(f"{_sentence(exc)}.", None, "incomplete_body")
            case UploadFailure(kind="unavailable"):
                return rest.busy(retry, unavailable=True)
            case UploadFailure(kind="too_large", limit=int(limit)):
                return rest.too_large(limit)
            case UploadFailure(kind="unreadable"):
                message = f"The file could not be read as audio: {exc}."
                return rest.bad_request(message, "file", "invalid_file")
            case UploadFailure(kind="failed"):
                message = f"The transcription failed: {exc}"
                return rest.OpenAIError(
                    failure.status, message, type="server_error", code="transcription_failed"
                )
        logger.error("%s request failed", task, exc_info=exc)
        return rest.OpenAIError(
            500, "internal server error", type="server_error", code="internal_error"
        )

    async def _prepare(self, request: Request, body: bytes, task: str) -> UploadJob[_Job]:
        fields, file = await parse_form(request, body)
        parsed = rest.parse_audio_form(fields, file, task=task, catalog=self.catalog())
        job = _Job(parsed)
        finish = None
        if parsed.diarize:
            speakers = self._engine().speakers
            if speakers is None:
                raise openai_diarize.no_speaker_model()  # before any decoding is spent on it
            references = await asyncio.to_thread(
                openai_diarize.load_references, parsed.known_speakers
            )

            async def finish(audio: np.ndarray, transcript: Transcript) -> Transcript:
                labeled, job.speakers = await openai_diarize.diarize(
                    speakers, audio, transcript, references
                )
                return labeled

        config = PipelineConfig(
            language=parsed.language,
            languages=parsed.languages,
            # logprobs are the words' probabilities (openai_logprobs.py), so they need words
            word_timestamps=parsed.words or parsed.logprobs,
            # Timed segments are cut at aligned words; plain text aligns only where needed.
            recover_align_all=parsed.response_format not in ("json", "text"),
            task=parsed.task,
            prompt=parsed.prompt,
            keyterms=parsed.keyterms,
            windows=parsed.windows if parsed.windows is not None else WindowConfig(),
        )
        return UploadJob(job, parsed.audio, config, finish=finish)


def _sentence(exc: Exception) -> str:
    text = str(exc)
    return text[:1].upper() + text[1:]


@dataclass
class _Job:
    """The parsed request, and (diarized_json) each segment's speaker label once known."""

    request: rest.AudioRequest
    speakers: list[str] = field(default_factory=list)


async def _iterate(frames: Iterable[str]) -> AsyncIterator[str]:
    for frame in frames:
        yield frame


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


def routes(services: Services) -> list[BaseRoute]:
    return OpenAIRest(services).routes()
