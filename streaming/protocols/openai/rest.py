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
- Every field is read through its row in openai_fields.py (TRANSCRIPTION_FORM,
  TRANSLATION_FORM: type, range or enum, required, from OpenAI's reference) and refused with
  OpenAI's code for what is wrong (``invalid_type``, ``decimal_above_max_value``,
  ``invalid_value``, ``missing_required_parameter``, ...). An empty field counts as not sent;
  ``stream`` also takes ``1``/``0``. A translation reads only the fields its reference lists
  (file, model, prompt, response_format without ``diarized_json``, temperature): any other
  is ignored, as unknown fields are on both endpoints, so newer SDKs' extra fields do not
  break a request (OpenAI's spec says ``additionalProperties: false``; kettle is lenient).
- ``timestamp_granularities`` needs ``verbose_json`` (as OpenAI's API says); ``stream=true``
  needs ``json``, ``text`` or ``diarized_json`` (the formats OpenAI streams);
  ``include[]=logprobs`` needs ``json`` (streamed or not), as OpenAI documents.
- ``keywords`` become the decode's keyterms (Whisper hotwords, transcribe/model/keyterms.py).
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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kettle.streaming.protocols.openai import rest_options as options
from kettle.streaming.protocols.openai import speakers as speaker_fields
from kettle.streaming.protocols.openai.errors import OpenAIError as OpenAIError
from kettle.streaming.protocols.openai.errors import bad_request as bad_request
from kettle.streaming.protocols.openai.errors import busy as busy
from kettle.streaming.protocols.openai.errors import model_not_found as model_not_found
from kettle.streaming.protocols.openai.errors import too_large as too_large
from kettle.streaming.protocols.openai.errors import unauthorized as unauthorized
from kettle.streaming.protocols.openai.fields import GRANULARITIES as GRANULARITIES
from kettle.streaming.protocols.openai.fields import RESPONSE_FORMATS as RESPONSE_FORMATS
from kettle.streaming.protocols.openai.fields import TRANSCRIPTION_FORM, TRANSLATION_FORM
from kettle.streaming.protocols.openai.models import MODEL_ALIAS as MODEL_ALIAS
from kettle.streaming.protocols.openai.models import MODEL_ALIASES as MODEL_ALIASES
from kettle.streaming.protocols.openai.models import ModelCatalog as ModelCatalog
from kettle.streaming.protocols.openai.models import ModelEntry as ModelEntry
from kettle.transcribe.files.windows import WindowConfig
from kettle.transcribe.model.languages import LANGUAGES

STREAM_FORMATS = ("json", "text", "diarized_json")
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
    """Validate a request's text fields (repeated names allowed) and its file's bytes."""
    values: dict[str, list[str]] = {}
    for name, value in fields:
        values.setdefault(name, []).append(value)
    return parse_audio_values(values, file, task=task, catalog=catalog)


def parse_audio_values(
    values: Mapping[str, Sequence[str]],
    file: bytes | None,
    *,
    task: str,
    catalog: ModelCatalog,
) -> AudioRequest:
    """Validate a request's text fields (name -> values in the order sent) against the task's
    table (openai_fields: TRANSCRIPTION_FORM or TRANSLATION_FORM; a translation reads only
    the fields its reference lists) and its file's bytes.

    Errors come in the order a client can fix them: the file, then the model (404), then the
    other parameters (400).
    """
    table = TRANSCRIPTION_FORM if task == "transcribe" else TRANSLATION_FORM
    form = options.Form(values, table)
    if file is None:
        raise bad_request("Missing required parameter: 'file'. Send the audio as the multipart "
                          "field 'file'.", "file", "missing_required_parameter")  # fmt: skip
    if not file:
        raise bad_request("The uploaded file is empty.", "file", "invalid_file")
    model_name = (form.one("model") or "").strip()
    if not model_name:
        raise bad_request("Missing required parameter: 'model'.", "model",
                          "missing_required_parameter")  # fmt: skip
    model = catalog.resolve(model_name)
    if task == "translate" and not model.multilingual:
        raise bad_request(
            f"Model '{model_name}' is English-only and cannot translate; "
            "use a multilingual model (see GET /v1/models).",
            "model",
        )
    response_format = form.one("response_format", lower=True) or "json"
    temperature = form.one("temperature") or 0.0
    prompt = form.one("prompt")
    if prompt is not None:
        prompt = prompt.strip()[-MAX_PROMPT_CHARS:] or None
    if task == "translate":
        return AudioRequest(task=task, audio=file, model=model, prompt=prompt,
                            temperature=temperature, response_format=response_format)  # fmt: skip
    language = _language(form.one("language"), model, model_name)
    granularities = form.many("timestamp_granularities")
    if granularities and response_format != "verbose_json":
        raise bad_request("timestamp_granularities needs response_format verbose_json.",
                          "timestamp_granularities")  # fmt: skip
    stream = bool(form.one("stream"))
    if stream and response_format not in STREAM_FORMATS:
        raise bad_request("stream=true works with response_format json, text or "
                          f"diarized_json, not {response_format}.", "stream")  # fmt: skip
    listed = tuple(
        dict.fromkeys(
            code
            for v in form.many("languages")
            if (code := _language(v, model, model_name, "languages")) is not None
        )
    )
    if language is None and len(listed) == 1:
        language = listed[0]
    include = form.many("include")
    keywords = options.keywords(form)
    default_windows = WindowConfig()
    windows = options.chunking(form, default_windows)
    if include and response_format != "json":
        raise bad_request("include[]=logprobs needs response_format json.", "include")
    try:
        known = speaker_fields.known_speakers(
            form.many("known_speaker_names"), form.many("known_speaker_references")
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
