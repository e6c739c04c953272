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
- ``temperature`` is validated (0..1) and otherwise not used: kettle's decoder always starts
  at 0 and falls back to higher temperatures on its own checks, which is what OpenAI's
  default of 0 means.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kettle.streaming.protocols import openai_rest_options as options
from kettle.transcribe.languages import LANGUAGES
from kettle.transcribe.windows import WindowConfig

RESPONSE_FORMATS = ("json", "text", "srt", "vtt", "verbose_json")
STREAM_FORMATS = ("json", "text")
GRANULARITIES = ("word", "segment")
MODEL_ALIAS = "whisper-1"
# What OpenAI's SDKs and the voice-agent plugins send by default (LiveKit's openai.STT:
# gpt-4o-mini-transcribe; Pipecat's OpenAISTTService: gpt-transcribe), and the Realtime-only
# models (Pipecat's OpenAIRealtimeSTTService: gpt-realtime-whisper); one list for REST and
# Realtime, so a name means the same on both.
MODEL_ALIASES = (
    MODEL_ALIAS,
    "gpt-4o-transcribe",
    "gpt-4o-mini-transcribe",
    "gpt-transcribe",
    "gpt-realtime-whisper",
    "gpt-live-transcribe",
)
_DATED = re.compile(r"^(?P<name>.+)-\d{4}-\d{2}-\d{2}$")  # e.g. gpt-4o-transcribe-2025-03-20
CONTENT_TYPES = {
    "json": "application/json",
    "verbose_json": "application/json",
    "text": "text/plain; charset=utf-8",
    "srt": "text/plain; charset=utf-8",
    "vtt": "text/vtt; charset=utf-8",
}
SSE_CONTENT_TYPE = "text/event-stream"
MAX_PROMPT_CHARS = 4000


class OpenAIError(Exception):
    """An error response: HTTP status, OpenAI's error object, and extra headers."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }

    def to_json(self) -> str:
        return json.dumps(self.body(), ensure_ascii=False)


def bad_request(message: str, param: str | None = None, code: str = "invalid_value") -> OpenAIError:
    return OpenAIError(400, message, param=param, code=code)


def unauthorized() -> OpenAIError:
    return OpenAIError(401, "Incorrect API key provided.", code="invalid_api_key")


def model_not_found(model: str) -> OpenAIError:
    return OpenAIError(
        404,
        f"The model '{model}' does not exist or you do not have access to it.",
        param="model",
        code="model_not_found",
    )


def too_large(limit_bytes: int) -> OpenAIError:
    return OpenAIError(
        413,
        f"Maximum content size limit ({limit_bytes} bytes) exceeded.",
        param="file",
        code="request_too_large",
    )


def busy(retry_after_s: int, *, unavailable: bool = False) -> OpenAIError:
    """429 while the upload slots are full; 503 while kettle cannot take work at all."""
    headers = {"Retry-After": str(retry_after_s)}
    if unavailable:
        return OpenAIError(
            503,
            "The server is not ready (loading its model or shutting down); retry later.",
            type="server_error",
            code="service_unavailable",
            headers=headers,
        )
    return OpenAIError(
        429,
        "The server is transcribing as many uploads as it takes; retry later.",
        type="requests",
        code="rate_limit_exceeded",
        headers=headers,
    )


# -- models -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelEntry:
    id: str
    multilingual: bool
    created: int = 0
    owned_by: str = "kettle"

    def body(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "model",
            "created": self.created,
            "owned_by": self.owned_by,
        }


@dataclass(frozen=True)
class ModelCatalog:
    """The models an upload may name; the first is the default (the finals model), which
    each of ``aliases`` also names (and their dated variants, ``NAME-YYYY-MM-DD``)."""

    models: tuple[ModelEntry, ...]
    aliases: tuple[str, ...] = MODEL_ALIASES

    def __post_init__(self) -> None:
        if not self.models:
            raise ValueError("a catalog needs at least one model")

    @property
    def default(self) -> ModelEntry:
        return self.models[0]

    def entries(self) -> list[ModelEntry]:
        """Every id a client may use, the aliases included (under the default's properties)."""
        default = self.default
        ids = {m.id for m in self.models}
        aliases = [
            ModelEntry(alias, default.multilingual, default.created, default.owned_by)
            for alias in self.aliases
            if alias not in ids
        ]
        return [*self.models, *aliases]

    def resolve(self, name: str) -> ModelEntry:
        """The model an id names (an alias gives the default), or a 404 error."""
        for entry in self.models:
            if entry.id == name:
                return entry
        dated = _DATED.match(name)
        if name in self.aliases or (dated is not None and dated["name"] in self.aliases):
            return self.default
        raise model_not_found(name)

    def get_body(self, name: str) -> dict[str, Any]:
        for entry in self.entries():
            if entry.id == name:
                return entry.body()
        entry = self.resolve(name)  # a dated alias: described under its own id
        return ModelEntry(name, entry.multilingual, entry.created, entry.owned_by).body()

    def list_body(self) -> dict[str, Any]:
        return {"object": "list", "data": [e.body() for e in self.entries()]}


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
