"""AssemblyAI Universal-Streaming v3's field tables, from its API reference: the query
parameters of ``/v3/ws`` and the fields of each client message. ``assemblyai_wire`` parses the
handshake and every client message against them.

Where the reference gives no bound kettle needs one, the row carries kettle's own (a comment
says which): sample rates kettle can decode, silences up to a minute, keyterms as many and as
long as ``transcribe.keyterms`` takes. Parameters the reference lists that kettle has no use
for (``vad_threshold``, ``prompt``, ``mode``, ``inactivity_timeout``, ...) are still checked,
so a client's mistake in them is refused as AssemblyAI would refuse it; parameters no row
names (Pipecat's ``formatted_finals``, ...) are ignored.
"""

from __future__ import annotations

from kettle.kernels.pcm import MAX_SAMPLE_RATE, MIN_SAMPLE_RATE
from kettle.streaming.protocols.fields import (
    BOOL,
    ENUM,
    INT,
    NUMBER,
    STRING,
    STRINGS,
    FieldSpec,
    FieldTable,
)
from kettle.transcribe.model.keyterms import MAX_TERM_CHARS, MAX_TERMS

_DOCS = "https://www.assemblyai.com/docs/api-reference/streaming-api/"
STREAMING = _DOCS + "streaming-api"  # the handshake and the messages of every model
UNIVERSAL = _DOCS + "universal-streaming"  # Universal-Streaming's query parameters
U3_PRO = _DOCS + "universal-3-pro-streaming"  # Universal-3 Pro Streaming's
MODES = "https://www.assemblyai.com/docs/streaming/getting-started/optimizing-accuracy-and-latency"
# The Python SDK's typed models of the same API (fields the pages above do not list).
SDK = (
    "https://github.com/AssemblyAI/assemblyai-python-sdk/blob/HEAD/"
    "assemblyai/streaming/v3/models.py"
)
# kettle's revisions, which kettle_revisions asks for (docs/protocol.md's "Server to client").
KETTLE = "docs/protocol.md#server-to-client-all-text-json-one-object-per-message"

ENCODINGS = ("pcm_s16le", "pcm_mulaw")
MAX_SILENCE_MS = 60_000  # kettle's bound: the reference gives none
MAX_SPEAKERS = 10  # "the maximum number of speakers expected in the audio stream (1-10)"


def _silence(name: str, url: str, *, nullable: bool = False) -> FieldSpec:
    return FieldSpec(name, INT, url, low=0, high=MAX_SILENCE_MS, nullable=nullable)


def _keyterms(url: str, *, nullable: bool = False) -> FieldSpec:
    return FieldSpec(
        "keyterms_prompt",
        STRINGS,
        url,
        high=MAX_TERM_CHARS,
        max_items=MAX_TERMS,
        nullable=nullable,
    )


def _threshold(name: str, url: str, *, nullable: bool = False) -> FieldSpec:
    return FieldSpec(name, NUMBER, url, low=0, high=1, nullable=nullable)


def _type(name: str) -> FieldSpec:
    return FieldSpec("type", ENUM, STREAMING, required=True, choices=(name,))


QUERY = FieldTable(
    "AssemblyAI /v3/ws query",
    (
        # "Required" on the Universal-Streaming page, "Defaults to 16000" on Universal-3 Pro's:
        # kettle takes 16000 when it is left out. The range is what kettle decodes.
        FieldSpec("sample_rate", INT, UNIVERSAL, low=MIN_SAMPLE_RATE, high=MAX_SAMPLE_RATE),
        FieldSpec("encoding", ENUM, UNIVERSAL, choices=ENCODINGS, fold_case=True),
        # An enum in the reference that grows with every release (u3-rt-pro, universal-3-5-pro,
        # ...): kettle takes the documented names and the Universal-3 family's prefixes
        # (assemblyai_wire.check_model).
        FieldSpec("speech_model", STRING, UNIVERSAL, low=1),
        FieldSpec("format_turns", BOOL, UNIVERSAL),
        _threshold("end_of_turn_confidence_threshold", UNIVERSAL),
        _silence("min_end_of_turn_silence_when_confident", STREAMING),  # (min_turn_silence's
        _silence("min_turn_silence", UNIVERSAL),  # older name)
        _silence("max_turn_silence", UNIVERSAL),
        _keyterms(UNIVERSAL),  # a JSON list of strings, or the parameter repeated
        FieldSpec("language_detection", BOOL, UNIVERSAL),
        FieldSpec("language_code", STRING, MODES),
        FieldSpec("language_codes", STRINGS, SDK),
        FieldSpec("inactivity_timeout", INT, UNIVERSAL, low=5, high=3600),
        FieldSpec("token", STRING, UNIVERSAL),
        FieldSpec("speaker_labels", BOOL, UNIVERSAL),
        FieldSpec("max_speakers", INT, UNIVERSAL, low=1, high=MAX_SPEAKERS),
        _threshold("vad_threshold", UNIVERSAL),
        FieldSpec("prompt", STRING, U3_PRO),
        FieldSpec("agent_context", STRING, U3_PRO),
        FieldSpec("mode", ENUM, MODES, choices=("min_latency", "balanced", "max_accuracy")),
        FieldSpec("continuous_partials", BOOL, SDK),
        FieldSpec("interruption_delay", INT, SDK, low=0),
        FieldSpec("turn_left_pad_ms", INT, SDK, low=0),
        FieldSpec("filter_profanity", BOOL, SDK),
        FieldSpec("kettle_revisions", BOOL, KETTLE),  # kettle's own: corrected turns
    ),
)

# UpdateConfiguration: the session parameters that may change mid-stream. The reference types
# each as nullable (the SDK sends null for one it leaves alone): null is "not given".
UPDATE_CONFIGURATION = FieldTable(
    "AssemblyAI UpdateConfiguration",
    (
        _type("UpdateConfiguration"),
        _threshold("end_of_turn_confidence_threshold", STREAMING, nullable=True),
        _silence("min_end_of_turn_silence_when_confident", STREAMING, nullable=True),
        _silence("min_turn_silence", U3_PRO, nullable=True),
        _silence("max_turn_silence", STREAMING, nullable=True),
        _threshold("vad_threshold", SDK, nullable=True),
        FieldSpec("format_turns", BOOL, STREAMING, nullable=True),
        _keyterms(U3_PRO, nullable=True),
        FieldSpec("filter_profanity", BOOL, SDK, nullable=True),
        FieldSpec("prompt", STRING, U3_PRO, nullable=True),
        FieldSpec("agent_context", STRING, U3_PRO, nullable=True),
        FieldSpec("interruption_delay", INT, SDK, low=0, nullable=True),
        FieldSpec("turn_left_pad_ms", INT, SDK, low=0, nullable=True),
        FieldSpec("language_codes", STRINGS, SDK, nullable=True),
    ),
)
FORCE_ENDPOINT = FieldTable("AssemblyAI ForceEndpoint", (_type("ForceEndpoint"),))
TERMINATE = FieldTable("AssemblyAI Terminate", (_type("Terminate"),))
KEEP_ALIVE = FieldTable("AssemblyAI KeepAlive", (_type("KeepAlive"),))

# Every client text message, by its `type`.
MESSAGES = {
    table["type"].choices[0]: table
    for table in (UPDATE_CONFIGURATION, FORCE_ENDPOINT, TERMINATE, KEEP_ALIVE)
}
TABLES = (QUERY, *MESSAGES.values())

__all__ = [
    "FORCE_ENDPOINT",
    "KEEP_ALIVE",
    "MESSAGES",
    "QUERY",
    "TABLES",
    "TERMINATE",
    "UPDATE_CONFIGURATION",
]
