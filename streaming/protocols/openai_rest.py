"""OpenAI's audio REST API, the pure part: form fields in, a validated request out
(openai_rest_render.py turns a transcript into the response body).

No I/O: the route reads the multipart body (with its size limit) and hands the fields and the
file's bytes here; errors are ``OpenAIError`` values that carry the HTTP status and OpenAI's
error object ``{"error": {"message", "type", "param", "code"}}``.

Choices where OpenAI's API leaves room or does not fit kettle:

- ``model``: the ids kettle serves (``GET /v1/models``) and the names OpenAI's clients send
  by default (``whisper-1``, ``gpt-4o-transcribe``, ``gpt-4o-mini-transcribe``,
  ``gpt-transcribe``; a dated variant such as ``gpt-4o-mini-transcribe-2025-03-20`` too),
  aliases of the model that decodes finals, so code written for OpenAI runs unchanged. The
  aliases are configurable (``kettle serve --openai-aliases``). Anything else is 404.
- The file's format is found from its bytes (the decoder sniffs the container); the file name
  is never looked at.
- ``timestamp_granularities`` needs ``verbose_json`` (as OpenAI's API says); ``stream=true``
  needs ``json`` or ``text`` (the formats OpenAI streams); ``include[]=logprobs`` needs
  ``json`` (streamed or not), as OpenAI documents. Unknown fields are ignored, so newer SDKs'
  extra fields do not break a request.
- ``keywords`` become the decode's keyterms (Whisper hotwords, transcribe/keyterms.py).
- ``languages``: one code (or the same code repeated) is taken as ``language``; several
  restrict the model's language detection to them (each window picks the likeliest of the
  list). ``language`` wins over ``languages`` when both are sent. On an English-only model
  any code but ``en`` is refused, as for ``language``.
- ``chunking_strategy``: kettle always cuts a recording at its pauses (Silero VAD), so unset
  and ``"auto"`` both mean kettle's default windows; a ``server_vad`` object sets the VAD's
  ``threshold``, its minimum pause (``silence_duration_ms``) and the speech padding around
  each cut (``prefix_padding_ms``); see openai_rest_options.py.
- ``response_format=diarized_json`` (with any served model or alias, OpenAI's
  ``gpt-4o-transcribe-diarize`` among them) labels each segment with its speaker; ``json`` and
  ``text`` with the diarize model give text only, as OpenAI's do. ``known_speaker_names[]``
  and ``known_speaker_references[]`` (base64 data URLs, up to 4) are checked here and used
  for ``diarized_json`` (openai_speakers.py). ``chunking_strategy`` is not required for long
  inputs with the diarize model (kettle always cuts at pauses).
- ``temperature`` is validated (0..1) and otherwise not used: kettle's decoder always starts
  at 0 and falls back to higher temperatures on its own checks, which is what OpenAI's
  default of 0 means.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from kettle.streaming.protocols import openai_rest_options as options
from kettle.streaming.protocols import openai_speakers as speaker_fields
from kettle.streaming.protocols.openai_errors import OpenAIError as OpenAIError
from kettle.streaming.protocols.openai_errors import bad_request as bad_request
from kettle.streaming.protocols.openai_errors import busy as busy
from kettle.streaming.protocols.openai_errors import model_not_found as model_not_found
from kettle.streaming.protocols.openai_errors import too_large as too_large
from kettle.streaming.protocols.openai_errors import unauthorized as unauthorized
from kettle.streaming.protocols.openai_models import MODEL_ALIAS as MODEL_ALIAS
from kettle.streaming.protocols.openai_models import MODEL_ALIASES as MODEL_ALIASES
from kettle.streaming.protocols.openai_models import ModelCatalog as ModelCatalog
from kettle.streaming.protocols.openai_models import ModelEntry as ModelEntry
from kettle.transcribe.languages import LANGUAGES
from kettle.transcribe.windows import WindowConfig

RESPONSE_FORMATS = ("json", "text", "srt", "vtt", "verbose_json", "diarized_json")
STREAM_FORMATS = ("json", "text", "diarized_json")
GRANULARITIES = ("word", "segment")
CONTENT_TYPES = {
    "json": "application/json",
    "diarized_json": "application/json",
    "verbose_json": "application/json",
    "text": "text/plain; charset=utf-8",
    "srt": "text/plain; charset=utf-8",
    "vtt": "text/vtt; charset=utf-8",
}
SSE_CONTENT_TYPE = "text/event-stream"
MAX_PROMPT_CHARS = 4000


# -- requests ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class AudioRequest:
    """A validated transcription or translation request (the audio stays as bytes)."""

    task: str  # "transcribe" | "translate"
    audio: bytes
    model: ModelEntry
    language: str | None = None
    prompt: str | None = None
    temperature: float = 0.0
    response_format: str = "json"
    words: bool = False
    stream: bool = False
    logprobs: bool = False  # include[]=logprobs
    keyterms: tuple[str, ...] = ()  # keywords[]
    languages: tuple[str, ...] = ()  # languages[] of two or more: detection picks among them
    windows: WindowConfig | None = None  # chunking_strategy server_vad; None: kettle's own
    # known_speaker_names[] with their known_speaker_references[] (the data URLs' bytes)
    known_speakers: tuple[tuple[str, bytes], ...] = ()

    @property
    def diarize(self) -> bool:
        return self.response_format == "diarized_json"


def parse_audio_form(
    fields: Sequence[tuple[str, str]],
    file: bytes | None,
    *,
    task: str,
    catalog: ModelCatalog,
) -> AudioRequest:
    """Validate a request's text fields (repeated names allowed) and its file's bytes.

    Errors come in the order a client can fix them: the file, then the model (404), then the
    other parameters (400).
    """
    values: dict[str, list[str]] = {}
    for name, value in fields:
        values.setdefault(name, []).append(value)

    def one(name: str) -> str | None:
        got = values.get(name)
        return got[-1] if got else None

    if file is None:
        raise bad_request("No file was given: send the audio as the multipart field 'file'.",
                          "file", "missing_required_parameter")  # fmt: skip
    if not file:
        raise bad_request("The uploaded file is empty.", "file", "invalid_file")
    model_name = (one("model") or "").strip()
    if not model_name:
        raise bad_request("The field 'model' is required.", "model", "missing_required_parameter")
    model = catalog.resolve(model_name)
    if task == "translate" and not model.multilingual:
        raise bad_request(
            f"Model '{model_name}' is English-only and cannot translate; "
            "use a multilingual model (see GET /v1/models).",
            "model",
        )
    response_format = (one("response_format") or "json").strip().lower()
    if response_format not in RESPONSE_FORMATS:
        raise bad_request(f"response_format must be one of {', '.join(RESPONSE_FORMATS)}, "
                          f"not {response_format!r}.", "response_format")  # fmt: skip
    language = _language(one("language"), model, model_name)
    temperature = _temperature(one("temperature"))
    prompt = one("prompt")
    if prompt is not None:
        prompt = prompt.strip()[-MAX_PROMPT_CHARS:] or None
    granularities = values.get("timestamp_granularities[]", []) + values.get(
        "timestamp_granularities", []
    )
    for g in granularities:
        if g not in GRANULARITIES:
            raise bad_request(f"timestamp_granularities holds {g!r}; use word and/or segment.",
                              "timestamp_granularities")  # fmt: skip
    if granularities and response_format != "verbose_json":
        raise bad_request("timestamp_granularities needs response_format verbose_json.",
                          "timestamp_granularities")  # fmt: skip
    stream = _bool(one("stream"), "stream")
    if stream and response_format not in STREAM_FORMATS:
        raise bad_request("stream=true works with response_format json or text, "
                          f"not {response_format}.", "stream")  # fmt: skip
    listed = tuple(
        dict.fromkeys(
            code
            for v in options.listed(values, "languages")
            if (code := _language(v, model, model_name, "languages")) is not None
        )
    )
    if language is None and len(listed) == 1:
        language = listed[0]
    try:
        include = options.includes(values)
        keywords = options.keywords(values)
        default_windows = WindowConfig()
        windows = options.chunking(values, default_windows)
    except options.FieldError as exc:
        raise bad_request(exc.message, exc.param) from None
    if include and response_format != "json":
        raise bad_request("include[]=logprobs needs response_format json.", "include")
    if response_format == "diarized_json" and task != "transcribe":
        raise bad_request("diarized_json is a transcription format, not a translation's.",
                          "response_format")  # fmt: skip
    try:
        known = speaker_fields.known_speakers(
            options.listed(values, "known_speaker_names"),
            options.listed(values, "known_speaker_references"),
        )
    except speaker_fields.SpeakerFieldError as exc:
        raise bad_request(exc.message, exc.param) from None
    return AudioRequest(
        task=task,
        audio=file,
        model=model,
        language=language,
        prompt=prompt,
        temperature=temperature,
        response_format=response_format,
        words="word" in granularities,
        stream=stream,
        logprobs="logprobs" in include,
        keyterms=keywords,
        languages=listed if language is None and len(listed) > 1 else (),
        windows=None if windows == default_windows else windows,
        known_speakers=known,
    )


def _language(
    value: str | None, model: ModelEntry, model_name: str, param: str = "language"
) -> str | None:
    if value is None or not value.strip():
        return None
    code = value.strip().lower()
    if code not in LANGUAGES:
        raise bad_request(f"{param} must hold ISO-639-1 codes Whisper knows, not {value!r}.",
                          param)  # fmt: skip
    if code != "en" and not model.multilingual:
        raise bad_request(f"Model '{model_name}' is English-only; it cannot take language "
                          f"{code!r}.", param)  # fmt: skip
    return code


def _temperature(value: str | None) -> float:
    if value is None or not value.strip():
        return 0.0
    try:
        t = float(value)
    except ValueError:
        t = math.nan
    if not 0.0 <= t <= 1.0:
        raise bad_request(f"temperature must be a number from 0 to 1, not {value!r}.",
                          "temperature")  # fmt: skip
    return t


def _bool(value: str | None, param: str) -> bool:
    if value is None:
        return False
    text = value.strip().lower()
    if text in ("true", "1"):
        return True
    if text in ("false", "0", ""):
        return False
    raise bad_request(f"{param} must be true or false, not {value!r}.", param)
