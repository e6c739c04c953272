"""POST /v1/listen: Deepgram's prerecorded transcription, on the live engine at the lowest
priority.

The body is the audio (any container the file reader knows, or raw PCM when the query names
an ``encoding``); the answer is ``protocols.deepgram_rest``'s body. The file pipeline runs in
a worker thread and sends its batches to the engine's offline queue, so live streams' finals
and partials always go first. Errors are Deepgram's ``{"err_code", "err_msg", "request_id"}``:
401 for a bad key, 400 for bad parameters or audio, 413 for a body over the limit, 429 with
Retry-After while the upload slots are full (or the bodies' byte budget), 408
(``REQUEST_TIMEOUT``) for a body that comes too slowly or not by its deadline and 400 for one
that ends (a half-close) before its Content-Length, both closing the connection after them
(the body is read before the upload takes a slot), 503 with Retry-After while the model
loads or the server drains (an upload in flight when a drain begins is answered within the
drain's timeout; one still running when a shutdown or the drain's end cuts it short gets this
503), 500 when the transcription fails otherwise (the statuses are uploads.py's, as OpenAI's).
With ``diarize`` each word carries its segment's speaker (offline.diarize_offline; 400
without a speaker model). A JSON body asks kettle to fetch a URL, which it does not do (400).
The slot, the body's limits and the decode are uploads.py's, shared with OpenAI's upload
routes: a client that goes away cancels the rest of its work and frees its slot.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
import uuid
from typing import Any

from kettle.streaming.protocols.deepgram.live import kettle_version
from kettle.streaming.protocols.deepgram.rest import (
    RAW_ENCODINGS,
    PrerecordedParams,
    error_body,
    parse_prerecorded_query,
    render_prerecorded,
)
from kettle.streaming.protocols.deepgram.wire import (
    LISTEN_PATH,
    ListenParamError,
    ModelIdentity,
    check_speakers,
    listen_credentials,
)
from kettle.streaming.server.services import Services
from kettle.streaming.server.uploads import UploadJob, UploadsUnavailable, upload_failure
from kettle.transcribe.errors import KettleError
from kettle.transcribe.files.pipeline import PipelineConfig
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

logger = logging.getLogger(__name__)

# What GET /v1/info says of this API.
INFO: dict[str, Any] = {
    "api": "deepgram/v1/listen (prerecorded)",
    "endpoints": {"listen": {"method": "POST", "path": LISTEN_PATH}},
    "body": "audio in a container, or raw audio when the query names an encoding",
    "encodings": list(RAW_ENCODINGS),
}


# Deepgram's error code and message for each kind of upload failure (uploads.py's mapping).
_DEEPGRAM_ERRORS = {
    "busy": ("TOO_MANY_REQUESTS", "{}"),
    "unavailable": ("SERVICE_UNAVAILABLE", "{}"),
    "too_large": ("PAYLOAD_TOO_LARGE", "{}"),
    "timeout": ("REQUEST_TIMEOUT", "{}"),
    "ended_early": ("Bad Request", "{}"),
    "unreadable": ("Bad Request", "the audio cannot be decoded: {}"),
    "failed": ("INTERNAL_SERVER_ERROR", "transcription failed: {}"),
}


class _Refused(Exception):
    def __init__(
        self, status: int, code: str, message: str, retry: bool = False, close: bool = False
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.retry = status, code, message, retry
        self.close = close  # Connection: close (the body was not read to its end)


def routes(services: Services) -> list[BaseRoute]:
    async def listen(request: Request) -> Response:
        request_id = str(uuid.uuid4())
        try:
            return await _transcribe(services, request, request_id)
        except ClientDisconnect:
            return Response(status_code=499)  # nobody is listening any more
        except _Refused as exc:
            headers = {"Retry-After": str(services.config.retry_after_s)} if exc.retry else {}
            if exc.status == 401:
                headers["WWW-Authenticate"] = "Token"
            if exc.close:
                headers["Connection"] = "close"
            body = {**error_body(exc.message, code=exc.code), "request_id": request_id}
            return JSONResponse(body, exc.status, headers)

    return [Route(LISTEN_PATH, services.uploads.answered(listen), methods=["POST"])]


async def _transcribe(services: Services, request: Request, request_id: str) -> Response:
    key, _ = listen_credentials(request.headers.get("authorization"), ())
    if not services.authenticator.allows_any((key,)):
        raise _Refused(401, "INVALID_AUTH", "a valid API key is required")
    try:
        engine = services.serving.upload_engine()
    except UploadsUnavailable as exc:
        raise _Refused(503, "SERVICE_UNAVAILABLE", str(exc), retry=True) from None
    finals = engine.final_decoder
    try:
        params = parse_prerecorded_query(
            request.url.query,
            multilingual=engine.decoder.multilingual,
            model_name=engine.decoder.name,
        )
        check_speakers(params.diarize, engine.speakers is not None)
    except ListenParamError as exc:
        # No session to refuse: counted as an error sent, with the handshakes' reason.
        services.metrics.errors.labels(code="bad_query").inc()
        raise _Refused(400, "Bad Request", str(exc)) from None
    if request.headers.get("content-type", "").split(";")[0].strip() == "application/json":
        raise _Refused(
            400, "Bad Request", "kettle does not fetch URLs: send the audio as the request body"
        )
    try:
        done = await services.uploads.transcribe(request, engine, lambda body: _job(body, params))
    except Exception as exc:
        failure = upload_failure(exc, draining=services.draining)
        if failure is None:
            raise
        if failure.kind in ("failed", "unavailable") and isinstance(exc, KettleError):
            logger.warning("upload failed: %s", exc)
        code, message = _DEEPGRAM_ERRORS[failure.kind]
        raise _Refused(
            failure.status, code, message.format(exc), failure.retry, failure.close
        ) from None
    identity = ModelIdentity(finals.name, kettle_version())
    created = datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")
    answer = render_prerecorded(
        done.channels or done.transcript,
        params,
        request_id=request_id,
        created=created.replace("+00:00", "Z"),
        sha256=hashlib.sha256(done.body).hexdigest(),
        channels=len(done.channels) or (params.raw.channels if params.raw is not None else 1),
        model=identity,
    )
    return JSONResponse(answer)


async def _job(body: bytes, params: PrerecordedParams) -> UploadJob[None]:
    if not body:
        raise _Refused(400, "Bad Request", "the body is empty: send the audio as the body")
    config = PipelineConfig(
        word_timestamps=True, language=params.language, keyterms=params.keyterms
    )
    return UploadJob(
        None, body, config, params.raw, split_channels=params.multichannel, diarize=params.diarize
    )
