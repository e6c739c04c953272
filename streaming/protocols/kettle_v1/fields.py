"""kettle v1's field tables, from docs/protocol.md (revision 1.2), whose sections the rows
name: the handshake's query parameters, the `config` message's fields and
the control messages. `kettle_v1_wire` parses every client message against these tables.
"""

from __future__ import annotations

from kettle.streaming.protocols.fields import BOOL, ENUM, INT, STRING, FieldSpec, FieldTable
from kettle.transcribe.model.languages import LANGUAGES

CONNECTING = "docs/protocol.md#connecting"
CLIENT_TO_SERVER = "docs/protocol.md#client-to-server"

ENCODINGS = ("pcm_s16le", "pcm_f32le", "mulaw")
MIN_SAMPLE_RATE = 8000
MAX_SAMPLE_RATE = 48000
MAX_SPEAKERS = 16


# The settings fields the query string and `config` share (the query has fewer of them).
def _sample_rate(url: str) -> FieldSpec:
    # "an integer": 16000.0 is refused, as it always was.
    return FieldSpec(
        "sample_rate", INT, url, low=MIN_SAMPLE_RATE, high=MAX_SAMPLE_RATE, integral_floats=False
    )


def _encoding(url: str) -> FieldSpec:
    return FieldSpec("encoding", ENUM, url, choices=ENCODINGS)


def _channels(url: str) -> FieldSpec:
    return FieldSpec("channels", INT, url, low=1, high=2, integral_floats=False)


def _language(url: str) -> FieldSpec:
    # "an ISO 639-1 code, or null": the codes of the languages Whisper knows, in any case
    # ("EN" is "en"); in the query, an empty value or "null" is null.
    choices = tuple(sorted(LANGUAGES))
    return FieldSpec("language", ENUM, url, choices=choices, nullable=True, fold_case=True)


def _type(name: str) -> FieldSpec:
    return FieldSpec("type", ENUM, CLIENT_TO_SERVER, required=True, choices=(name,))


QUERY = FieldTable(
    "kettle v1 /v1/stream query",
    (
        FieldSpec("token", STRING, CONNECTING),
        _sample_rate(CONNECTING),
        _encoding(CONNECTING),
        _channels(CONNECTING),
        _language(CONNECTING),
    ),
)
CONFIG = FieldTable(
    "kettle v1 config",
    (
        _type("config"),
        _sample_rate(CLIENT_TO_SERVER),
        _encoding(CLIENT_TO_SERVER),
        _channels(CLIENT_TO_SERVER),
        _language(CLIENT_TO_SERVER),
        FieldSpec("partials", BOOL, CLIENT_TO_SERVER),
        FieldSpec("word_timestamps", BOOL, CLIENT_TO_SERVER),
        FieldSpec("revisions", BOOL, CLIENT_TO_SERVER),
        FieldSpec("diarize", BOOL, CLIENT_TO_SERVER),
        FieldSpec(
            "max_speakers", INT, CLIENT_TO_SERVER, low=1, high=MAX_SPEAKERS, integral_floats=False
        ),
    ),
)
FINALIZE = FieldTable("kettle v1 finalize", (_type("finalize"),))
STOP = FieldTable("kettle v1 stop", (_type("stop"),))
KEEPALIVE = FieldTable("kettle v1 keepalive", (_type("keepalive"),))

# Every client text message, by its `type`.
MESSAGES = {table["type"].choices[0]: table for table in (CONFIG, FINALIZE, STOP, KEEPALIVE)}
TABLES = (QUERY, *MESSAGES.values())

__all__ = ["CONFIG", "FINALIZE", "KEEPALIVE", "MESSAGES", "QUERY", "STOP", "TABLES"]
