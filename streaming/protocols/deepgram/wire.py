"""Deepgram's wire vocabulary shared by the live codec and the prerecorded route: query
parameters, credentials, model identity and word fields (the last, and the parameter error and
language rule, are the shared protocols.words' and protocols.params', named here too). No I/O.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any
from urllib.parse import parse_qs

from kettle.streaming.core.session import SessionConfig
from kettle.streaming.protocols.deepgram.fields import LIVE_QUERY, MAX_ENDPOINTING_MS
from kettle.streaming.protocols.fields import FieldError, FieldTable
from kettle.streaming.protocols.handshake import bearer_token
from kettle.streaming.protocols.params import ParamError, parse_language
from kettle.streaming.protocols.words import plain_transcript, spread_words, word_fields
from kettle.transcribe.errors import ConfigError
from kettle.transcribe.model import keyterms

LISTEN_PATH = "/v1/listen"
# Deepgram's encoding names -> kernels.pcm's.
ENCODINGS = {"linear16": "pcm_s16le", "mulaw": "mulaw", "alaw": "alaw"}
# Deepgram's encodings whose streams describe themselves: read as a container is.
SELF_DESCRIBING = ("ogg-opus", "flac")
MIN_ENDPOINTING_MS = 200
SUBPROTOCOL = "token"


def kettle_version() -> str:
    try:
        return metadata.version("kettle")
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a source tree
        return "0"


def request_id(session_id: str) -> str:
    """Deepgram's request ids are UUIDs: the session id in that form when it is one."""
    try:
        return str(uuid.UUID(session_id))
    except ValueError:
        return session_id


# Deepgram's parsers' name for the shared error (what the other APIs' parsers raise too).
ListenParamError = ParamError


@dataclass(frozen=True)
class ModelIdentity:
    """The model that serves, as Deepgram's metadata names it."""

    name: str
    version: str
    arch: str = "whisper"

    @property
    def uuid(self) -> str:
        # Stable per model name, so a client can tell which model served without a registry.
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"kettle:model/{self.name}"))

    def info(self) -> dict[str, str]:
        return {"name": self.name, "version": self.version, "arch": self.arch}


@dataclass(frozen=True)
class ListenParams:
    """The settings of one live connection, from the handshake's query string."""

    encoding: str | None  # Deepgram's name (linear16, mulaw, alaw); None: a container
    sample_rate: int  # (a container's own rate is read from it)
    channels: int = 1
    multichannel: bool = False  # each channel transcribed on its own
    model: str | None = None
    language: str | None = "en"  # ISO 639-1, or None to detect (``language=multi``)
    interim_results: bool = False
    endpointing_ms: int | None = None  # None: kettle's default endpoint silence
    endpointing: bool = True  # false: results are never speech_final
    utterance_end_ms: int | None = None
    vad_events: bool = False
    punctuate: bool = False
    smart_format: bool = False
    keyterms: tuple[str, ...] = ()  # keyterm and keywords, keyterms.normalize's form
    diarize: bool = False  # every final word carries its speaker

    @property
    def pcm_encoding(self) -> str | None:
        """The encoding's name in kernels.pcm (None: a container)."""
        return None if self.encoding is None else ENCODINGS[self.encoding]

    @property
    def frame_bytes(self) -> int:
        """Bytes per sample frame of raw audio (1 for a container: it has none)."""
        if self.encoding is None:
            return 1
        return (2 if self.encoding == "linear16" else 1) * self.channels

    @property
    def streams(self) -> int:
        """Transcripts kept: one per channel with multichannel, else one."""
        return self.channels if self.multichannel else 1

    @property
    def formatted(self) -> bool:
        """Whisper's punctuated, formatted text (else Deepgram's plain lowercase words)."""
        return self.punctuate or self.smart_format

    def session_config(self) -> SessionConfig:
        extra: dict[str, Any] = {}
        if self.endpointing_ms is not None:
            ms = min(max(self.endpointing_ms, MIN_ENDPOINTING_MS), MAX_ENDPOINTING_MS)
            extra["endpoint_silence_ms"] = ms
        return SessionConfig(
            language=self.language,
            partials=self.interim_results,
            word_timestamps=True,  # every final Results carries words
            vad_events=True,
            keyterms=self.keyterms,
            diarize=self.diarize,
            **extra,
        )


def parse_flag(name: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value == "true":
        return True
    if value == "false":
        return False
    raise ListenParamError(f"{name} must be true or false, not {raw!r}")


def parse_int(name: str, raw: str, low: int, high: int) -> int:
    text = raw.strip()
    if not (text.isascii() and text.isdigit()):
        raise ListenParamError(f"{name} must be an integer, not {raw!r}")
    value = int(text)
    if not low <= value <= high:
        raise ListenParamError(f"{name} must be within {low}..{high}, not {value}")
    return value


def query_values(query: str, reads: Collection[str]) -> dict[str, str]:
    """The parameters ``reads`` names, one value each; ListenParamError when the query
    cannot be decoded or gives one of them twice with different values. The others are left
    out. (AssemblyAI's query; Deepgram's are read through their tables: `query_lists`.)"""
    one: dict[str, str] = {}
    for name, values in query_lists(query).items():
        if name not in reads:
            continue
        if len(set(values)) > 1:
            raise ListenParamError(f"{name} is given more than once with different values")
        one[name] = values[0]
    return one


def query_lists(query: str) -> dict[str, list[str]]:
    """Every parameter of a query string with its values in order; ListenParamError when it
    cannot be decoded. ``encoding``'s case is not significant (``ALAW`` is ``alaw``)."""
    try:
        pairs = parse_qs(query, keep_blank_values=True, errors="strict")
    except (UnicodeDecodeError, ValueError) as exc:
        raise ListenParamError(f"query string cannot be decoded: {exc}") from None
    if "encoding" in pairs:
        pairs["encoding"] = [v.strip().lower() for v in pairs["encoding"]]
    return pairs


def checked_query(values: Mapping[str, Sequence[str]], table: FieldTable) -> dict[str, Any]:
    """The fields of a decoded query (`query_lists`) that ``table`` names, typed and checked
    against it (`FieldTable.parse_query`): a repeatable one's values as a tuple. Nothing else
    is read: parameters the table lacks are ignored. ListenParamError (HTTP 400) names what
    is wrong."""
    try:
        return table.parse_query(values)
    except FieldError as exc:
        raise ListenParamError(str(exc)) from None


def query_keyterms(fields: Mapping[str, Any]) -> tuple[str, ...]:
    """Every ``keyterm`` (Nova-3: plain terms) then every ``keywords`` (Nova-2:
    ``term:intensifier``, the intensifier dropped) of checked fields, as one normalized tuple:
    Whisper takes both the same way. ListenParamError past keyterms' limits."""
    try:
        terms = keyterms.normalize(fields.get("keyterm", ()))
        weighted = keyterms.normalize(fields.get("keywords", ()), weighted=True)
        return keyterms.normalize((*terms, *weighted))
    except ConfigError as exc:
        raise ListenParamError(str(exc)) from None


def query_flag(fields: Mapping[str, Any], name: str) -> bool:
    """A checked true/false parameter; absent is false."""
    return bool(fields.get(name, False))


def query_diarize(fields: Mapping[str, Any]) -> bool:
    """``diarize=true``, or ``diarize_model`` (one of the documented versions: Deepgram's
    newer way to ask)."""
    return query_flag(fields, "diarize") or "diarize_model" in fields


NO_SPEAKER_MODEL = "diarize is not available: this server has no speaker model (kettle[diarize])"


def check_speakers(diarize: bool, speakers: bool) -> None:
    """ListenParamError (HTTP 400) when diarize is asked of a server with no speaker model."""
    if diarize and not speakers:
        raise ListenParamError(NO_SPEAKER_MODEL)


def query_language(
    fields: Mapping[str, Any], *, multilingual: bool, model_name: str, detect: bool = False
) -> str | None:
    """``language`` ("en" when absent; None to detect, as ``detect`` asks too), which the
    model must know: an English-only model takes English only."""
    if detect:
        return None  # ``language`` is then not used
    language = parse_language(fields["language"]) if "language" in fields else "en"
    if language not in (None, "en") and not multilingual:
        raise ListenParamError(f"language {language!r}: model {model_name} is English-only")
    return language


def query_encoding(fields: Mapping[str, Any], *, containers: bool = True) -> tuple[str | None, int]:
    """``encoding`` and ``sample_rate`` (checked fields: the table bounds the rate), one rule
    for every Deepgram endpoint: raw audio (linear16, mulaw, alaw) needs both, as Deepgram
    documents (its bytes say neither). Without ``encoding``, or with a self-describing one
    (ogg-opus, flac), the audio is in a container whose header says its rate, and
    ``sample_rate`` is not used; an endpoint that takes no containers (``containers`` False)
    refuses those encodings. Returns (the raw encoding or None, the sample rate: 16000 for a
    container); ListenParamError (HTTP 400) for a documented encoding kettle cannot decode,
    and for raw audio without its rate."""
    encoding = fields.get("encoding")
    if containers and (encoding is None or encoding in SELF_DESCRIBING):
        return None, 16000
    if encoding not in ENCODINGS:
        if containers:
            accepted = f"{', '.join((*ENCODINGS, *SELF_DESCRIBING))} (or absent for a container)"
        else:
            accepted = f"{', '.join(ENCODINGS)} (this endpoint takes raw audio, not containers)"
        raise ListenParamError(f"encoding must be one of {accepted}, not {encoding!r}")
    if "sample_rate" not in fields:
        raise ListenParamError(
            f"sample_rate is required with encoding={encoding}: raw audio does not say its rate"
        )
    return encoding, int(fields["sample_rate"])


def refuse_redact(fields: Mapping[str, Any]) -> None:
    """``redact`` asks for text with numbers, card data or SSNs removed: kettle cannot, and
    ignoring it would hand back the very text the client must not store (Flux refuses it too)."""
    asked = [v for v in fields.get("redact", ()) if v != "false"]
    if asked:
        raise ListenParamError(
            f"redact={asked[0]} is not supported: this server cannot redact transcripts"
        )


def parse_listen_query(query: str, *, multilingual: bool, model_name: str) -> ListenParams:
    """The handshake's query string; ListenParamError (HTTP 400) names what is wrong."""
    return listen_params(query_lists(query), multilingual=multilingual, model_name=model_name)


def listen_params(
    values: Mapping[str, Sequence[str]], *, multilingual: bool, model_name: str
) -> ListenParams:
    """A decoded handshake query (`query_lists`), checked against ``LIVE_QUERY``: every
    documented parameter is typed and bounded there, those kettle does not implement
    (numerals, tag, ...) are then ignored, as Deepgram ignores those a model does not
    support (``redact`` is refused), and undocumented ones are never read. Without
    ``encoding`` the audio is in a container (its header says the rest), as Deepgram takes
    it; raw audio needs ``sample_rate`` too (`query_encoding`)."""
    fields = checked_query(values, LIVE_QUERY)
    refuse_redact(fields)
    encoding, rate = query_encoding(fields)
    language = query_language(fields, multilingual=multilingual, model_name=model_name)
    endpointing, endpointing_ms = True, None
    if "endpointing" in fields:
        value = fields["endpointing"]
        if value == "false":
            endpointing = False
        elif value != "true":
            endpointing_ms = int(value)
    flags = {
        name: query_flag(fields, name)
        for name in ("interim_results", "vad_events", "punctuate", "smart_format")
    }
    return ListenParams(
        keyterms=query_keyterms(fields),
        encoding=encoding,
        sample_rate=rate,
        channels=fields.get("channels", 1),
        multichannel=query_flag(fields, "multichannel"),
        model=fields.get("model"),
        language=language,
        diarize=query_diarize(fields),
        endpointing_ms=endpointing_ms,
        endpointing=endpointing,
        utterance_end_ms=fields.get("utterance_end_ms"),
        **flags,
    )


def message_type(obj: Mapping[str, Any], table: FieldTable) -> str:
    """A client message's ``type``, checked against ``table`` (LIVE_MESSAGE, FLUX_MESSAGE):
    FieldError when it is missing, not a string, or not one of the documented types."""
    table.check_json(obj)
    return str(obj["type"])


def listen_credentials(
    authorization: str | None, subprotocols: Sequence[str]
) -> tuple[str | None, str | None]:
    """(the API key presented, the subprotocol to accept) for a Deepgram handshake.

    ``Authorization: Token KEY`` (the SDK's API key) or ``Bearer KEY`` (its access token),
    else the subprotocol pair ``token``, KEY that browsers use (``token`` is then accepted).
    """
    if authorization:
        scheme, _, credentials = authorization.strip().partition(" ")
        if scheme.lower() == "token" and credentials.strip():
            return credentials.strip(), None
        key = bearer_token(authorization)
        if key is not None:
            return key, None
    offered = [p.strip() for p in subprotocols]
    if len(offered) >= 2 and offered[0].lower() == SUBPROTOCOL and offered[1]:
        return offered[1], SUBPROTOCOL
    return None, None


__all__ = [
    "ENCODINGS",
    "LISTEN_PATH",
    "NO_SPEAKER_MODEL",
    "ListenParamError",
    "ListenParams",
    "ModelIdentity",
    "check_speakers",
    "checked_query",
    "kettle_version",
    "listen_credentials",
    "listen_params",
    "message_type",
    "parse_flag",
    "parse_int",
    "parse_language",
    "parse_listen_query",
    "plain_transcript",
    "query_diarize",
    "query_encoding",
    "query_flag",
    "query_keyterms",
    "query_language",
    "query_lists",
    "request_id",
    "spread_words",
    "word_fields",
]
