"""Plain HTTP GETs: /healthz, /readyz, /metrics, /v1/info, and the page's static assets.

`GET /v1/info` describes the server to the page and to clients: model, languages, limits
(the uploads' too), the WebSocket protocols it speaks and its REST APIs' endpoints. It needs
no key; a request that presents one (Authorization: Bearer) gets 401 when that key is wrong,
so the page can check its key without opening a session.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from kettle.streaming.protocols.handshake import bearer_token
from kettle.streaming.server.catalog import rest_apis, websocket_protocols
from kettle.streaming.server.metrics import METRICS_CONTENT_TYPE, encoder_cache_bytes
from kettle.streaming.server.services import Services
from kettle.transcribe.model.languages import LANGUAGES
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

INFO_PATH = "/v1/info"
_NO_CACHE = {"Cache-Control": "no-cache"}

_ASSET_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".ico": "image/x-icon",
    ".png": "image/png",
    ".json": "application/json",
    ".webmanifest": "application/manifest+json",
    ".wasm": "application/wasm",
    ".txt": "text/plain; charset=utf-8",
}
_ASSET_SEGMENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")

# The page runs only its own files: no inline script or style, no plug-ins, no framing; it
# talks to this server only ('self' covers ws:// and wss:// to the same host and port).
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; media-src 'self' blob:; worker-src 'self'; object-src 'none'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
PAGE_SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def _text(status: int, text: str, headers: dict[str, str] | None = None) -> Response:
    return PlainTextResponse(text + "\n", status, {**_NO_CACHE, **(headers or {})})


def info(services: Services) -> dict[str, Any]:
    """The body of GET /v1/info."""
    cfg = services.config
    model = services.model_info
    languages: list[str] | None
    if model is None:
        languages = None
    elif model.multilingual:
        languages = sorted(LANGUAGES)
    else:
        languages = ["en"]
    return {
        "service": "kettle",
        "ready": services.ready,
        "model": model.name if model else None,
        "final_model": model.final_model if model else None,
        "refine_model": model.refine_model if model else None,
        "multilingual": model.multilingual if model else None,
        "languages": languages,
        # Whether kettle v1's "diarize" (and the APIs' speaker options) can be asked for.
        "speakers": model.speakers if model else None,
        "auth": {"required": services.authenticator.required},
        "limits": {
            "max_sessions": cfg.max_sessions,
            "max_frame_bytes": cfg.max_frame_bytes,
            "max_message_bytes": cfg.max_message_bytes,
            "idle_timeout_s": cfg.idle_timeout_s,
            "deepgram_audio_timeout_s": cfg.deepgram_audio_timeout_s,
            "max_session_s": cfg.max_session_s,
            "max_messages_per_second": cfg.max_messages_per_second,
            "audio_rate_x_realtime": cfg.audio_rate,
            "audio_burst_s": cfg.audio_burst_s,
            "max_backlog_s": cfg.max_backlog_s,
            "max_upload_bytes": cfg.max_upload_bytes,
            "max_uploads": cfg.max_uploads,
            "upload_body_timeout_s": cfg.upload_body_timeout_s,
            "upload_body_grace_s": cfg.upload_body_grace_s,
            "upload_min_bytes_per_s": cfg.upload_min_bytes_per_s,
            "upload_budget_bytes": services.uploads.budget.limit,
        },
        "protocols": {route.name: dict(route.info) for route in websocket_protocols()},
        "rest": {name: dict(api) for name, api in rest_apis().items()},
    }


def routes(services: Services) -> list[BaseRoute]:
    async def healthz(request: Request) -> Response:
        return _text(200, "ok")

    async def readyz(request: Request) -> Response:
        if services.ready:
            return _text(200, "ready")
        return _text(503, services.unready_reason())

    async def metrics(request: Request) -> Response:
        if services.config.metrics_require_key and not services.authenticator.allows_any(
            (bearer_token(request.headers.get("authorization")), request.query_params.get("token"))
        ):
            return _text(401, "a valid API key is required", {"WWW-Authenticate": "Bearer"})
        services.metrics.sessions_active.set(services.gate.active)
        engine = services.engine
        if engine is not None:
            services.metrics.engine_streams.set(engine.streams_open)
            services.metrics.encoder_cache_bytes.set(
                encoder_cache_bytes((engine.decoder, engine.final_decoder, engine.refine_decoder))
            )
        return Response(services.metrics.render(), 200, _NO_CACHE, METRICS_CONTENT_TYPE)

    async def info_endpoint(request: Request) -> Response:
        presented = bearer_token(request.headers.get("authorization"))
        if presented is not None and not services.authenticator.allows_any((presented,)):
            return JSONResponse(
                {"error": {"message": "the API key is not valid", "code": "unauthorized"}},
                401,
                {**_NO_CACHE, "WWW-Authenticate": "Bearer"},
            )
        return JSONResponse(info(services), 200, _NO_CACHE)

    return [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route(INFO_PATH, info_endpoint, methods=["GET"]),
    ]


def asset_routes(services: Services) -> list[BaseRoute]:
    """The page: `/` is index.html; other files of the web folder by name. Mounted last."""
    root = services.web_root

    async def asset(request: Request) -> Response:
        return _asset(root, request.url.path)

    return [Route("/{path:path}", asset, methods=["GET"])]


def _asset(root: Path, path: str) -> Response:
    name = "index.html" if path in ("/", "") else path.lstrip("/")
    segments = name.split("/")
    content_type = _ASSET_TYPES.get(Path(name).suffix.lower())
    if content_type is None or not all(_ASSET_SEGMENT.match(s) for s in segments):
        return _text(404, "not found")
    target = (root / name).resolve()
    if not target.is_relative_to(root) or not target.is_file():
        return _text(404, "not found")
    try:
        body = target.read_bytes()
    except OSError:
        return _text(404, "not found")
    return Response(body, 200, {**_NO_CACHE, **PAGE_SECURITY_HEADERS}, content_type)
