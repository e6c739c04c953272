"""The wire codec of docs/protocol.md: client messages in, server messages out. No I/O.

Parsing turns a client text message (or the handshake's query string) into a typed value or
raises ``ProtocolError`` carrying the protocol's error code and a message meant for the peer.
Encoding turns engine events into the JSON objects the protocol names, with seconds at
millisecond resolution.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qs

from kettle.streaming.core.events import (
    Done,
    Error,
    Final,
    Partial,
    Revision,
    samples_to_seconds,
)
from kettle.streaming.protocols.base import compact_json
from kettle.streaming.protocols.error_codes import BAD_MESSAGE
from kettle.streaming.protocols.fields import FieldError
from kettle.streaming.protocols.kettle_v1 import fields
from kettle.transcribe.errors import KettleError

PROTOCOL_VERSION = 1
ENCODINGS = fields.ENCODINGS
MIN_SAMPLE_RATE = fields.MIN_SAMPLE_RATE
MAX_SAMPLE_RATE = fields.MAX_SAMPLE_RATE
MAX_SPEAKERS = fields.MAX_SPEAKERS
CHANNELS = (1, 2)
BYTES_PER_SAMPLE = {"pcm_s16le": 2, "pcm_f32le": 4, "mulaw": 1}
DEFAULT_SAMPLE_RATE = 16000
MULAW_DEFAULT_SAMPLE_RATE = 8000

# The error codes (docs/protocol.md#error, plus kettle's additions; clients ignore unknown
# non-fatal codes) are kettle's own, shared by every protocol: protocols.error_codes.

# The fields of `config` that are settings (all but `type`), in the table's order.
CONFIG_FIELDS = tuple(f.name for f in fields.CONFIG.fields if f.name != "type")
_TYPE = frozenset({"type"})


class ProtocolError(KettleError):
    """A client message or query value the protocol refuses; ``code`` is the error code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class ConfigUpdate:
    """The fields one `config` message (or the query string) gives; None means not given.

    ``language_given`` tells an explicit null language (model default) from an absent one.
    """

    encoding: str | None = None
    sample_rate: int | None = None
    channels: int | None = None
    language: str | None = None
    language_given: bool = False
    partials: bool | None = None
    word_timestamps: bool | None = None
    revisions: bool | None = None
    diarize: bool | None = None
    max_speakers: int | None = None


@dataclass(frozen=True)
class StreamSettings:
    """A session's settings after the query string and any accepted `config` messages."""

    encoding: str = "pcm_s16le"
    # None: not given by the client, so the encoding's default applies (8 kHz for mulaw).
    requested_sample_rate: int | None = None
    channels: int = 1
    language: str | None = None
    partials: bool = True
    word_timestamps: bool = False
    revisions: bool = False
    diarize: bool = False
    max_speakers: int = MAX_SPEAKERS

    @property
    def sample_rate(self) -> int:
        if self.requested_sample_rate is not None:
            return self.requested_sample_rate
        return MULAW_DEFAULT_SAMPLE_RATE if self.encoding == "mulaw" else DEFAULT_SAMPLE_RATE

    @property
    def frame_bytes(self) -> int:
        """Bytes of one sample frame (one sample of every channel)."""
        return BYTES_PER_SAMPLE[self.encoding] * self.channels

    def apply(self, update: ConfigUpdate) -> StreamSettings:
        """The settings with every field the update gives replaced; later values win."""
        changes: dict[str, Any] = {}
        if update.encoding is not None:
            changes["encoding"] = update.encoding
        if update.sample_rate is not None:
            changes["requested_sample_rate"] = update.sample_rate
        if update.channels is not None:
            changes["channels"] = update.channels
        if update.language_given:
            changes["language"] = update.language
        if update.partials is not None:
            changes["partials"] = update.partials
        for name in ("word_timestamps", "revisions", "diarize", "max_speakers"):
            if getattr(update, name) is not None:
                changes[name] = getattr(update, name)
        return replace(self, **changes)

    def check_model(self, multilingual: bool, model: str, speakers: bool = False) -> None:
        """Refuse a language the model cannot transcribe (English-only models know only en)."""
        if self.language is not None and not multilingual and self.language != "en":
            raise ProtocolError(
                BAD_MESSAGE,
                f"language {self.language!r} is not available: model {model} is English-only",
            )
        if self.diarize and not speakers:
            raise ProtocolError(
                BAD_MESSAGE,
                "diarize is not available: this server has no speaker model (kettle[diarize])",
            )


# -- client messages ------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigMessage:
    update: ConfigUpdate


@dataclass(frozen=True)
class FinalizeMessage:
    pass


@dataclass(frozen=True)
class StopMessage:
    pass


@dataclass(frozen=True)
class KeepaliveMessage:
    pass


ClientMessage = ConfigMessage | FinalizeMessage | StopMessage | KeepaliveMessage

_SIMPLE: dict[str, ClientMessage] = {
    "finalize": FinalizeMessage(),
    "stop": StopMessage(),
    "keepalive": KeepaliveMessage(),
}


def parse_client_message(text: str) -> ClientMessage:
    """One client text message, or ProtocolError(bad_message, why)."""
    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ProtocolError(BAD_MESSAGE, f"message is not valid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise ProtocolError(BAD_MESSAGE, "message must be a JSON object")
    return parse_message_object(obj)


def parse_message_object(obj: Mapping[str, Any]) -> ClientMessage:
    """A client message's JSON object, checked against its type's table
    (``kettle_v1_fields.MESSAGES``); fields the protocol does not name are ignored, so that
    newer clients still work."""
    kind = obj.get("type")
    if not isinstance(kind, str):
        raise ProtocolError(BAD_MESSAGE, "message needs a string field 'type'")
    if kind not in fields.MESSAGES:
        known = ", ".join(fields.MESSAGES)
        raise ProtocolError(BAD_MESSAGE, f"unknown message type {kind!r} (expected {known})")
    if kind == "config":
        return ConfigMessage(parse_config_fields(obj))
    fields.MESSAGES[kind].check_json(obj, ignore=_TYPE)  # (only `type`, read above)
    return _SIMPLE[kind]


def parse_config_fields(obj: Mapping[str, Any]) -> ConfigUpdate:
    """Validate every settings field of a config object against ``kettle_v1_fields.CONFIG``;
    any invalid one refuses them all, and the refusal names each."""
    values, errors = fields.CONFIG.parse_json(obj, ignore=_TYPE)
    if errors:
        raise ProtocolError(
            BAD_MESSAGE, "config refused, nothing changed: " + "; ".join(map(str, errors))
        )
    return _update(values)


def _update(values: Mapping[str, Any]) -> ConfigUpdate:
    return ConfigUpdate(
        encoding=values.get("encoding"),
        sample_rate=values.get("sample_rate"),
        channels=values.get("channels"),
        language=values.get("language"),
        language_given="language" in values,
        partials=values.get("partials"),
        word_timestamps=values.get("word_timestamps"),
        revisions=values.get("revisions"),
        diarize=values.get("diarize"),
        max_speakers=values.get("max_speakers"),
    )


@dataclass(frozen=True)
class QueryParams:
    token: str | None
    update: ConfigUpdate


def parse_query(query: str) -> QueryParams:
    """The handshake's query string (``kettle_v1_fields.QUERY``); ProtocolError(bad_message,
    why) means HTTP 400, naming every bad parameter.

    Values arrive as strings, so numbers are parsed here; `language=` (empty) or
    `language=null` ask for the model default. Unknown parameters are ignored.
    """
    try:
        pairs = parse_qs(query, keep_blank_values=True, strict_parsing=False, errors="strict")
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(BAD_MESSAGE, f"query string cannot be decoded: {exc}") from None
    return query_params(pairs)


def query_params(pairs: Mapping[str, list[str]]) -> QueryParams:
    """The parameters of a decoded query string (each name's values, in order)."""
    values: dict[str, Any] = {}
    errors: list[str] = []
    for spec in fields.QUERY.fields:
        if spec.name not in pairs:
            continue
        given = pairs[spec.name]
        if len(given) > 1:
            errors.append(f"{spec.name}: given more than once")
            continue
        try:
            values[spec.name] = spec.parse_query(given[0])
        except FieldError as exc:
            errors.append(str(exc))
    if errors:
        raise ProtocolError(BAD_MESSAGE, "; ".join(errors))
    token = values.pop("token", None)
    return QueryParams(token=token, update=_update(values))


# -- server messages ------------------------------------------------------------------------


def _ms(seconds: float) -> float:
    """Seconds rounded to the millisecond (the protocol's resolution)."""
    return round(float(seconds), 3) if math.isfinite(seconds) else 0.0


def encode_ready(
    session_id: str,
    model: str,
    sample_rate: int,
    *,
    multilingual: bool | None = None,
    final_model: str | None = None,
) -> str:
    obj: dict[str, Any] = {
        "type": "ready",
        "session_id": session_id,
        "protocol": PROTOCOL_VERSION,
        "model": model,
        "sample_rate": sample_rate,
    }
    if multilingual is not None:
        obj["multilingual"] = multilingual  # addition: lets a page offer a language choice
    if final_model is not None:
        obj["final_model"] = final_model  # addition: a second model refines the finals
    return compact_json(obj)


def partial_fields(event: Partial) -> dict[str, Any]:
    return {
        "type": "partial",
        "utterance": event.utterance,
        "start": samples_to_seconds(event.start),
        "end": samples_to_seconds(event.end),
        "text": event.text,
        "stable": event.stable,
    }


def final_fields(event: Final | Revision, *, word_timestamps: bool) -> dict[str, Any]:
    """A final's fields, or a revision's (the same shape, with its own type)."""
    obj: dict[str, Any] = {
        "type": "revision" if isinstance(event, Revision) else "final",
        "utterance": event.utterance,
        "start": samples_to_seconds(event.start),
        "end": samples_to_seconds(event.end),
        "text": event.text,
    }
    speaker = {} if event.speaker is None else {"speaker": event.speaker}
    if word_timestamps:
        obj["words"] = [
            {
                "word": w.word,
                "start": _ms(w.start),
                "end": _ms(w.end),
                "probability": _ms(w.probability),
            }
            | speaker
            for w in event.words
        ]
    obj["language"] = event.language
    return obj | speaker


def error_fields(code: str, message: str, *, fatal: bool = False) -> dict[str, Any]:
    obj: dict[str, Any] = {"type": "error", "code": code, "message": message}
    if fatal:
        obj["fatal"] = True
    return obj


def done_fields(audio_seconds: float, utterances: int, reason: str | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "type": "done",
        "audio_seconds": _ms(audio_seconds),
        "utterances": utterances,
    }
    if reason is not None:
        obj["reason"] = reason
    return obj


def encode_partial(event: Partial) -> str:
    return compact_json(partial_fields(event))


def encode_revision(event: Revision, *, word_timestamps: bool) -> str:
    return compact_json(final_fields(event, word_timestamps=word_timestamps))


def encode_final(event: Final, *, word_timestamps: bool) -> str:
    return compact_json(final_fields(event, word_timestamps=word_timestamps))


def encode_error(code: str, message: str, *, fatal: bool = False) -> str:
    return compact_json(error_fields(code, message, fatal=fatal))


def encode_error_event(event: Error) -> str:
    return encode_error(event.code, event.message, fatal=event.fatal)


def encode_done(audio_seconds: float, utterances: int, reason: str | None = None) -> str:
    return compact_json(done_fields(audio_seconds, utterances, reason))


def audio_seconds(input_frames: int, sample_rate: int) -> float:
    """done.audio_seconds: sample frames received over the input rate, to the millisecond."""
    return round(input_frames / sample_rate, 3)


def encode_done_event(event: Done, *, input_frames: int, sample_rate: int) -> str:
    return encode_done(audio_seconds(input_frames, sample_rate), event.utterances, event.reason)
