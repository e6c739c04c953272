"""Deepgram's field tables, from its public reference: every query parameter of live
``/v1/listen``, prerecorded ``POST /v1/listen`` and Flux ``/v2/listen``, and every field of
the client messages kettle reads. The parsers (deepgram_wire, deepgram_rest,
deepgram_flux_wire, deepgram_configure) check what a client sends against these rows before
they use it, and read nothing else. No I/O.

Where the reference gives a type but no range, the row carries kettle's own bound (sample
rates, channels, endpointing, utterance_end_ms), so that one table says all that is checked.
Parameters kettle does not implement (``tag``, ``search``, ``numerals``, ...) have rows too:
their values are checked and then ignored, or refused where kettle refuses the feature.

Choices where the reference leaves room (a careful client's reading):

- ``model`` is an open enum (the reference lists names, and custom models exist): any
  string on ``/v1/listen``. The live reference's generated schema marks it required, but
  Deepgram's service and kettle's clients connect without it and kettle serves its own model
  whatever is named, so it stays optional there; on Flux it is required and one of two names.
- ``encoding`` takes Deepgram's whole list of encodings on both ``/v1/listen`` surfaces
  (the prerecorded schema omits ``alaw``, ``ogg-opus`` and ``linear32``, which the encoding
  guide lists); kettle then refuses those it cannot decode. Its case is not significant.
- ``endpointing`` is milliseconds, or ``false`` (and ``true``: the default endpoint).
- booleans are ``true``/``false`` in any case, as Deepgram's service takes them.
"""

from __future__ import annotations

from kettle.kernels.pcm import MAX_CHANNELS, MAX_SAMPLE_RATE, MIN_SAMPLE_RATE
from kettle.streaming.protocols.fields import (
    BOOL,
    ENUM,
    INT,
    NUMBER,
    OBJECT,
    STRING,
    STRINGS,
    FieldSpec,
    FieldTable,
)

LIVE_URL = "https://developers.deepgram.com/reference/speech-to-text/listen-streaming"
PRERECORDED_URL = "https://developers.deepgram.com/reference/speech-to-text/listen-pre-recorded"
FLUX_URL = "https://developers.deepgram.com/reference/speech-to-text/listen-flux"
FLUX_EOT_URL = "https://developers.deepgram.com/docs/flux/configuration"
ENCODING_URL = "https://developers.deepgram.com/docs/encoding"
SAMPLE_RATE_URL = "https://developers.deepgram.com/docs/sample-rate"
CHANNELS_URL = "https://developers.deepgram.com/docs/channels"

# Deepgram's encodings (the encoding guide's list; each surface's kettle subset is narrower).
ENCODING_NAMES = (
    "linear16",
    "linear32",
    "flac",
    "alaw",
    "mulaw",
    "amr-nb",
    "amr-wb",
    "opus",
    "ogg-opus",
    "speex",
    "g729",
)
FLUX_ENCODING_NAMES = ("linear16", "linear32", "mulaw", "alaw", "opus", "ogg-opus")
FLUX_MODELS = ("flux-general-en", "flux-general-multi")

# kettle's bounds where the reference gives none.
MAX_ENDPOINTING_MS = 10000
MAX_UTTERANCE_END_MS = 600_000
MIN_RAW_SAMPLE_RATE = 1000  # prerecorded raw audio (the file reader resamples)
MAX_RAW_SAMPLE_RATE = 192000
MAX_RAW_CHANNELS = 32

# Flux's documented ranges.
EOT_RANGE = (0.5, 1.0)
EAGER_RANGE = (0.3, 0.9)
TIMEOUT_RANGE = (500, 60_000)


def _bool(name: str, url: str) -> FieldSpec:
    return FieldSpec(name, BOOL, url)


def _strings(name: str, url: str, *choices: str) -> FieldSpec:
    """A parameter that may repeat (``tag=a&tag=b``), each value checked."""
    return FieldSpec(name, STRINGS, url, choices=choices)


LIVE_QUERY = FieldTable(
    "Deepgram /v1/listen (live) query",
    (
        FieldSpec("callback", STRING, LIVE_URL),
        FieldSpec("callback_method", ENUM, LIVE_URL, choices=("POST", "GET", "PUT", "DELETE")),
        FieldSpec("channels", INT, LIVE_URL, low=1, high=MAX_CHANNELS),
        _bool("detect_entities", LIVE_URL),
        _bool("diarize", LIVE_URL),
        FieldSpec("diarize_model", ENUM, LIVE_URL, choices=("latest", "v1")),
        _bool("dictation", LIVE_URL),
        FieldSpec("encoding", ENUM, LIVE_URL, choices=ENCODING_NAMES),
        FieldSpec(
            "endpointing", INT, LIVE_URL, low=0, high=MAX_ENDPOINTING_MS, literals=("true", "false")
        ),
        _strings("extra", LIVE_URL),
        _bool("interim_results", LIVE_URL),
        _strings("keyterm", LIVE_URL),
        _strings("keywords", LIVE_URL),
        FieldSpec("language", STRING, LIVE_URL),
        _strings("language_hint", LIVE_URL),
        _bool("mip_opt_out", LIVE_URL),
        FieldSpec("model", STRING, LIVE_URL),
        _bool("multichannel", LIVE_URL),
        _bool("numerals", LIVE_URL),
        _bool("profanity_filter", LIVE_URL),
        _bool("punctuate", LIVE_URL),
        _strings(
            "redact", LIVE_URL, "true", "false", "pci", "numbers", "aggressive_numbers", "ssn"
        ),
        _strings("replace", LIVE_URL),
        FieldSpec("sample_rate", INT, LIVE_URL, low=MIN_SAMPLE_RATE, high=MAX_SAMPLE_RATE),
        _strings("search", LIVE_URL),
        _bool("smart_format", LIVE_URL),
        _strings("tag", LIVE_URL),
        FieldSpec("utterance_end_ms", INT, LIVE_URL, low=1, high=MAX_UTTERANCE_END_MS),
        _bool("vad_events", LIVE_URL),
        FieldSpec("version", STRING, LIVE_URL),
    ),
)

PRERECORDED_QUERY = FieldTable(
    "Deepgram POST /v1/listen (prerecorded) query",
    (
        FieldSpec("callback", STRING, PRERECORDED_URL),
        FieldSpec("callback_method", ENUM, PRERECORDED_URL, choices=("POST", "PUT")),
        FieldSpec("channels", INT, CHANNELS_URL, low=1, high=MAX_RAW_CHANNELS),
        _strings("custom_intent", PRERECORDED_URL),
        FieldSpec("custom_intent_mode", ENUM, PRERECORDED_URL, choices=("extended", "strict")),
        _strings("custom_topic", PRERECORDED_URL),
        FieldSpec("custom_topic_mode", ENUM, PRERECORDED_URL, choices=("extended", "strict")),
        _bool("detect_entities", PRERECORDED_URL),
        _bool("detect_language", PRERECORDED_URL),
        _bool("diarize", PRERECORDED_URL),
        FieldSpec("diarize_model", ENUM, PRERECORDED_URL, choices=("latest", "v1", "v2")),
        _bool("dictation", PRERECORDED_URL),
        FieldSpec("encoding", ENUM, ENCODING_URL, choices=ENCODING_NAMES),
        _strings("extra", PRERECORDED_URL),
        _bool("filler_words", PRERECORDED_URL),
        _bool("intents", PRERECORDED_URL),
        _strings("keyterm", PRERECORDED_URL),
        _strings("keywords", PRERECORDED_URL),
        FieldSpec("language", STRING, PRERECORDED_URL),
        _strings("language_hint", PRERECORDED_URL),
        _bool("measurements", PRERECORDED_URL),
        _bool("mip_opt_out", PRERECORDED_URL),
        FieldSpec("model", STRING, PRERECORDED_URL),
        _bool("multichannel", PRERECORDED_URL),
        _bool("numerals", PRERECORDED_URL),
        _bool("paragraphs", PRERECORDED_URL),
        _bool("profanity_filter", PRERECORDED_URL),
        _bool("punctuate", PRERECORDED_URL),
        _strings("redact", PRERECORDED_URL),
        _strings("replace", PRERECORDED_URL),
        FieldSpec(
            "sample_rate", INT, SAMPLE_RATE_URL, low=MIN_RAW_SAMPLE_RATE, high=MAX_RAW_SAMPLE_RATE
        ),
        _strings("search", PRERECORDED_URL),
        _bool("sentiment", PRERECORDED_URL),
        _bool("smart_format", PRERECORDED_URL),
        # The reference names v2; the older guides' true/false are taken too.
        FieldSpec("summarize", ENUM, PRERECORDED_URL, choices=("v2", "true", "false")),
        _strings("tag", PRERECORDED_URL),
        _bool("topics", PRERECORDED_URL),
        FieldSpec("utt_split", NUMBER, PRERECORDED_URL, low=0),
        _bool("utterances", PRERECORDED_URL),
        FieldSpec("version", STRING, PRERECORDED_URL),
    ),
)

FLUX_QUERY = FieldTable(
    "Deepgram /v2/listen (Flux) query",
    (
        FieldSpec("model", ENUM, FLUX_URL, required=True, choices=FLUX_MODELS),
        FieldSpec("encoding", ENUM, FLUX_URL, choices=FLUX_ENCODING_NAMES),
        FieldSpec("sample_rate", INT, FLUX_URL, low=MIN_SAMPLE_RATE, high=MAX_SAMPLE_RATE),
        FieldSpec(
            "eager_eot_threshold", NUMBER, FLUX_EOT_URL, low=EAGER_RANGE[0], high=EAGER_RANGE[1]
        ),
        FieldSpec("eot_threshold", NUMBER, FLUX_EOT_URL, low=EOT_RANGE[0], high=EOT_RANGE[1]),
        FieldSpec("eot_timeout_ms", INT, FLUX_EOT_URL, low=TIMEOUT_RANGE[0], high=TIMEOUT_RANGE[1]),
        _strings("keyterm", FLUX_URL),
        _strings("language_hint", FLUX_URL),
        _bool("mip_opt_out", FLUX_URL),
        _bool("numerals", FLUX_URL),
        _bool("profanity_filter", FLUX_URL),
        _strings("redact", FLUX_URL, "numbers", "aggressive_numbers"),
        _strings("tag", FLUX_URL),
    ),
)

# -- client messages --------------------------------------------------------------------------

LIVE_MESSAGE_TYPES = ("KeepAlive", "Finalize", "CloseStream", "Configure")
LIVE_MESSAGE = FieldTable(
    "Deepgram /v1/listen client message",
    (FieldSpec("type", ENUM, LIVE_URL, required=True, choices=LIVE_MESSAGE_TYPES),),
)
LIVE_CONFIGURE = FieldTable(
    "Deepgram /v1/listen Configure",
    (
        FieldSpec("keyterms", STRINGS, LIVE_URL, nullable=True),
        FieldSpec("features", OBJECT, LIVE_URL, nullable=True),  # of booleans: the codec's check
    ),
)

# KeepAlive is Nova's message, not Flux's: kettle's Flux takes it quietly all the same.
FLUX_MESSAGE_TYPES = ("Configure", "ForceEndTurn", "CloseStream", "KeepAlive")
FLUX_MESSAGE = FieldTable(
    "Deepgram /v2/listen client message",
    (FieldSpec("type", ENUM, FLUX_URL, required=True, choices=FLUX_MESSAGE_TYPES),),
)
FLUX_CONFIGURE = FieldTable(
    "Deepgram /v2/listen Configure",
    (
        FieldSpec("thresholds", OBJECT, FLUX_URL, nullable=True),  # FLUX_THRESHOLDS' fields
        FieldSpec("keyterms", STRINGS, FLUX_URL, nullable=True),
        FieldSpec("language_hints", STRINGS, FLUX_URL, nullable=True),
        FieldSpec("numerals", BOOL, FLUX_URL, nullable=True),
    ),
)
FLUX_THRESHOLDS = FieldTable(
    "Deepgram /v2/listen Configure thresholds",
    (
        FieldSpec(
            "eot_threshold",
            NUMBER,
            FLUX_EOT_URL,
            low=EOT_RANGE[0],
            high=EOT_RANGE[1],
            nullable=True,
        ),
        FieldSpec(
            "eager_eot_threshold",
            NUMBER,
            FLUX_EOT_URL,
            low=EAGER_RANGE[0],
            high=EAGER_RANGE[1],
            nullable=True,
        ),
        FieldSpec(
            "eot_timeout_ms",
            INT,
            FLUX_EOT_URL,
            low=TIMEOUT_RANGE[0],
            high=TIMEOUT_RANGE[1],
            nullable=True,
        ),
    ),
)

QUERY_TABLES = (LIVE_QUERY, PRERECORDED_QUERY, FLUX_QUERY)
MESSAGE_TABLES = (LIVE_MESSAGE, LIVE_CONFIGURE, FLUX_MESSAGE, FLUX_CONFIGURE, FLUX_THRESHOLDS)

__all__ = [
    "EAGER_RANGE",
    "ENCODING_NAMES",
    "EOT_RANGE",
    "FLUX_CONFIGURE",
    "FLUX_MESSAGE",
    "FLUX_MODELS",
    "FLUX_QUERY",
    "FLUX_THRESHOLDS",
    "LIVE_CONFIGURE",
    "LIVE_MESSAGE",
    "LIVE_QUERY",
    "MESSAGE_TABLES",
    "PRERECORDED_QUERY",
    "QUERY_TABLES",
    "TIMEOUT_RANGE",
]
