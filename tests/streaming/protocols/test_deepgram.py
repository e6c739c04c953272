"""The Deepgram live codec: query parsing, credentials, and the event -> message mapping,
checked against the official SDK's own message models."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from deepgram.listen.v1.types import (
    ListenV1ConfigureFailure,
    ListenV1Error,
    ListenV1Metadata,
    ListenV1Results,
    ListenV1SpeechStarted,
    ListenV1UtteranceEnd,
)
from kettle.streaming.events import (
    Done,
    Error,
    Final,
    Finalized,
    NoTranscript,
    Partial,
    SpeechStarted,
)
from kettle.streaming.protocols.deepgram import (
    IDLE_REASON,
    MIN_ENDPOINTING_MS,
    Action,
    Close,
    DeepgramLiveCodec,
    FinalizeStream,
    ListenParamError,
    ListenParams,
    ModelIdentity,
    Send,
    StopStream,
    listen_credentials,
    parse_listen_query,
)
from kettle.transcribe.types import SAMPLE_RATE, Word

SR = SAMPLE_RATE
MODEL = ModelIdentity("tiny.en", "0.1.0")
MODELS: dict[str, Any] = {  # the SDK models, validated strictly (pydantic v2)
    "Results": ListenV1Results,
    "Metadata": ListenV1Metadata,
    "SpeechStarted": ListenV1SpeechStarted,
    "UtteranceEnd": ListenV1UtteranceEnd,
    "Error": ListenV1Error,
    "ConfigureFailure": ListenV1ConfigureFailure,
}


def parse(query: str, *, multilingual: bool = False) -> ListenParams:
    return parse_listen_query(query, multilingual=multilingual, model_name="tiny.en")


def codec(query: str = "encoding=linear16&sample_rate=16000") -> DeepgramLiveCodec:
    return DeepgramLiveCodec(
        parse(query), request_id="req-1", created="2026-12-01T08:00:00.000Z", model=MODEL
    )


def messages(actions: list[Action]) -> list[dict[str, Any]]:
    """The JSON of every Send, each validated strictly by the SDK's model for its type."""
    out = []
    for action in actions:
        if isinstance(action, Send):
            obj = json.loads(action.text)  # every text frame is JSON
            MODELS[obj["type"]].model_validate(obj)
            out.append(obj)
    return out


def final(
    utterance: int,
    start_s: float,
    end_s: float,
    text: str,
    reason: str | None,
    words: tuple[Word, ...] | None = None,
) -> Final:
    if words is None:
        tokens = text.split()
        step = (end_s - start_s) / max(len(tokens), 1)
        words = tuple(
            Word(" " + t, start_s + i * step, start_s + (i + 1) * step, 0.9)
            for i, t in enumerate(tokens)
        )
    return Final(utterance, int(start_s * SR), int(end_s * SR), text, words, "en", reason=reason)


# -- the handshake ---------------------------------------------------------------------------


def test_query_defaults_and_every_parameter() -> None:
    p = parse("encoding=linear16")
    assert (p.sample_rate, p.channels, p.language, p.interim_results) == (16000, 1, "en", False)
    assert p.endpointing and p.endpointing_ms is None and p.utterance_end_ms is None
    assert not (p.vad_events or p.punctuate or p.smart_format or p.formatted)
    assert parse("encoding=mulaw").sample_rate == 8000 == parse("encoding=alaw").sample_rate
    assert parse("encoding=alaw").pcm_encoding == "alaw"
    p = parse(
        "model=nova-3&language=en-US&encoding=linear16&sample_rate=48000&channels=2"
        "&interim_results=true&endpointing=300&utterance_end_ms=1000&vad_events=True"
        "&punctuate=true&smart_format=false&diarize=true&multichannel=false"
    )
    assert (p.model, p.language, p.sample_rate, p.channels, p.frame_bytes) == (
        "nova-3",
        "en",
        48000,
        2,
        4,
    )
    assert p.interim_results and p.vad_events and p.punctuate and p.formatted
    assert (p.endpointing_ms, p.utterance_end_ms) == (300, 1000)
    config = p.session_config()
    assert config.endpoint_silence_ms == 300 and config.partials and config.word_timestamps
    assert config.vad_events and config.language == "en"
    # Deepgram's default of 10 ms would cut Whisper's windows into word fragments.
    assert parse("encoding=linear16&endpointing=10").session_config().endpoint_silence_ms == (
        MIN_ENDPOINTING_MS
    )
    off = parse("encoding=linear16&endpointing=false")
    assert not off.endpointing and off.session_config().endpoint_silence_ms == 500
    assert parse("encoding=linear16&language=multi", multilingual=True).language is None
    assert parse("encoding=linear16&language=de", multilingual=True).language == "de"


@pytest.mark.parametrize(
    ("query", "match"),
    [
        ("sample_rate=16000", "encoding is required"),
        ("encoding=opus", "encoding must be one of"),
        ("encoding=linear16&sample_rate=7000", "sample_rate"),
        ("encoding=linear16&sample_rate=fast", "sample_rate"),
        ("encoding=linear16&channels=3", "channels"),
        ("encoding=linear16&multichannel=true", "multichannel"),
        ("encoding=linear16&language=de", "English-only"),
        ("encoding=linear16&language=xx", "language"),
        ("encoding=linear16&interim_results=yes", "interim_results"),
        ("encoding=linear16&endpointing=-5", "endpointing"),
        ("encoding=linear16&utterance_end_ms=0", "utterance_end_ms"),
        ("encoding=linear16&encoding=mulaw", "more than once"),
        ("encoding=linear16&model=%ff", "decoded"),
    ],
)
def test_bad_query_is_refused_with_a_reason(query: str, match: str) -> None:
    with pytest.raises(ListenParamError, match=match):
        parse(query)


def test_credentials_from_header_or_subprotocols() -> None:
    assert listen_credentials("Token abc", []) == ("abc", None)
    assert listen_credentials("token  abc ", []) == ("abc", None)
    assert listen_credentials("bearer jwt.x.y", []) == ("jwt.x.y", None)
    assert listen_credentials(None, ["token", "abc"]) == ("abc", "token")
    assert listen_credentials(None, ["token"]) == (None, None)
    assert listen_credentials("Basic abc", ["realtime"]) == (None, None)


# -- client messages -------------------------------------------------------------------------


def test_control_messages() -> None:
    c = codec()
    assert c.on_text('{"type": "KeepAlive"}') == []
    # Before any audio there is no stream: the Finalize is answered at once.
    finalize, answer = c.on_text('{"type": "Finalize"}')
    assert finalize == FinalizeStream() and messages([answer])[0]["from_finalize"] is True
    c.on_audio(b"\x00\x00")
    assert c.on_text('{"type": "Finalize"}') == [FinalizeStream()]
    (refused,) = messages(c.on_text('{"type": "Configure", "keyterms": ["kettle"]}'))
    assert refused["code"] == "CONFIGURE_KEYTERMS_NOT_SUPPORTED"
    for bad in ("not json", "[1]", '{"type": "Dance"}', '{"kind": "KeepAlive"}'):
        (error,) = messages(c.on_text(bad))
        assert error["variant"] == "SchemaError" and error["message"] == bad
    assert c.on_text('{"type": "CloseStream"}') == [StopStream()]
    # After CloseStream nothing more is taken.
    assert c.on_text('{"type": "Finalize"}') == [] and c.on_audio(b"\x00\x00") == []
    assert c.on_idle() == []


def test_empty_binary_frame_closes_the_stream_as_the_old_api_did() -> None:
    c = codec()
    assert c.on_audio(b"\x01\x00") == []
    assert c.on_audio(b"") == [StopStream()]


# -- engine events ---------------------------------------------------------------------------


def test_interim_and_final_results_carry_what_the_sdk_requires() -> None:
    c = codec("encoding=linear16&interim_results=true&punctuate=true")
    (interim,) = messages(c.on_event(Partial(0, SR, 2 * SR, "Hello, wor", "Hello,")))
    assert interim["is_final"] is False and interim["speech_final"] is False
    assert (interim["start"], interim["duration"], interim["channel_index"]) == (1.0, 1.0, [0, 1])
    alt = interim["channel"]["alternatives"][0]
    assert alt["transcript"] == "Hello, wor" and alt["confidence"] == 0.0
    assert [(w["word"], w["punctuated_word"], w["start"], w["end"]) for w in alt["words"]] == [
        ("hello", "Hello,", 1.0, 1.5),
        ("wor", "wor", 1.5, 2.0),
    ]
    assert interim["metadata"] == {
        "request_id": "req-1",
        "model_info": {"name": "tiny.en", "version": "0.1.0", "arch": "whisper"},
        "model_uuid": MODEL.uuid,
    }
    words = (Word(" Hello,", 1.1, 1.4, 0.8), Word(" world.", 1.5, 1.9, 0.6))
    (done,) = messages(c.on_event(final(0, 1.0, 2.5, "Hello, world.", "endpoint", words)))
    assert done["is_final"] is True and done["speech_final"] is True
    assert done["from_finalize"] is False and (done["start"], done["duration"]) == (1.0, 1.5)
    alt = done["channel"]["alternatives"][0]
    assert alt["transcript"] == "Hello, world." and alt["confidence"] == 0.7
    assert alt["words"] == [
        {"word": "hello", "start": 1.1, "end": 1.4, "confidence": 0.8, "punctuated_word": "Hello,"},
        {"word": "world", "start": 1.5, "end": 1.9, "confidence": 0.6, "punctuated_word": "world."},
    ]
    sends = c.on_event(final(1, 3.0, 4.0, "Next.", "endpoint"))
    assert isinstance(sends[0], Send) and sends[0].kind == "final" and sends[0].utterance == 1


def test_without_interim_results_no_partials_and_plain_transcripts() -> None:
    c = codec("encoding=linear16")
    assert c.on_event(Partial(0, 0, SR, "Hello", "")) == []
    (done,) = messages(c.on_event(final(0, 0.0, 1.0, "Hello, World!", "endpoint")))
    assert done["channel"]["alternatives"][0]["transcript"] == "hello world"


@pytest.mark.parametrize(
    ("reason", "query", "speech_final"),
    [
        ("endpoint", "", True),
        ("endpoint", "&endpointing=false", False),
        ("max_length", "", False),
        ("stop", "", False),
        ("finalize", "", False),
    ],
)
def test_speech_final_only_when_the_endpoint_was_heard(
    reason: str, query: str, speech_final: bool
) -> None:
    c = codec("encoding=linear16" + query)
    (done,) = messages(c.on_event(final(0, 0.0, 1.0, "Hi.", reason)))
    assert done["is_final"] is True and done["speech_final"] is speech_final


def test_finalize_is_answered_with_from_finalize() -> None:
    c = codec()
    c.on_audio(b"\x00\x00" * SR * 4)
    c.on_event(SpeechStarted(0))
    c.on_event(SpeechStarted(2 * SR))
    assert c.on_text('{"type": "Finalize"}') == [FinalizeStream()]
    assert c.on_event(Finalized(4 * SR)) == []  # waits for both utterances
    (earlier,) = messages(c.on_event(final(0, 0.0, 1.0, "One.", "endpoint")))
    assert earlier["from_finalize"] is False
    # The final that resolves the last utterance open at the Finalize answers it.
    (answer,) = messages(c.on_event(final(1, 2.0, 3.0, "Two.", "finalize")))
    assert answer["from_finalize"] is True and answer["is_final"] is True
    # Nothing open: answered at once with an empty final.
    (empty,) = messages(c.on_event(Finalized(4 * SR)))
    assert empty["from_finalize"] is True and empty["is_final"] is True
    assert empty["channel"]["alternatives"][0] == {"transcript": "", "confidence": 0.0, "words": []}
    assert (empty["start"], empty["duration"]) == (4.0, 0.0)


def test_finalize_of_an_utterance_without_words_is_answered_empty() -> None:
    c = codec()
    c.on_audio(b"\x00\x00" * SR)
    c.on_event(SpeechStarted(100))
    c.on_event(Finalized(SR))
    (empty,) = messages(c.on_event(NoTranscript(100)))
    assert (
        empty["from_finalize"] is True and empty["channel"]["alternatives"][0]["transcript"] == ""
    )
    assert c.on_event(NoTranscript(100)) == []  # already resolved: nothing more


def test_close_stream_ends_with_metadata_then_close_1000() -> None:
    c = codec("encoding=mulaw&sample_rate=8000&channels=2")
    audio = bytes(range(256)) * 100
    c.on_audio(audio[:1001])
    c.on_audio(audio[1001:])
    assert c.on_text('{"type": "CloseStream"}') == [StopStream()]
    (last,) = messages(c.on_event(final(0, 0.0, 1.0, "Bye.", "stop")))
    assert last["is_final"] and not last["speech_final"]
    actions = c.on_event(Done(SR, 1))
    (meta,) = messages(actions)
    assert actions[-1] == Close(1000)
    assert meta["request_id"] == "req-1" and meta["channels"] == 2
    assert meta["duration"] == round(len(audio) / 2 / 8000, 3)
    assert meta["sha256"] == hashlib.sha256(audio).hexdigest()
    assert meta["models"] == [MODEL.uuid] and meta["model_info"][MODEL.uuid]["name"] == "tiny.en"


def test_idle_and_shutdown_close_codes() -> None:
    c = codec()
    assert c.on_idle() == [StopStream("idle")]
    assert c.on_event(Done(0, 0, "idle"))[-1] == Close(1011, IDLE_REASON)
    assert codec().on_event(Done(0, 0, "shutdown"))[-1] == Close(1001, "server shutting down")


def test_errors_overload_is_quiet_internal_is_reported_fatal_closes() -> None:
    c = codec()
    assert c.on_event(Error("overloaded", "skipping partials")) == []
    (err,) = messages(c.on_event(Error("internal", "could not transcribe")))
    assert err["variant"] == "InternalError" and err["description"] == "could not transcribe"
    actions = c.on_event(Error("internal", "broken", fatal=True))
    assert actions[-1] == Close(1011, "internal error")


def test_speech_started_only_with_vad_events() -> None:
    assert codec().on_event(SpeechStarted(SR)) == []
    (started,) = messages(codec("encoding=linear16&vad_events=true").on_event(SpeechStarted(SR)))
    assert started == {"type": "SpeechStarted", "channel": [0, 1], "timestamp": 1.0}


SECOND = b"\x00\x00" * SR  # one second of linear16 at 16 kHz
QUARTER = SECOND[: len(SECOND) // 4]


def test_utterance_end_after_the_gap_on_the_audio_clock() -> None:
    c = codec("encoding=linear16&interim_results=true&utterance_end_ms=1000")
    c.on_audio(SECOND * 2)
    c.on_event(SpeechStarted(0))
    words = (Word(" Hi.", 0.5, 1.5, 0.9),)
    assert len(messages(c.on_event(final(0, 0.0, 2.0, "Hi.", "endpoint", words)))) == 1
    assert c.on_audio(QUARTER) == []  # 2.25 s: 0.75 s past the last word
    (end,) = messages(c.on_audio(QUARTER))  # 2.5 s: 1 s past it
    assert end == {"type": "UtteranceEnd", "channel": [0, 1], "last_word_end": 1.5}
    assert c.on_audio(SECOND * 3) == []  # once


def test_utterance_end_not_sent_while_speech_goes_on() -> None:
    c = codec("encoding=linear16&interim_results=true&utterance_end_ms=1000")
    c.on_audio(SECOND * 2)
    c.on_event(final(0, 0.0, 1.8, "One.", "endpoint", (Word(" One.", 0.2, 1.5, 0.9),)))
    assert c.on_event(SpeechStarted(int(2.1 * SR))) == []  # 0.6 s gap: the talk goes on
    assert c.on_audio(SECOND * 5) == []


def test_utterance_end_when_the_final_comes_after_the_next_speech() -> None:
    # The final of the first utterance arrives after the second began: the gap between its
    # last word and the new speech decides, known only now.
    c = codec("encoding=linear16&interim_results=true&utterance_end_ms=1000")
    c.on_audio(SECOND * 5)
    c.on_event(SpeechStarted(0))
    c.on_event(SpeechStarted(4 * SR))
    out = messages(c.on_event(final(0, 0.0, 2.0, "One.", "endpoint", (Word("One.", 0, 1, 0.9),))))
    assert [m["type"] for m in out] == ["Results", "UtteranceEnd"]
    c2 = codec("encoding=linear16&interim_results=true&utterance_end_ms=1000")
    c2.on_event(SpeechStarted(int(1.5 * SR)))
    out = messages(c2.on_event(final(0, 0.0, 1.2, "One.", "endpoint", (Word("One.", 0, 1, 0.9),))))
    assert [m["type"] for m in out] == ["Results"]
    assert c2.on_audio(SECOND * 5) == []
