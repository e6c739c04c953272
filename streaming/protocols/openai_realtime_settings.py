"""OpenAI Realtime session settings: parsing and validating ``session.update``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kettle.streaming.core.session import SessionConfig
from kettle.streaming.protocols.base import ModelInfo
from kettle.transcribe.languages import LANGUAGES

FORMATS = {
    "audio/pcm": ("pcm_s16le", 24000),
    "audio/pcmu": ("mulaw", 8000),
    "audio/pcma": ("alaw", 8000),
}
MIN_COMMIT_MS = 100.0
DELAYS = ("minimal", "low", "medium", "high", "xhigh")
DELAYS_WITHOUT_PARTIALS = ("high", "xhigh")  # OpenAI refuses to commit less audio than this
TRANSCRIBE_PREFIX = "conversation.item.input_audio_transcription."


@dataclass(frozen=True)
class TurnDetection:
    type: str = "server_vad"
    threshold: float = 0.5
    prefix_padding_ms: int = 300
    silence_duration_ms: int = 500
    # Accepted and echoed; they concern responses, which transcription sessions have none of.
    extra: tuple[tuple[str, Any], ...] = ()

    def body(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "threshold": self.threshold,
            "prefix_padding_ms": self.prefix_padding_ms,
            "silence_duration_ms": self.silence_duration_ms,
            **dict(self.extra),
        }

    @property
    def aggressiveness(self) -> int:
        return min(3, int(self.threshold * 4))


@dataclass(frozen=True)
class RealtimeSettings:
    format: str = "audio/pcm"
    turn_detection: TurnDetection | None = field(default_factory=TurnDetection)
    language: str | None = None
    prompt: str | None = None
    delay: str | None = None  # "high" / "xhigh": no partials, deltas from finals only

    @property
    def partials(self) -> bool:
        return self.delay not in DELAYS_WITHOUT_PARTIALS

    def stream_fields(self) -> tuple[Any, ...]:
        """What a stream is opened with (fixed once audio flows)."""
        td = self.turn_detection or TurnDetection()
        return (
            self.format,
            self.language,
            self.prompt,
            td.threshold,
            td.prefix_padding_ms,
            td.silence_duration_ms,
            self.partials,
        )

    def session_config(self) -> SessionConfig:
        td = self.turn_detection or TurnDetection()
        return SessionConfig(
            language=self.language,
            prompt=self.prompt,
            partials=self.partials,
            endpoint_silence_ms=td.silence_duration_ms,
            preroll_ms=td.prefix_padding_ms,
            vad_aggressiveness=td.aggressiveness,
            vad_events=True,
        )

    @property
    def input_rate(self) -> int:
        return FORMATS[self.format][1]


class UpdateRefused(Exception):
    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


def apply_update(
    settings: RealtimeSettings, session: object, model: ModelInfo | None
) -> RealtimeSettings:
    """The settings after one ``session.update``'s ``session`` object (only given fields
    change); raises UpdateRefused naming the first bad field."""
    if not isinstance(session, Mapping):
        raise UpdateRefused("session must be an object", "session")
    kind = session.get("type", "transcription")
    if kind != "transcription":
        raise UpdateRefused(
            f"kettle serves transcription sessions only (session.type 'transcription'), "
            f"not {kind!r}; connect with ?intent=transcription",
            "session.type",
        )
    audio = _object(session, "audio", "session.audio")
    inp = _object(audio, "input", "session.audio.input") if audio is not None else None
    if inp is None:
        return settings
    changes: dict[str, Any] = {}
    if "format" in inp:
        changes["format"] = _format(inp["format"])
    if "turn_detection" in inp:
        changes["turn_detection"] = _turn_detection(inp["turn_detection"], settings)
    if "transcription" in inp and inp["transcription"] is not None:
        tr = _object(inp, "transcription", "session.audio.input.transcription")
        assert tr is not None
        if "language" in tr:
            changes["language"] = _language(tr["language"], model)
        if "prompt" in tr:
            prompt = tr["prompt"]
            if prompt is not None and not isinstance(prompt, str):
                param = "session.audio.input.transcription.prompt"
                raise UpdateRefused("prompt must be a string", param)
            changes["prompt"] = (prompt or "").strip() or None
        if "delay" in tr:
            delay = tr["delay"]
            if delay is not None and delay not in DELAYS:
                param = "session.audio.input.transcription.delay"
                raise UpdateRefused(f"delay must be one of {', '.join(DELAYS)}", param)
            changes["delay"] = delay
    return replace(settings, **changes)


def _object(parent: Mapping[str, Any], key: str, param: str) -> Mapping[str, Any] | None:
    value = parent.get(key)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise UpdateRefused(f"{param} must be an object", param)
    return value


def _format(value: object) -> str:
    param = "session.audio.input.format"
    if not isinstance(value, Mapping):
        raise UpdateRefused(f"{param} must be an object such as {{'type': 'audio/pcm'}}", param)
    kind = value.get("type", "audio/pcm")
    if kind not in FORMATS:
        raise UpdateRefused(
            f"{param}.type must be one of {', '.join(FORMATS)}, not {kind!r}", f"{param}.type"
        )
    rate = value.get("rate")
    if rate is not None and rate != FORMATS[kind][1]:
        raise UpdateRefused(
            f"{kind} is taken at {FORMATS[kind][1]} Hz only, not {rate!r}", f"{param}.rate"
        )
    return str(kind)


def _turn_detection(value: object, settings: RealtimeSettings) -> TurnDetection | None:
    param = "session.audio.input.turn_detection"
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise UpdateRefused(f"{param} must be an object or null", param)
    kind = value.get("type", "server_vad")
    if kind not in ("server_vad", "semantic_vad"):
        raise UpdateRefused(
            f"{param}.type must be server_vad or semantic_vad, not {kind!r}", f"{param}.type"
        )
    base = settings.turn_detection or TurnDetection()
    threshold = value.get("threshold", base.threshold)
    number = isinstance(threshold, int | float) and not isinstance(threshold, bool)
    if not number or not 0 <= threshold <= 1:
        raise UpdateRefused(f"{param}.threshold must be a number from 0 to 1", f"{param}.threshold")
    ints = {}
    for name, low, high in (("prefix_padding_ms", 0, 2000), ("silence_duration_ms", 40, 10000)):
        got = value.get(name, getattr(base, name))
        if isinstance(got, bool) or not isinstance(got, int) or not low <= got <= high:
            raise UpdateRefused(
                f"{param}.{name} must be an integer from {low} to {high}", f"{param}.{name}"
            )
        ints[name] = got
    known = {"type", "threshold", "prefix_padding_ms", "silence_duration_ms"}
    extra = tuple((k, v) for k, v in value.items() if k not in known)
    return TurnDetection(
        str(kind), float(threshold), ints["prefix_padding_ms"], ints["silence_duration_ms"], extra
    )


def _language(value: object, model: ModelInfo | None) -> str | None:
    param = "session.audio.input.transcription.language"
    if value is None or value == "":
        return None
    if not isinstance(value, str) or value.lower() not in LANGUAGES:
        raise UpdateRefused(
            f"language must be an ISO-639-1 code Whisper knows, not {value!r}", param
        )
    code = value.lower()
    if model is not None and not model.multilingual and code != "en":
        raise UpdateRefused(f"model {model.name} is English-only; it cannot take {code!r}", param)
    return code
