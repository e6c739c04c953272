"""AssemblyAI Universal-Streaming v3's handshake vocabulary: the query parameters of
``/v3/ws``, the credentials, the speech-model families, the silence settings that become
kettle's endpoint, and the client messages. Everything a client sends is checked against
``assemblyai_fields``' tables. No I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qs

from kettle.streaming.core.session import SessionConfig
from kettle.streaming.protocols.assemblyai import fields
from kettle.streaming.protocols.fields import STRINGS, FieldError, FieldSpec
from kettle.streaming.protocols.handshake import bearer_token
from kettle.streaming.protocols.params import ParamError, parse_language
from kettle.transcribe.errors import ConfigError
from kettle.transcribe.model import keyterms

PATH = "/v3/ws"
# AssemblyAI's encoding names -> kernels.pcm's.
ENCODINGS = {"pcm_s16le": "pcm_s16le", "pcm_mulaw": "mulaw"}
# Universal-3 Pro and its releases: formatting is built in (one formatted end-of-turn Turn).
U3_PREFIXES = ("u3-", "universal-3")
UNIVERSAL_MODELS = frozenset(
    {"universal-streaming-english", "universal-streaming-multilingual", "whisper-rt"}
)
DEFAULT_MODEL = "universal-streaming-english"  # the API reference's default
# AssemblyAI's documented defaults, per family: (min_turn_silence, max_turn_silence) in ms.
SILENCE_DEFAULTS = {False: (400, 1280), True: (100, 1000)}
DEFAULT_THRESHOLD = 0.4
# Whisper transcribes word fragments badly; kettle's VAD needs this much silence at least.
MIN_ENDPOINT_MS = 200
MAX_ENDPOINT_MS = 10_000
_TYPE = frozenset({"type"})


class AssemblyAIParamError(ParamError):
    """A handshake parameter or configuration value kettle refuses (HTTP 400, or Error 3006)."""


class UnknownMessageType(AssemblyAIParamError):
    """A client message whose ``type`` AssemblyAI does not name (Error 3006)."""


@dataclass(frozen=True)
class TurnSettings:
    """The three numbers AssemblyAI ends turns by; kettle turns them into one endpoint."""

    threshold: float | None = None
    min_silence_ms: int | None = None
    max_silence_ms: int | None = None

    def updated(self, other: TurnSettings) -> TurnSettings:
        return TurnSettings(
            other.threshold if other.threshold is not None else self.threshold,
            other.min_silence_ms if other.min_silence_ms is not None else self.min_silence_ms,
            other.max_silence_ms if other.max_silence_ms is not None else self.max_silence_ms,
        )

    def endpoint_ms(self, u3: bool) -> int:
        """The silence that ends a turn: AssemblyAI ends one at ``min`` when confident and at
        ``max`` regardless; kettle's VAD has one silence, so it takes the point the threshold
        names between them (threshold 0: always confident, ``min``; 1: never, ``max``)."""
        low, high = SILENCE_DEFAULTS[u3]
        low = self.min_silence_ms if self.min_silence_ms is not None else low
        high = self.max_silence_ms if self.max_silence_ms is not None else max(high, low)
        high = max(high, low)
        threshold = self.threshold if self.threshold is not None else DEFAULT_THRESHOLD
        ms = round(low + threshold * (high - low))
        return min(max(ms, MIN_ENDPOINT_MS), MAX_ENDPOINT_MS)


MAX_SPEAKERS = 16  # kettle's cap per stream (SessionConfig.max_speakers), the default


@dataclass(frozen=True)
class StreamParams:
    """The settings of one ``/v3/ws`` connection, from its query string."""

    encoding: str = "pcm_s16le"  # AssemblyAI's name
    sample_rate: int = 16000
    speech_model: str = DEFAULT_MODEL
    format_turns: bool = False
    language: str | None = "en"  # None: detect per utterance (a multilingual kettle model)
    language_detection: bool = False
    keyterms: tuple[str, ...] = ()
    turns: TurnSettings = TurnSettings()
    # Streaming diarization: ``speaker_label`` on every Turn, ``speaker`` on final words.
    speaker_labels: bool = False
    max_speakers: int = MAX_SPEAKERS
    # A kettle extension (``kettle_revisions=true``): a later refinement's correction of an
    # ended turn comes as one more end-of-turn Turn of the same ``turn_order``.
    revisions: bool = False

    @property
    def u3(self) -> bool:
        """Universal-3 Pro family: every end of turn is one formatted Turn."""
        return self.speech_model.startswith(U3_PREFIXES)

    @property
    def frame_bytes(self) -> int:
        return 2 if self.encoding == "pcm_s16le" else 1

    def session_config(self) -> SessionConfig:
        return SessionConfig(
            language=self.language,
            multilingual=self.language is None,
            word_timestamps=True,  # every end-of-turn Turn carries timed words
            vad_events=True,  # SpeechStarted, and utterances without words
            endpoint_silence_ms=self.turns.endpoint_ms(self.u3),
            keyterms=self.keyterms,
            diarize=self.speaker_labels,
            max_speakers=self.max_speakers,
            revisions=self.revisions,
        )

    def with_update(self, update: ConfigurationUpdate) -> StreamParams:
        return replace(
            self,
            turns=self.turns.updated(update.turns),
            keyterms=self.keyterms if update.keyterms is None else update.keyterms,
            format_turns=self.format_turns if update.format_turns is None else update.format_turns,
        )


@dataclass(frozen=True)
class ConfigurationUpdate:
    """What one UpdateConfiguration changes (None: left as it was). Its other fields
    (vad_threshold, prompt, ...) are checked and have no use in kettle."""

    turns: TurnSettings = TurnSettings()
    keyterms: tuple[str, ...] | None = None
    format_turns: bool | None = None


@dataclass(frozen=True)
class ClientMessage:
    """A client text message: its ``type``, and for UpdateConfiguration what it changes."""

    type: str
    update: ConfigurationUpdate | None = None


def turn_settings(values: Mapping[str, Any]) -> TurnSettings:
    """The turn-detection numbers among checked values (a query's, an update's);
    ``min_turn_silence`` wins over its older name."""
    low = values.get("min_turn_silence", values.get("min_end_of_turn_silence_when_confident"))
    return TurnSettings(
        values.get("end_of_turn_confidence_threshold"), low, values.get("max_turn_silence")
    )


def parse_terms(terms: Iterable[str]) -> tuple[str, ...]:
    """keyterms_prompt's terms (checked: a list of strings) as kettle keeps them: stripped,
    empty ones dropped, each once."""
    try:
        return keyterms.normalize(terms)
    except ConfigError as exc:
        raise AssemblyAIParamError(f"keyterms_prompt: {exc}") from None


def _list_value(spec: FieldSpec, given: Sequence[str]) -> tuple[str, ...]:
    """A list parameter (keyterms_prompt, language_codes): each value a JSON list of strings
    (what the SDKs send) or one item (the parameter repeated); checked as a list of strings."""
    items: list[object] = []
    for value in given:
        if value.lstrip().startswith("["):
            try:
                loaded = json.loads(value)
            except (json.JSONDecodeError, RecursionError):
                raise AssemblyAIParamError(f"{spec.name} is not a valid JSON list") from None
            items.extend(loaded if isinstance(loaded, list) else [loaded])
        else:
            items.append(value)
    checked: tuple[str, ...] = spec.check_json(items)
    return checked


def query_fields(pairs: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """Every parameter ``assemblyai_fields.QUERY`` names, checked and typed. One value each
    (given twice, it must be the same value twice), but for the lists, which may repeat."""
    values: dict[str, Any] = {}
    for spec in fields.QUERY.fields:
        if spec.name not in pairs:
            continue
        given = pairs[spec.name]
        try:
            if spec.kind == STRINGS:
                values[spec.name] = _list_value(spec, given)
                continue
            if len(set(given)) > 1:
                raise AssemblyAIParamError(
                    f"{spec.name} is given more than once with different values"
                )
            values[spec.name] = spec.parse_query(given[0])
        except FieldError as exc:
            raise AssemblyAIParamError(str(exc)) from None
    return values


def stream_language(codes: Sequence[str], family_detects: bool, multilingual: bool) -> str | None:
    """The stream's language (None: detected per utterance). One declared code pins it;
    several, or "multi", or none on a multilingual family, let a multilingual kettle model
    detect it; an English-only kettle model takes English only."""
    parsed = {parse_language(c) for c in codes}
    if not multilingual:
        if codes and "en" not in parsed:
            raise AssemblyAIParamError(
                f"language_codes {list(codes)}: the model kettle serves is English-only"
            )
        return "en"
    if codes:
        return parsed.pop() if len(parsed) == 1 else None  # ({None}: "multi")
    return None if family_detects else "en"


def parse_query(query: str, *, multilingual: bool, speakers: bool = True) -> StreamParams:
    """The handshake's query string; AssemblyAIParamError (HTTP 400) names what is wrong
    (``speaker_labels=true`` on a server without a speaker model, ``speakers`` False, too).
    Parameters kettle has no use for (prompt, vad_threshold, ...) are checked and ignored,
    those the reference does not name ignored. ``kettle_revisions`` (true or false) is
    kettle's own: it asks for corrected turns."""
    try:
        pairs = parse_qs(query, keep_blank_values=True, errors="strict")
    except (UnicodeDecodeError, ValueError) as exc:
        raise AssemblyAIParamError(f"query string cannot be decoded: {exc}") from None
    return stream_params(pairs, multilingual=multilingual, speakers=speakers)


def stream_params(
    pairs: Mapping[str, Sequence[str]], *, multilingual: bool, speakers: bool = True
) -> StreamParams:
    """The settings of a decoded query string (each parameter's values, in order)."""
    values = query_fields(pairs)
    model = values.get("speech_model", DEFAULT_MODEL).strip()
    if model not in UNIVERSAL_MODELS and not model.startswith(U3_PREFIXES):
        raise AssemblyAIParamError(f"speech_model {model!r} is not a streaming model")
    flags = {
        name: values.get(name, False)
        for name in ("format_turns", "language_detection", "speaker_labels")
    }
    if flags["speaker_labels"] and not speakers:
        raise AssemblyAIParamError(
            "speaker_labels is not available: this server has no speaker model"
        )
    codes = [*values.get("language_codes", ()), values.get("language_code", "")]
    family_detects = model != "universal-streaming-english"
    return StreamParams(
        encoding=values.get("encoding", "pcm_s16le"),
        sample_rate=values.get("sample_rate", 16000),
        speech_model=model,
        language=stream_language([c for c in codes if c.strip()], family_detects, multilingual),
        keyterms=parse_terms(values.get("keyterms_prompt", ())),
        turns=turn_settings(values),
        max_speakers=values.get("max_speakers", MAX_SPEAKERS),
        revisions=values.get("kettle_revisions", False),
        **flags,
    )


def parse_client_message(obj: Mapping[str, Any]) -> ClientMessage:
    """A client message's JSON object, checked against its type's table
    (``assemblyai_fields.MESSAGES``): UnknownMessageType for a type AssemblyAI does not name,
    AssemblyAIParamError (naming every bad field) for a field its table refuses. Fields no
    row names are ignored."""
    kind = obj.get("type")
    if not isinstance(kind, str):
        raise AssemblyAIParamError("type must be a string")
    table = fields.MESSAGES.get(kind)
    if table is None:
        raise UnknownMessageType(kind)
    values, errors = table.parse_json(obj, ignore=_TYPE)
    if errors:
        raise AssemblyAIParamError("; ".join(map(str, errors)))
    if kind != "UpdateConfiguration":
        return ClientMessage(kind)
    given = {name: value for name, value in values.items() if value is not None}
    terms = given.get("keyterms_prompt")
    return ClientMessage(
        kind,
        ConfigurationUpdate(
            turn_settings(given),
            None if terms is None else parse_terms(terms),
            given.get("format_turns"),
        ),
    )


def credentials(authorization: str | None, token: str | None) -> tuple[str | None, ...]:
    """The key as AssemblyAI's clients present it: the raw ``Authorization`` header (no
    scheme; ``Bearer KEY`` is taken too), or the ``token`` query parameter (a browser's;
    kettle mints no temporary tokens, so it holds a key)."""
    header = authorization.strip() if authorization else None
    token = token.strip() if token else None
    return header or None, bearer_token(authorization), token or None


__all__ = [
    "ENCODINGS",
    "PATH",
    "AssemblyAIParamError",
    "ClientMessage",
    "ConfigurationUpdate",
    "StreamParams",
    "TurnSettings",
    "UnknownMessageType",
    "credentials",
    "parse_client_message",
    "parse_query",
    "parse_terms",
    "stream_params",
]
