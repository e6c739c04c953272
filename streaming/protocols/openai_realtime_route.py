"""The OpenAI Realtime route: `/v1/realtime?intent=transcription`, its credentials (a bearer
header or the ``openai-insecure-api-key.`` subprotocol) and its refusals (OpenAI's JSON error
object). A ``model`` in the query (LiveKit sends one to hosts other than OpenAI's) is ignored:
the session's ``transcription.model`` is what kettle checks (openai_realtime_settings)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from kettle.streaming.protocols.base import CodecContext, ModelInfo
from kettle.streaming.protocols.handshake import (
    HandshakeRefused,
    HandshakeRequest,
    Prepared,
    ProtocolRoute,
    bearer_credentials,
    choose_subprotocol,
    subprotocol_credentials,
)
from kettle.streaming.protocols.openai_realtime import RealtimeCodec
from kettle.streaming.protocols.openai_realtime_settings import FORMATS

PATH = "/v1/realtime"
SUBPROTOCOL = "realtime"
KEY_SUBPROTOCOL_PREFIX = "openai-insecure-api-key."


def credentials(request: HandshakeRequest) -> Sequence[str | None]:
    return (
        bearer_credentials(request),
        subprotocol_credentials(request, KEY_SUBPROTOCOL_PREFIX),
    )


def prepare(request: HandshakeRequest, model: ModelInfo | None) -> Prepared:
    intent = request.query_value("intent")
    if intent is not None and intent != "transcription":
        raise HandshakeRefused(
            400, f"kettle serves transcription sessions only (intent=transcription), not {intent!r}"
        )

    def make_codec(context: CodecContext) -> RealtimeCodec:
        return RealtimeCodec(context)

    return Prepared(make_codec, choose_subprotocol(request, (SUBPROTOCOL,)))


def refusal(status: int, message: str) -> tuple[bytes, str]:
    """OpenAI's clients read a JSON error object from a refused handshake."""
    code = {401: "invalid_api_key", 503: "service_unavailable"}.get(status, "invalid_request")
    body = {
        "error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}
    }
    return json.dumps(body).encode(), "application/json"


INFO: dict[str, Any] = {
    "path": PATH,
    "query": {"intent": "transcription"},
    "subprotocol": SUBPROTOCOL,
    "key_subprotocol_prefix": KEY_SUBPROTOCOL_PREFIX,
    "formats": list(FORMATS),
}

ROUTE = ProtocolRoute(
    path=PATH,
    name="openai_realtime",
    credentials=credentials,
    prepare=prepare,
    info=INFO,
    refusal=refusal,
)
