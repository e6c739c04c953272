"""OpenAI Realtime session settings: parsing and validating ``session.update``.

- ``transcription.model``: the same names the audio REST API takes (openai_rest.ModelCatalog:
  the served models, OpenAI's default names and their dated variants); any other is refused
  with ``model_not_found``. It also picks the turn-detection default (openai_realtime_turns).
- ``transcription.keywords`` become the stream's keyterms (Whisper hotwords); they may change
  at any time, audio flowing or not.
- ``transcription.languages``: one code is the language; several restrict detection to them;
  ``language`` wins when both are sent.
- ``include: ["item.input_audio_transcription.logprobs"]`` asks for logprobs (per word:
  openai_logprobs.py) on deltas and completed events.
- Every field may change at any time (the codec's docstring says from when), except what a
  transcription session cannot change: its ``type``, a ``model`` (a realtime session's
  field) other than the one served, and a ``voice`` (it has no audio output); those are
  refused (UpdateRefused) and nothing of the update applies.
- Every object of the update is read through its table (openai_fields: SESSION, AUDIO_INPUT,
  AUDIO_FORMAT, NOISE_REDUCTION, TRANSCRIPTION, SERVER_VAD/SEMANTIC_VAD), so a field of the
  wrong type, out of its range or not in its enum is refused with OpenAI's code
  (openai_errors.field_refusal) and nothing of the update applies. ``session.type`` is
  required, as at OpenAI ("Missing required parameter: 'session.type'."). Fields the tables
  do not name are not read (ignored). ``noise_reduction`` is checked and reported null.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kettle.streaming.core.session import SessionConfig
from kettle.streaming.protocols.base import AudioSetup, ModelInfo
from kettle.streaming.protocols.openai import realtime_turns as turns
from kettle.streaming.protocols.openai.errors import FieldRefused, OpenAIError, check_object
from kettle.streaming.protocols.openai.fields import (
    AUDIO_FORMAT,
    AUDIO_INPUT,
    NOISE_REDUCTION,
    SESSION,
    SESSION_AUDIO,
    SESSION_AUDIO_OUTPUT,
)
from kettle.streaming.protocols.openai.fields import DELAYS as DELAYS
from kettle.streaming.protocols.openai.fields import LOGPROBS as LOGPROBS
from kettle.streaming.protocols.openai.fields import TRANSCRIPTION as TRANSCRIPTION_FIELDS
from kettle.streaming.protocols.openai.models import ModelCatalog, ModelEntry
from kettle.streaming.protocols.openai.realtime_turns import TurnDetection
from kettle.transcribe.errors import ConfigError
from kettle.transcribe.model import keyterms
from kettle.transcribe.model.languages import LANGUAGES

FORMATS = {
    "audio/pcm": ("pcm_s16le", 24000),
    "audio/pcmu": ("mulaw", 8000),
    "audio/pcma": ("alaw", 8000),
}
MIN_COMMIT_MS = 100.0
DELAYS_WITHOUT_PARTIALS = ("high", "xhigh")  # OpenAI refuses to commit less audio than this
TRANSCRIBE_PREFIX = "conversation.item.input_audio_transcription."
INPUT = "session.audio.input"
TRANSCRIPTION = INPUT + ".transcription"


@dataclass(frozen=True)
class RealtimeSettings:
    format: str = "audio/pcm"
    turn_detection: TurnDetection | None = field(default_factory=TurnDetection)
    language: str | None = None
    prompt: str | None = None
    delay: str | None = None  # "high" / "xhigh": no partials, deltas from finals only
    model: str | None = None  # the transcription model the client named
    turn_detection_set: bool = False  # by the client: the model's default no longer applies
    languages: tuple[str, ...] = ()  # two or more: detection picks among them
    keyterms: tuple[str, ...] = ()
    logprobs: bool = False
    # A kettle extension from the URL (``kettle_revisions=true``), never in the session
    # object: corrections of completed items as further ``completed`` events.
    revisions: bool = False

    @property
    def decode_language(self) -> str | None:
        """The language decodes use: ``language``, else a ``languages`` of one."""
        if self.language is None and len(self.languages) == 1:
            return self.languages[0]
        return self.language

    @property
    def decode_languages(self) -> tuple[str, ...]:
        """The codes detection picks among (none when a language is set)."""
        return () if self.decode_language is not None else self.languages

    @property
    def partials(self) -> bool:
        return self.delay not in DELAYS_WITHOUT_PARTIALS

    def session_config(self) -> SessionConfig:
        td = self.turn_detection or TurnDetection()
        return SessionConfig(
            language=self.decode_language,
            languages=self.decode_languages,
            prompt=self.prompt,
            keyterms=self.keyterms,
            # logprobs are the final's words' probabilities (openai_logprobs.py)
            word_timestamps=self.logprobs,
            partials=self.partials,
            endpoint_silence_ms=td.silence_duration_ms,
            preroll_ms=td.prefix_padding_ms,
            vad_aggressiveness=td.aggressiveness,
            vad_events=True,
            revisions=self.revisions,
        )

    @property
    def input_rate(self) -> int:
        return FORMATS[self.format][1]


def audio_setup(fmt: str) -> AudioSetup:
    """The wire audio of format ``fmt`` (one of FORMATS), one channel."""
    encoding, rate = FORMATS[fmt]
    return AudioSetup(encoding, rate, 1)


UpdateRefused = FieldRefused  # (message, param, code)


def catalog(model: ModelInfo) -> ModelCatalog:
    """The names a session may give as its transcription model (REST's rule)."""
    names = dict.fromkeys(n for n in (model.final_model, model.name) if n)
    entries = tuple(ModelEntry(n, model.multilingual) for n in names)
    return ModelCatalog(entries, model.aliases)


def apply_update(
    settings: RealtimeSettings, session: object, model: ModelInfo | None
) -> RealtimeSettings:
    """The settings after one ``session.update``'s ``session`` object (only given fields
    change); raises UpdateRefused naming the first bad field. Every object is read through
    its table (openai_fields), so no field is read unchecked."""
    if not isinstance(session, Mapping):
        raise UpdateRefused("Invalid type for 'session': it must be an object.", "session",
                            "invalid_type")  # fmt: skip
    kind = session.get("type")
    if isinstance(kind, str) and kind != "transcription":
        raise UpdateRefused(
            f"kettle serves transcription sessions only (session.type 'transcription'), "
            f"not {kind!r}; connect with ?intent=transcription",
            "session.type",
        )
    top = check_object(SESSION, session, "session")
    audio = top.get("audio")
    audio_got = check_object(SESSION_AUDIO, audio, "session.audio") if audio is not None else {}
    output = audio_got.get("output")
    voice_out = check_object(SESSION_AUDIO_OUTPUT, output, "session.audio.output") if output else {}
    _fixed(top, voice_out, model)
    changes: dict[str, Any] = {}
    if "include" in top:
        changes["logprobs"] = bool(top["include"])
    inp = audio_got.get("input")
    if inp is None:
        return replace(settings, **changes)
    got = check_object(AUDIO_INPUT, inp, INPUT)
    if "format" in got:
        changes["format"] = _format(got["format"])
    if got.get("noise_reduction") is not None:
        check_object(NOISE_REDUCTION, got["noise_reduction"], INPUT + ".noise_reduction")
    if "turn_detection" in got:
        changes["turn_detection"] = turns.parse(got["turn_detection"], settings.turn_detection)
        changes["turn_detection_set"] = True
    if got.get("transcription") is not None:
        tr = check_object(TRANSCRIPTION_FIELDS, got["transcription"], TRANSCRIPTION)
        if tr.get("model") is not None:
            name = _model(tr["model"], model)
            changes["model"] = name
            if not settings.turn_detection_set and "turn_detection" not in got:
                changes["turn_detection"] = turns.model_default(name)
        if "language" in tr:
            changes["language"] = _language(tr["language"], model)
        if "languages" in tr:
            changes["languages"] = _languages(tr["languages"], model)
        if "keywords" in tr:
            changes["keyterms"] = _keywords(tr["keywords"])
        if "prompt" in tr:
            changes["prompt"] = (tr["prompt"] or "").strip() or None
        if "delay" in tr:
            changes["delay"] = tr["delay"]
    return replace(settings, **changes)


def _fixed(session: Mapping[str, Any], output: Mapping[str, Any], model: ModelInfo | None) -> None:
    """Refuse what no update may change (OpenAI: every field but voice and model)."""
    if session.get("model") is not None:
        name = session["model"]
        served = model.name if model is not None else "the served model"
        try:
            _model(name, model, "session.model")
        except UpdateRefused:
            raise UpdateRefused(
                f"the session's model cannot change: it is {served}, not {name!r}",
                "session.model",
                "cannot_update_model",
            ) from None
    for param, parent in (("session.voice", session), ("session.audio.output.voice", output)):
        if parent.get("voice") is not None:
            raise UpdateRefused(
                "a transcription session has no voice (it produces no audio); nothing was changed",
                param,
                "cannot_update_voice",
            )


def _format(value: Mapping[str, Any]) -> str:
    param = INPUT + ".format"
    got = check_object(AUDIO_FORMAT, value, param)
    kind = got.get("type", "audio/pcm")
    rate = got.get("rate")
    if rate is not None and rate != FORMATS[kind][1]:
        raise UpdateRefused(
            f"Invalid value for '{param}.rate': {kind} has no rate field "
            f"(it is {FORMATS[kind][1]} Hz), not {rate!r}.",
            f"{param}.rate",
        )
    return str(kind)


def _model(value: str, model: ModelInfo | None, param: str = TRANSCRIPTION + ".model") -> str:
    if model is not None:
        try:
            catalog(model).resolve(value)
        except OpenAIError as exc:
            raise UpdateRefused(exc.message, param, "model_not_found") from None
    return value


def _languages(value: tuple[str, ...] | None, model: ModelInfo | None) -> tuple[str, ...]:
    param = TRANSCRIPTION + ".languages"
    codes = (_language(v, model, param) for v in value or ())
    return tuple(dict.fromkeys(c for c in codes if c is not None))


def _keywords(value: tuple[str, ...] | None) -> tuple[str, ...]:
    try:
        return keyterms.normalize(list(value or ()))
    except ConfigError as exc:
        raise UpdateRefused(f"keywords: {exc}", TRANSCRIPTION + ".keywords") from None


def _language(
    value: str | None, model: ModelInfo | None, param: str = TRANSCRIPTION + ".language"
) -> str | None:
    if value is None or value == "":
        return None
    if value.lower() not in LANGUAGES:
        raise UpdateRefused(
            f"language must be an ISO-639-1 code Whisper knows, not {value!r}", param
        )
    code = value.lower()
    if model is not None and not model.multilingual and code != "en":
        raise UpdateRefused(f"model {model.name} is English-only; it cannot take {code!r}", param)
    return code
