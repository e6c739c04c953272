"""The OpenAI Realtime route: `/v1/realtime?intent=transcription`, its credentials (a bearer
header or the ``openai-insecure-api-key.`` subprotocol) and its refusals (OpenAI's JSON error
object). A ``model`` in the query (LiveKit sends one to hosts other than OpenAI's) is ignored:
the session's ``transcription.model`` is what kettle checks (openai_realtime_settings).

``kettle_revisions=true`` (a kettle extension; ``false`` is the default) asks for corrections:
where a later refinement reads one of a completed item's finals otherwise, another
``conversation.item.input_audio_transcription.completed`` event for the same item and content
index carries the corrected whole transcript. Any other value is refused (400)."""

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
from kettle.streaming.protocols.openai_realtime_settings import FORMATS, RealtimeSettings

PATH = "/v1/realtime"
SUBPROTOCOL = "realtime"
KEY_SUBPROTOCOL_PREFIX = "openai-insecure-api-key."
REVISIONS_PARAM = "kettle_revisions"  # kettle's extension: corrections of completed items


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
    settings = RealtimeSettings(revisions=revisions_asked(request))

    def make_codec(context: CodecContext) -> RealtimeCodec:
        return RealtimeCodec(context, settings)

    return Prepared(make_codec, choose_subprotocol(request, (SUBPROTOCOL,)))


def revisions_asked(request: HandshakeRequest) -> bool:
    """The ``kettle_revisions`` query parameter: true or false (any case), default false."""
    raw = request.query_value(REVISIONS_PARAM)
    if raw is None:
        return False
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise HandshakeRefused(400, f"{REVISIONS_PARAM} must be true or false, not {raw!r}")
    return value == "true"


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
