"""The OpenAI Realtime route: `/v1/realtime?intent=transcription`, its credentials (a bearer
header or the ``openai-insecure-api-key.`` subprotocol) and its refusals (OpenAI's JSON error
object). A ``model`` in the query (LiveKit sends one to hosts other than OpenAI's) is ignored:
the session's ``transcription.model`` is what kettle checks (openai_realtime_settings).

``kettle_revisions=true`` (a kettle extension; ``false`` is the default) asks for corrections:
where a later refinement reads one of a completed item's finals otherwise, another
``conversation.item.input_audio_transcription.completed`` event for the same item and content
index carries the corrected whole transcript. Any other value is refused (400).

The query's parameters are read through their table (openai_fields.REALTIME_QUERY: ``intent``,
``model``, ``kettle_revisions``); others are ignored. A refused handshake counts under
``kettle_sessions_rejected{reason="bad_query"}``."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import parse_qs

from kettle.streaming.protocols.base import CodecContext, ModelInfo
from kettle.streaming.protocols.fields import FieldError
from kettle.streaming.protocols.handshake import (
    HandshakeRefused,
    HandshakeRequest,
    Prepared,
    ProtocolRoute,
    bearer_credentials,
    choose_subprotocol,
    subprotocol_credentials,
)
from kettle.streaming.protocols.openai.fields import REALTIME_QUERY
from kettle.streaming.protocols.openai.realtime import RealtimeCodec
from kettle.streaming.protocols.openai.realtime_settings import FORMATS, RealtimeSettings

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
    settings = settings_from_query(query_values(request))

    def make_codec(context: CodecContext) -> RealtimeCodec:
        return RealtimeCodec(context, settings)

    return Prepared(make_codec, choose_subprotocol(request, (SUBPROTOCOL,)))


def query_values(request: HandshakeRequest) -> dict[str, str]:
    """The query's parameters (each one's first value), read leniently."""
    parsed = parse_qs(request.query, keep_blank_values=True, errors="replace")
    return {name: got[0] for name, got in parsed.items() if got}


def settings_from_query(query: Mapping[str, str]) -> RealtimeSettings:
    """The session's settings from the query, every parameter read through its row
    (openai_fields.REALTIME_QUERY); a bad one refuses the handshake (400)."""
    got: dict[str, Any] = {}
    for spec in REALTIME_QUERY.fields:
        raw = query.get(spec.name)
        if raw is None:
            continue
        try:
            got[spec.name] = spec.parse_query(raw)
        except FieldError as exc:
            if spec.name == "intent":
                message = (
                    f"kettle serves transcription sessions only (intent=transcription), not {raw!r}"
                )
                raise HandshakeRefused(400, message) from None
            raise HandshakeRefused(400, f"Invalid value for '{spec.name}': {exc}.") from None
    # ``model`` (the realtime model a realtime session names) is read and not used.
    return RealtimeSettings(revisions=bool(got.get(REVISIONS_PARAM, False)))


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
