"""OpenAI's field tables: every parameter and message field kettle reads on OpenAI's surfaces,
as OpenAI's API reference documents it (type, range or enum, required), one row per field
with the reference page's URL. The parsers (openai_rest.py, openai_rest_options.py,
openai_realtime_settings.py, openai_realtime_turns.py, openai_realtime.py,
openai_realtime_route.py) read exactly these fields and check each against its row; tests
hold the parsers to that (fields.Recording) and drive every row's refusals and edges.

Sources: https://platform.openai.com/docs/api-reference (the pages below), cross-read with
the OpenAPI spec it is generated from (github.com/openai/openai-openapi) and the official
SDK's types (openai-python ``types/audio``, ``types/realtime``).

Where a row is kettle's and not the reference's, its comment says so:

- Bounds the reference leaves open: ``prefix_padding_ms``/``silence_duration_ms`` (Realtime:
  0..2000 and 40..10000; REST ``chunking_strategy``: 0..10000) and ``prompt``'s length (none
  here: a longer prompt keeps its last 4000 characters, as before).
- ``nullable``: the reference shows ``null`` in the session object the server sends for
  ``language``, ``delay``, ``turn_detection``, ``noise_reduction``, ``include``, ...; a
  client that sends the object it got back sends those nulls, so they are taken as "unset".
- ``kettle_revisions``: a kettle extension (its row points at docs/operating.md).
"""

from __future__ import annotations

from kettle.streaming.protocols.fields import (
    BOOL,
    ENUM,
    FILE,
    INT,
    NUMBER,
    OBJECT,
    STRING,
    STRINGS,
    FieldSpec,
    FieldTable,
)

REFERENCE = "https://platform.openai.com/docs/api-reference"
TRANSCRIBE_URL = REFERENCE + "/audio/createTranscription"
TRANSLATE_URL = REFERENCE + "/audio/createTranslation"
CLIENT_EVENTS = REFERENCE + "/realtime-client-events"
UPDATE_URL = CLIENT_EVENTS + "/session/update"
APPEND_URL = CLIENT_EVENTS + "/input_audio_buffer/append"
COMMIT_URL = CLIENT_EVENTS + "/input_audio_buffer/commit"
CLEAR_URL = CLIENT_EVENTS + "/input_audio_buffer/clear"
CONNECT_URL = "https://platform.openai.com/docs/guides/realtime-transcription"
CONNECT_REFERENCE_URL = REFERENCE + "/realtime"
KETTLE_REVISIONS_DOC = "docs/operating.md"

RESPONSE_FORMATS = ("json", "text", "srt", "verbose_json", "vtt", "diarized_json")
TRANSLATION_FORMATS = ("json", "text", "srt", "verbose_json", "vtt")
GRANULARITIES = ("word", "segment")
REST_INCLUDES = ("logprobs",)
MAX_KNOWN_SPEAKERS = 4  # "Up to 4 speakers are supported."
LOGPROBS = "item.input_audio_transcription.logprobs"
AUDIO_FORMATS = ("audio/pcm", "audio/pcmu", "audio/pcma")
PCM_RATE = 24000  # "Only a 24kHz sample rate is supported."
DELAYS = ("minimal", "low", "medium", "high", "xhigh")
EAGERNESS = ("low", "medium", "high", "auto")
NOISE_REDUCTIONS = ("near_field", "far_field")
MAX_EVENT_ID = 512  # event_id: maxLength 512 (the OpenAPI spec)


# -- REST: POST /v1/audio/transcriptions and /v1/audio/translations (multipart form) -------

TRANSCRIPTION_FORM = FieldTable(
    "OpenAI POST /v1/audio/transcriptions form",
    (
        FieldSpec("file", FILE, TRANSCRIBE_URL, required=True),
        FieldSpec("model", STRING, TRANSCRIBE_URL, required=True),
        FieldSpec("language", STRING, TRANSCRIBE_URL),  # ISO-639-1: Whisper's codes
        FieldSpec("languages", STRINGS, TRANSCRIBE_URL),  # each ISO-639-1
        FieldSpec("keywords", STRINGS, TRANSCRIBE_URL),
        FieldSpec("prompt", STRING, TRANSCRIBE_URL),
        FieldSpec("response_format", ENUM, TRANSCRIBE_URL, choices=RESPONSE_FORMATS),
        FieldSpec("temperature", NUMBER, TRANSCRIBE_URL, low=0, high=1),
        FieldSpec("include", STRINGS, TRANSCRIBE_URL, choices=REST_INCLUDES),
        FieldSpec("timestamp_granularities", STRINGS, TRANSCRIBE_URL, choices=GRANULARITIES),
        FieldSpec("stream", BOOL, TRANSCRIBE_URL, nullable=True),
        FieldSpec("chunking_strategy", OBJECT, TRANSCRIBE_URL, nullable=True),  # or "auto"
        FieldSpec("known_speaker_names", STRINGS, TRANSCRIBE_URL, max_items=MAX_KNOWN_SPEAKERS),
        FieldSpec(
            "known_speaker_references", STRINGS, TRANSCRIBE_URL, max_items=MAX_KNOWN_SPEAKERS
        ),
    ),
)

# chunking_strategy's server_vad object (VadConfig).
CHUNKING_VAD = FieldTable(
    "OpenAI transcription chunking_strategy (server_vad)",
    (
        FieldSpec("type", ENUM, TRANSCRIBE_URL, required=True, choices=("server_vad",)),
        FieldSpec("prefix_padding_ms", INT, TRANSCRIBE_URL, low=0, high=10_000),  # kettle's bounds
        FieldSpec(
            "silence_duration_ms", INT, TRANSCRIBE_URL, low=0, high=10_000
        ),  # kettle's bounds
        FieldSpec("threshold", NUMBER, TRANSCRIBE_URL, low=0, high=1),
    ),
)

TRANSLATION_FORM = FieldTable(
    "OpenAI POST /v1/audio/translations form",
    (
        FieldSpec("file", FILE, TRANSLATE_URL, required=True),
        FieldSpec("model", STRING, TRANSLATE_URL, required=True),
        FieldSpec("prompt", STRING, TRANSLATE_URL),
        FieldSpec("response_format", ENUM, TRANSLATE_URL, choices=TRANSLATION_FORMATS),
        FieldSpec("temperature", NUMBER, TRANSLATE_URL, low=0, high=1),
    ),
)

# -- Realtime: the WebSocket's query --------------------------------------------------------

REALTIME_QUERY = FieldTable(
    "OpenAI Realtime /v1/realtime query",
    (
        # wss://api.openai.com/v1/realtime?intent=transcription (the guide); kettle serves
        # transcription sessions only, and takes a missing intent as that.
        FieldSpec("intent", ENUM, CONNECT_URL, choices=("transcription",)),
        # The realtime model of a realtime session; LiveKit sends one: read, and not used.
        FieldSpec("model", STRING, CONNECT_REFERENCE_URL),
        FieldSpec("kettle_revisions", BOOL, KETTLE_REVISIONS_DOC),  # kettle's extension
    ),
)

# -- Realtime: client events -------------------------------------------------------------

SESSION_UPDATE_EVENT = FieldTable(
    "OpenAI Realtime session.update",
    (
        FieldSpec("type", ENUM, UPDATE_URL, required=True, choices=("session.update",)),
        FieldSpec("event_id", STRING, UPDATE_URL, high=MAX_EVENT_ID),
        FieldSpec("session", OBJECT, UPDATE_URL, required=True),
    ),
)

APPEND_EVENT = FieldTable(
    "OpenAI Realtime input_audio_buffer.append",
    (
        FieldSpec("type", ENUM, APPEND_URL, required=True, choices=("input_audio_buffer.append",)),
        FieldSpec("event_id", STRING, APPEND_URL, high=MAX_EVENT_ID),
        FieldSpec("audio", STRING, APPEND_URL, required=True),  # base64 of the session's format
    ),
)

COMMIT_EVENT = FieldTable(
    "OpenAI Realtime input_audio_buffer.commit",
    (
        FieldSpec("type", ENUM, COMMIT_URL, required=True, choices=("input_audio_buffer.commit",)),
        FieldSpec("event_id", STRING, COMMIT_URL, high=MAX_EVENT_ID),
    ),
)

CLEAR_EVENT = FieldTable(
    "OpenAI Realtime input_audio_buffer.clear",
    (
        FieldSpec("type", ENUM, CLEAR_URL, required=True, choices=("input_audio_buffer.clear",)),
        FieldSpec("event_id", STRING, CLEAR_URL, high=MAX_EVENT_ID),
    ),
)

CLIENT_EVENT_TABLES = {
    "session.update": SESSION_UPDATE_EVENT,
    "input_audio_buffer.append": APPEND_EVENT,
    "input_audio_buffer.commit": COMMIT_EVENT,
    "input_audio_buffer.clear": CLEAR_EVENT,
}

# -- Realtime: session.update's session object (a transcription session) ------------------

SESSION = FieldTable(
    "OpenAI Realtime session.update session (transcription)",
    (
        FieldSpec("type", ENUM, UPDATE_URL, required=True, choices=("transcription",)),
        FieldSpec("audio", OBJECT, UPDATE_URL),
        FieldSpec("include", STRINGS, UPDATE_URL, choices=(LOGPROBS,), nullable=True),
        # A realtime session's fields, the two the page names as fixed ("any field except
        # voice and model"): refused unless they leave the session as it is.
        FieldSpec("model", STRING, UPDATE_URL, nullable=True),
        FieldSpec("voice", STRING, UPDATE_URL, nullable=True),
    ),
)

SESSION_AUDIO = FieldTable(
    "OpenAI Realtime session.audio",
    (
        FieldSpec("input", OBJECT, UPDATE_URL, nullable=True),
        FieldSpec("output", OBJECT, UPDATE_URL, nullable=True),  # a realtime session's: voice
    ),
)

SESSION_AUDIO_OUTPUT = FieldTable(
    "OpenAI Realtime session.audio.output",
    (FieldSpec("voice", STRING, UPDATE_URL, nullable=True),),
)

AUDIO_INPUT = FieldTable(
    "OpenAI Realtime session.audio.input",
    (
        FieldSpec("format", OBJECT, UPDATE_URL),
        FieldSpec("noise_reduction", OBJECT, UPDATE_URL, nullable=True),
        FieldSpec("transcription", OBJECT, UPDATE_URL, nullable=True),
        FieldSpec("turn_detection", OBJECT, UPDATE_URL, nullable=True),
    ),
)

AUDIO_FORMAT = FieldTable(
    "OpenAI Realtime session.audio.input.format",
    (
        FieldSpec("type", ENUM, UPDATE_URL, choices=AUDIO_FORMATS),
        # audio/pcm's only ("Always 24000"); audio/pcmu and audio/pcma have no rate field.
        FieldSpec("rate", INT, UPDATE_URL, low=PCM_RATE, high=PCM_RATE),
    ),
)

NOISE_REDUCTION = FieldTable(
    "OpenAI Realtime session.audio.input.noise_reduction",
    (FieldSpec("type", ENUM, UPDATE_URL, choices=NOISE_REDUCTIONS),),
)

TRANSCRIPTION = FieldTable(
    "OpenAI Realtime session.audio.input.transcription",
    (
        FieldSpec("model", STRING, UPDATE_URL, nullable=True),
        FieldSpec("language", STRING, UPDATE_URL, nullable=True),  # ISO-639-1: Whisper's codes
        FieldSpec("languages", STRINGS, UPDATE_URL, nullable=True),  # each ISO-639-1
        FieldSpec("keywords", STRINGS, UPDATE_URL, nullable=True),
        FieldSpec("prompt", STRING, UPDATE_URL, nullable=True),
        FieldSpec("delay", ENUM, UPDATE_URL, choices=DELAYS, nullable=True),
    ),
)

# turn_detection is one of two objects, told apart by their required ``type``.
TURN_DETECTION_TYPE = FieldTable(
    "OpenAI Realtime session.audio.input.turn_detection (its type)",
    (FieldSpec("type", ENUM, UPDATE_URL, required=True, choices=("server_vad", "semantic_vad")),),
)

SERVER_VAD = FieldTable(
    "OpenAI Realtime turn_detection server_vad",
    (
        FieldSpec("type", ENUM, UPDATE_URL, required=True, choices=("server_vad",)),
        FieldSpec("threshold", NUMBER, UPDATE_URL, low=0, high=1),
        FieldSpec("prefix_padding_ms", INT, UPDATE_URL, low=0, high=2000),  # kettle's bounds
        FieldSpec("silence_duration_ms", INT, UPDATE_URL, low=40, high=10_000),  # kettle's bounds
        # A response's settings: checked and echoed (a transcription session has none).
        FieldSpec("create_response", BOOL, UPDATE_URL),
        FieldSpec("interrupt_response", BOOL, UPDATE_URL),
        FieldSpec("idle_timeout_ms", INT, UPDATE_URL, low=5000, high=30_000, nullable=True),
    ),
)

SEMANTIC_VAD = FieldTable(
    "OpenAI Realtime turn_detection semantic_vad",
    (
        FieldSpec("type", ENUM, UPDATE_URL, required=True, choices=("semantic_vad",)),
        FieldSpec("eagerness", ENUM, UPDATE_URL, choices=EAGERNESS),
        FieldSpec("create_response", BOOL, UPDATE_URL),
        FieldSpec("interrupt_response", BOOL, UPDATE_URL),
    ),
)

TURN_DETECTIONS = {"server_vad": SERVER_VAD, "semantic_vad": SEMANTIC_VAD}

TABLES = (
    TRANSCRIPTION_FORM,
    CHUNKING_VAD,
    TRANSLATION_FORM,
    REALTIME_QUERY,
    SESSION_UPDATE_EVENT,
    APPEND_EVENT,
    COMMIT_EVENT,
    CLEAR_EVENT,
    SESSION,
    SESSION_AUDIO,
    SESSION_AUDIO_OUTPUT,
    AUDIO_INPUT,
    AUDIO_FORMAT,
    NOISE_REDUCTION,
    TRANSCRIPTION,
    TURN_DETECTION_TYPE,
    SERVER_VAD,
    SEMANTIC_VAD,
)
