"""AssemblyAI Universal-Streaming v3's handshake vocabulary: the query parameters of
``/v3/ws``, the credentials, the speech-model families and the silence settings that become
kettle's endpoint. No I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qs

from kettle.kernels.pcm import MAX_SAMPLE_RATE, MIN_SAMPLE_RATE
from kettle.streaming.core.session import SessionConfig
from kettle.streaming.protocols.deepgram_wire import (
    ListenParamError,
    parse_flag,
    parse_int,
    parse_language,
    query_values,
)
from kettle.streaming.protocols.handshake import bearer_token
from kettle.transcribe import keyterms
from kettle.transcribe.errors import ConfigError

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
MAX_SILENCE_MS = 60_000
# The parameters read as one value each; keyterms_prompt and language_codes may repeat.
_SINGLE = frozenset(
    {
        "sample_rate",
        "encoding",
        "speech_model",
        "format_turns",
        "end_of_turn_confidence_threshold",
        "min_turn_silence",
        "min_end_of_turn_silence_when_confident",
        "max_turn_silence",
        "language_detection",
        "language_code",
        "speaker_labels",
        "max_speakers",
        "kettle_revisions",
    }
)


class AssemblyAIParamError(ListenParamError):
    """A handshake parameter or configuration value kettle refuses (HTTP 400, or Error 3006)."""


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


MAX_SPEAKERS = 16  # kettle's cap per stream (SessionConfig.max_speakers)


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

    def with_update(self, turns: TurnSettings, terms: tuple[str, ...] | None) -> StreamParams:
        return replace(
            self,
            turns=self.turns.updated(turns),
            keyterms=self.keyterms if terms is None else terms,
        )


def parse_number(name: str, raw: object, low: float, high: float) -> float:
    """A number within low..high, from query text or a JSON value."""
    if isinstance(raw, bool):
        raise AssemblyAIParamError(f"{name} must be a number, not {raw!r}")
    try:
        value = float(raw) if isinstance(raw, str | int | float) else float("nan")
    except ValueError:
        value = float("nan")
    if not low <= value <= high:  # (NaN fails too)
        raise AssemblyAIParamError(f"{name} must be a number within {low:g}..{high:g}, not {raw!r}")
    return value


def parse_silence(name: str, raw: object) -> int:
    if isinstance(raw, int) and not isinstance(raw, bool):
        raw = str(raw)
    if not isinstance(raw, str):
        raise AssemblyAIParamError(f"{name} must be an integer number of ms, not {raw!r}")
    return parse_int(name, raw, 0, MAX_SILENCE_MS)


def turn_settings(values: Mapping[str, Any]) -> TurnSettings:
    """The turn-detection numbers of a query (text) or an UpdateConfiguration (JSON)."""
    threshold = values.get("end_of_turn_confidence_threshold")
    low = values.get("min_turn_silence", values.get("min_end_of_turn_silence_when_confident"))
    high = values.get("max_turn_silence")
    return TurnSettings(
        None
        if threshold is None
        else parse_number("end_of_turn_confidence_threshold", threshold, 0, 1),
        None if low is None else parse_silence("min_turn_silence", low),
        None if high is None else parse_silence("max_turn_silence", high),
    )


def parse_terms(values: Iterable[object]) -> tuple[str, ...]:
    """keyterms_prompt: each value a JSON list of strings (what the SDKs send) or one term
    (the parameter repeated), or already a list (UpdateConfiguration's JSON)."""
    terms: list[object] = []
    for value in values:
        if isinstance(value, str) and value.lstrip().startswith("["):
            try:
                value = json.loads(value)
            except (json.JSONDecodeError, RecursionError):
                raise AssemblyAIParamError("keyterms_prompt is not a valid JSON list") from None
        if isinstance(value, list):
            terms.extend(value)
        else:
            terms.append(value)
    try:
        return keyterms.normalize(terms)  # (a non-string is refused there)
    except ConfigError as exc:
        raise AssemblyAIParamError(f"keyterms_prompt: {exc}") from None


def _language_codes(values: Sequence[str]) -> list[str]:
    codes: list[object] = []
    for value in values:
        if value.lstrip().startswith("["):
            try:
                loaded = json.loads(value)
            except (json.JSONDecodeError, RecursionError):
                raise AssemblyAIParamError("language_codes is not a valid JSON list") from None
            codes.extend(loaded if isinstance(loaded, list) else [loaded])
        else:
            codes.append(value)
    if not all(isinstance(c, str) for c in codes):
        raise AssemblyAIParamError("language_codes must be language codes")
    return [c for c in codes if isinstance(c, str) and c.strip()]


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
    Parameters kettle has no use for (prompt, vad_threshold, ...) are accepted and ignored.
    ``kettle_revisions`` (true or false) is kettle's own: it asks for corrected turns."""
    one = query_values(query, _SINGLE)
    try:
        many = parse_qs(query, keep_blank_values=True, errors="strict")
    except (UnicodeDecodeError, ValueError) as exc:  # pragma: no cover - query_values first
        raise AssemblyAIParamError(f"query string cannot be decoded: {exc}") from None
    encoding = one.get("encoding", "pcm_s16le").strip().lower()
    if encoding not in ENCODINGS:
        raise AssemblyAIParamError(
            f"encoding must be one of {', '.join(ENCODINGS)}, not {encoding!r}"
        )
    rate = 16000
    if "sample_rate" in one:
        rate = parse_int("sample_rate", one["sample_rate"], MIN_SAMPLE_RATE, MAX_SAMPLE_RATE)
    model = one.get("speech_model", DEFAULT_MODEL).strip()
    if model not in UNIVERSAL_MODELS and not model.startswith(U3_PREFIXES):
        raise AssemblyAIParamError(f"speech_model {model!r} is not a streaming model")
    flags = {
        name: parse_flag(name, one[name]) if name in one else False
        for name in ("format_turns", "language_detection", "speaker_labels")
    }
    if flags["speaker_labels"] and not speakers:
        raise AssemblyAIParamError(
            "speaker_labels is not available: this server has no speaker model"
        )
    revisions = False
    if "kettle_revisions" in one:
        revisions = parse_flag("kettle_revisions", one["kettle_revisions"])
    cap = MAX_SPEAKERS
    if "max_speakers" in one:
        cap = parse_int("max_speakers", one["max_speakers"], 1, MAX_SPEAKERS)
    codes = _language_codes(many.get("language_codes", []) + many.get("language_code", []))
    family_detects = model != "universal-streaming-english"
    return StreamParams(
        encoding=encoding,
        sample_rate=rate,
        speech_model=model,
        language=stream_language(codes, family_detects, multilingual),
        keyterms=parse_terms(many.get("keyterms_prompt", [])),
        turns=turn_settings(one),
        max_speakers=cap,
        revisions=revisions,
        **flags,
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
    "StreamParams",
    "TurnSettings",
    "credentials",
    "parse_query",
    "parse_terms",
    "turn_settings",
]
