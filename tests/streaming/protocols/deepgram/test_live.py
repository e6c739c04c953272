"""The Deepgram live codec: query parsing, credentials, and the event -> message mapping,
checked against the official SDK's own message models."""

from __future__ import annotations

import hashlib
import json

import pytest
from kettle.streaming.core.backlog import FINAL, PARTIAL
from kettle.streaming.core.events import (
    Done,
    Error,
    Finalized,
    NoTranscript,
    Partial,
    SpeechStarted,
)
from kettle.streaming.protocols.base import (
    AudioReceived,
    FeedAudio,
    Finalize,
    Reconfigure,
    Send,
    Stop,
)
from kettle.streaming.protocols.deepgram.live import (
    FRAME_TOO_BIG,
    NET_0001,
    kettle_version,
)
from kettle.streaming.protocols.deepgram.wire import ModelIdentity
from kettle.transcribe.types import SAMPLE_RATE, Word

from tests.streaming.protocols.api_models import Gate
from tests.streaming.protocols.deepgram.conftest import (
    LIMIT,
    RAW,
    RECEIVED,
    codec,
    final,
    messages,
)

SR = SAMPLE_RATE
REQUEST_ID = "01234567-89ab-cdef-0123-456789abcdef"
MODEL = ModelIdentity("tiny.en", kettle_version())


ALLOW = Gate()


# -- client messages -------------------------------------------------------------------------


def test_control_messages() -> None:
    c = codec()
    assert c.on_text('{"type": "KeepAlive"}', ALLOW) == []
    # Before any audio there is no stream: the Finalize is answered at once.
    (answer,) = messages(c.on_text('{"type": "Finalize"}', ALLOW))
    assert answer["from_finalize"] is True and answer["is_final"] is True
    c.on_binary(b"\x00\x00")
    assert c.on_text('{"type": "Finalize"}', ALLOW) == [Finalize()]
    (applied,) = messages(c.on_text('{"type": "Configure", "keyterms": ["kettle"]}', ALLOW))
    assert applied == {"type": "ConfigureSuccess", "request_id": REQUEST_ID, "keyterms": ["kettle"]}
    for bad in ("not json", "[1]", '{"type": "Dance"}', '{"kind": "KeepAlive"}'):
        (error,) = messages(c.on_text(bad, ALLOW))
        assert error["variant"] == "SchemaError" and error["message"] == bad
    assert c.on_text('{"type": "CloseStream"}', ALLOW) == [Stop()]
    # After CloseStream nothing more is taken.
    assert c.on_text('{"type": "Finalize"}', ALLOW) == [] and c.on_binary(b"\x00\x00") == []


def test_configure_replaces_keyterms_and_formatting() -> None:
    c = codec(RAW + "&keyterm=Kettle&keywords=Whisper:2")
    assert c.stream_setup().session.keyterms == ("Kettle", "Whisper")
    actions = c.on_text('{"type": "Configure", "keyterms": [" Ray ", "ray", "Ray Dalio"]}', ALLOW)
    assert actions[0] == Reconfigure(keyterms=("Ray", "Ray Dalio"))
    assert messages(actions)[0]["keyterms"] == ["Ray", "Ray Dalio"]
    # A stream that opens later opens with them too.
    assert c.stream_setup().session.keyterms == ("Ray", "Ray Dalio")
    # Absent or null keyterms keep them; features alone change the formatting.
    actions = c.on_text(
        '{"type": "Configure", "features": {"punctuate": true, "numerals": true}}', ALLOW
    )
    assert not any(isinstance(a, Reconfigure) for a in actions)
    (success,) = messages(actions)
    assert "keyterms" not in success and success["type"] == "ConfigureSuccess"
    c.on_binary(b"\x00\x00")
    (result,) = messages(c.on_event(final(0, 0.0, 1.0, "Hello, Ray.", "endpoint"), RECEIVED))
    assert result["channel"]["alternatives"][0]["transcript"] == "Hello, Ray."
    # [] clears them.
    assert c.on_text('{"type": "Configure", "keyterms": []}', ALLOW)[0] == Reconfigure(keyterms=())
    # Over the limit: a ConfigureFailure, nothing changed.
    many = json.dumps({"type": "Configure", "keyterms": [f"t{i}" for i in range(101)]})
    (failure,) = messages(c.on_text(many, ALLOW))
    assert failure["code"] == "CONFIGURE_KEYTERM_LIMIT_EXCEEDED"
    assert c.stream_setup().session.keyterms == ()
    for bad in ('{"type": "Configure", "keyterms": "x"}', '{"type": "Configure", "features": [1]}'):
        (error,) = messages(c.on_text(bad, ALLOW))
        assert error["variant"] == "SchemaError"


def test_rate_gate_and_frame_limit() -> None:
    c = codec()
    assert c.on_text('{"type": "KeepAlive"}', Gate("drop")) == []
    (limited,) = messages(c.on_text('{"type": "Finalize"}', Gate("notify")))
    assert limited["variant"] == "RateLimited"
    assert c.on_text('{"type": "CloseStream"}', Gate("drop")) == [Stop()]  # never dropped
    (leftover,) = messages(codec().on_leftover(1, 2))
    assert leftover["variant"] == "DataError"


def test_an_audio_message_over_the_limit_ends_the_stream_with_1009() -> None:
    big = codec()
    assert big.on_binary(b"\x00" * LIMIT) == [FeedAudio(b"\x00" * LIMIT)]  # the limit: taken
    actions = big.on_binary(b"\x00" * (LIMIT + 2))
    (refused,) = messages(actions)
    assert refused["variant"] == "DataError" and "over the limit" in refused["description"]
    assert actions[-1] == Stop(FRAME_TOO_BIG)  # not a silent gap: the stream ends
    assert big.on_binary(b"\x00\x00") == [] and big.on_text('{"type": "KeepAlive"}', ALLOW) == []
    # The finals of the audio before it come, then Metadata, then close 1009.
    (last,) = messages(big.on_event(final(0, 0.0, 1.0, "Hi.", "stop"), RECEIVED))
    assert last["is_final"]
    (done,) = big.on_event(Done(SR, 1, FRAME_TOO_BIG), RECEIVED)
    assert isinstance(done, Send) and done.message.closing
    assert (done.message.close_code, done.message.close_reason) == (1009, FRAME_TOO_BIG)
    assert json.loads(done.message.text)["duration"] == round(LIMIT / 2 / SR, 3)


def test_empty_binary_frame_closes_the_stream_as_the_old_api_did() -> None:
    c = codec()
    assert c.on_binary(b"\x01\x00") == [FeedAudio(b"\x01\x00")]
    assert c.on_binary(b"") == [Stop()]
    assert c.start() == []
    setup = codec("encoding=alaw&sample_rate=8000&channels=2").stream_setup()
    assert (setup.audio.encoding, setup.audio.sample_rate, setup.audio.channels) == (
        "alaw",
        8000,
        2,
    )
    assert setup.session.vad_events and setup.session.word_timestamps


# -- engine events ---------------------------------------------------------------------------


def test_interim_and_final_results_carry_what_the_sdk_requires() -> None:
    c = codec(RAW + "&interim_results=true&punctuate=true")
    (interim,) = messages(c.on_event(Partial(0, SR, 2 * SR, "Hello, wor", "Hello,"), RECEIVED))
    assert interim["is_final"] is False and interim["speech_final"] is False
    assert (interim["start"], interim["duration"], interim["channel_index"]) == (1.0, 1.0, [0, 1])
    alt = interim["channel"]["alternatives"][0]
    assert alt["transcript"] == "Hello, wor" and alt["confidence"] == 0.0
    assert [(w["word"], w["punctuated_word"], w["start"], w["end"]) for w in alt["words"]] == [
        ("hello", "Hello,", 1.0, 1.5),
        ("wor", "wor", 1.5, 2.0),
    ]
    assert interim["metadata"] == {
        "request_id": REQUEST_ID,
        "model_info": {"name": "tiny.en", "version": "0.1.0", "arch": "whisper"},
        "model_uuid": MODEL.uuid,
    }
    words = (Word(" Hello,", 1.1, 1.4, 0.8), Word(" world.", 1.5, 1.9, 0.6))
    (done,) = messages(c.on_event(final(0, 1.0, 2.5, "Hello, world.", "endpoint", words), RECEIVED))
    assert done["is_final"] is True and done["speech_final"] is True
    assert done["from_finalize"] is False and (done["start"], done["duration"]) == (1.0, 1.5)
    alt = done["channel"]["alternatives"][0]
    assert alt["transcript"] == "Hello, world." and alt["confidence"] == 0.7
    assert alt["words"] == [
        {"word": "hello", "start": 1.1, "end": 1.4, "confidence": 0.8, "punctuated_word": "Hello,"},
        {"word": "world", "start": 1.5, "end": 1.9, "confidence": 0.6, "punctuated_word": "world."},
    ]
    (send,) = c.on_event(final(1, 3.0, 4.0, "Next.", "endpoint"), RECEIVED)
    assert isinstance(send, Send) and send.message.kind == FINAL and send.message.utterance == 1
    (send,) = c.on_event(Partial(2, 5 * SR, 6 * SR, "And", ""), RECEIVED)
    assert isinstance(send, Send) and send.message.kind == PARTIAL and send.message.end == 6 * SR


def test_without_interim_results_no_partials_and_plain_transcripts() -> None:
    c = codec(RAW)
    assert c.on_event(Partial(0, 0, SR, "Hello", ""), RECEIVED) == []
    (done,) = messages(c.on_event(final(0, 0.0, 1.0, "Hello, World!", "endpoint"), RECEIVED))
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
    c = codec(RAW + query)
    (done,) = messages(c.on_event(final(0, 0.0, 1.0, "Hi.", reason), RECEIVED))
    assert done["is_final"] is True and done["speech_final"] is speech_final


def test_finalize_is_answered_with_from_finalize() -> None:
    c = codec()
    c.on_binary(b"\x00\x00" * SR * 4)
    c.on_event(SpeechStarted(0), RECEIVED)
    c.on_event(SpeechStarted(2 * SR), RECEIVED)
    assert c.on_text('{"type": "Finalize"}', ALLOW) == [Finalize()]
    assert c.on_event(Finalized(4 * SR), RECEIVED) == []  # waits for both utterances
    (earlier,) = messages(c.on_event(final(0, 0.0, 1.0, "One.", "endpoint"), RECEIVED))
    assert earlier["from_finalize"] is False
    # The final that resolves the last utterance open at the Finalize answers it.
    (answer,) = messages(c.on_event(final(1, 2.0, 3.0, "Two.", "finalize"), RECEIVED))
    assert answer["from_finalize"] is True and answer["is_final"] is True
    # Nothing open: answered at once with an empty final.
    (empty,) = messages(c.on_event(Finalized(4 * SR), RECEIVED))
    assert empty["from_finalize"] is True and empty["is_final"] is True
    assert empty["channel"]["alternatives"][0] == {"transcript": "", "confidence": 0.0, "words": []}
    assert (empty["start"], empty["duration"]) == (4.0, 0.0)


def test_finalizes_waiting_for_one_final_are_answered_once_each() -> None:
    # Two Finalizes reach the stream while the same utterance's final is decoded (the
    # second finds nothing newer open): each gets its own from_finalize answer.
    c = codec()
    c.on_binary(b"\x00\x00" * SR * 2)
    c.on_event(SpeechStarted(0), RECEIVED)
    assert c.on_event(Finalized(SR), RECEIVED) == []
    assert c.on_event(Finalized(2 * SR), RECEIVED) == []
    answer, extra = messages(c.on_event(final(0, 0.0, 1.0, "One.", "finalize"), RECEIVED))
    assert answer["from_finalize"] is True and answer["channel"]["alternatives"][0]["transcript"]
    assert extra["from_finalize"] is True and extra["is_final"] is True
    assert extra["channel"]["alternatives"][0]["transcript"] == ""


def test_finalize_of_an_utterance_without_words_is_answered_empty() -> None:
    c = codec()
    c.on_binary(b"\x00\x00" * SR)
    c.on_event(SpeechStarted(100), RECEIVED)
    c.on_event(Finalized(SR), RECEIVED)
    (empty,) = messages(c.on_event(NoTranscript(100), RECEIVED))
    assert (
        empty["from_finalize"] is True and empty["channel"]["alternatives"][0]["transcript"] == ""
    )
    assert c.on_event(NoTranscript(100), RECEIVED) == []  # already resolved: nothing more


def test_close_stream_ends_with_metadata_then_close_1000() -> None:
    c = codec("encoding=mulaw&sample_rate=8000&channels=2")
    audio = bytes(range(256)) * 100
    c.on_binary(audio[:1001])
    c.on_binary(audio[1001:])
    assert c.on_text('{"type": "CloseStream"}', ALLOW) == [Stop()]
    (last,) = messages(c.on_event(final(0, 0.0, 1.0, "Bye.", "stop"), RECEIVED))
    assert last["is_final"] and not last["speech_final"]
    actions = c.on_event(Done(SR, 1), RECEIVED)
    (meta,) = messages(actions)
    (send,) = actions
    assert isinstance(send, Send) and send.message.closing and not send.message.fatal
    assert meta["request_id"] == REQUEST_ID and meta["channels"] == 2
    assert meta["duration"] == round(len(audio) / 2 / 8000, 3)
    assert meta["sha256"] == hashlib.sha256(audio).hexdigest()
    assert meta["models"] == [MODEL.uuid] and meta["model_info"][MODEL.uuid]["name"] == "tiny.en"


def test_idle_closes_with_1011_and_net_0001_as_deepgram_does() -> None:
    (idle,) = codec().on_event(Done(0, 0, "idle"), RECEIVED)
    assert isinstance(idle, Send) and idle.message.closing and idle.message.fatal
    assert json.loads(idle.message.text)["type"] == "Metadata"
    # Deepgram's reason, word for word (clients match on it), within a close frame's 123 bytes.
    assert idle.message.close_reason == NET_0001 and "dpgr.am/net0001" in NET_0001
    assert len(NET_0001.encode()) <= 123
    (shutdown,) = codec().on_event(Done(0, 0, "shutdown"), RECEIVED)
    assert isinstance(shutdown, Send) and shutdown.message.closing and not shutdown.message.fatal


def test_finals_from_a_second_model_say_so() -> None:
    c = codec(RAW + "&interim_results=true", final_model="base")
    (interim,) = messages(c.on_event(Partial(0, 0, SR, "Hi", ""), RECEIVED))
    (done,) = messages(c.on_event(final(0, 0.0, 1.0, "Hi.", "endpoint"), RECEIVED))
    assert interim["metadata"]["model_info"]["name"] == "tiny.en"
    assert done["metadata"]["model_info"]["name"] == "base"
    (meta,) = messages(c.on_event(Done(SR, 1), RECEIVED))
    assert [meta["model_info"][u]["name"] for u in meta["models"]] == ["tiny.en", "base"]


def test_errors_overload_is_quiet_internal_is_reported_fatal_closes() -> None:
    c = codec()
    assert c.on_event(Error("overloaded", "skipping partials"), RECEIVED) == []
    (err,) = messages(c.on_event(Error("internal", "could not transcribe"), RECEIVED))
    assert err["variant"] == "InternalError" and err["description"] == "could not transcribe"
    (fatal,) = c.on_event(Error("internal", "broken", fatal=True), RECEIVED)
    assert isinstance(fatal, Send) and fatal.message.closing and fatal.message.fatal
    assert json.loads(c.fatal_error("boom")) == {
        "type": "Error",
        "variant": "InternalError",
        "description": "boom",
    }


def test_speech_started_only_with_vad_events() -> None:
    assert codec().on_event(SpeechStarted(SR), RECEIVED) == []
    (started,) = messages(codec(RAW + "&vad_events=true").on_event(SpeechStarted(SR), RECEIVED))
    assert started == {"type": "SpeechStarted", "channel": [0, 1], "timestamp": 1.0}


SECOND = b"\x00\x00" * SR  # one second of linear16 at 16 kHz
QUARTER = SECOND[: len(SECOND) // 4]


def test_utterance_end_after_the_gap_on_the_audio_clock() -> None:
    c = codec(RAW + "&interim_results=true&utterance_end_ms=1000")
    c.on_binary(SECOND * 2)
    c.on_event(SpeechStarted(0), RECEIVED)
    words = (Word(" Hi.", 0.5, 1.5, 0.9),)
    assert len(messages(c.on_event(final(0, 0.0, 2.0, "Hi.", "endpoint", words), RECEIVED))) == 1
    assert messages(c.on_binary(QUARTER)) == []  # 2.25 s: 0.75 s past the last word
    (end,) = messages(c.on_binary(QUARTER))  # 2.5 s: 1 s past it
    assert end == {"type": "UtteranceEnd", "channel": [0, 1], "last_word_end": 1.5}
    assert messages(c.on_binary(SECOND * 3)) == []  # once


def test_utterance_end_not_sent_while_speech_goes_on() -> None:
    c = codec(RAW + "&interim_results=true&utterance_end_ms=1000")
    c.on_binary(SECOND * 2)
    c.on_event(final(0, 0.0, 1.8, "One.", "endpoint", (Word(" One.", 0.2, 1.5, 0.9),)), RECEIVED)
    assert c.on_event(SpeechStarted(int(2.1 * SR)), RECEIVED) == []  # 0.6 s gap: talk goes on
    assert messages(c.on_binary(SECOND * 5)) == []


def test_utterance_end_when_the_final_comes_after_the_next_speech() -> None:
    # The final of the first utterance arrives after the second began: the gap between its
    # last word and the new speech decides, known only now.
    c = codec(RAW + "&interim_results=true&utterance_end_ms=1000")
    c.on_binary(SECOND * 5)
    c.on_event(SpeechStarted(0), RECEIVED)
    c.on_event(SpeechStarted(4 * SR), RECEIVED)
    c.on_event(SpeechStarted(int(4.5 * SR)), RECEIVED)  # the gap is to the next one, not this
    words = (Word("One.", 0, 1, 0.9),)
    out = messages(c.on_event(final(0, 0.0, 2.0, "One.", "endpoint", words), RECEIVED))
    assert [m["type"] for m in out] == ["Results", "UtteranceEnd"]
    c2 = codec(RAW + "&interim_results=true&utterance_end_ms=1000")
    c2.on_event(SpeechStarted(0), RECEIVED)
    c2.on_event(SpeechStarted(int(1.5 * SR)), RECEIVED)
    c2.on_event(SpeechStarted(int(9.5 * SR)), RECEIVED)  # long after: not the gap that counts
    out = messages(c2.on_event(final(0, 0.0, 1.2, "One.", "endpoint", words), RECEIVED))
    assert [m["type"] for m in out] == ["Results"]
    assert messages(c2.on_binary(SECOND * 5)) == []


def test_multichannel_results_carry_their_channel_and_metadata_waits_for_all() -> None:
    c = codec(RAW + "&channels=2&multichannel=true&vad_events=true")
    setup = c.stream_setup().audio
    assert (setup.channels, setup.split_channels, setup.streams) == (2, True, 2)
    c.on_binary(b"\x00\x00" * 2)
    (started,) = messages(c.on_channel_event(1, SpeechStarted(0), RECEIVED))
    assert started["channel"] == [1, 2]
    out = c.on_channel_event(1, final(0, 0.0, 1.0, "hello there", "endpoint"), RECEIVED)
    (result,) = messages(out)
    assert result["channel_index"] == [1, 2]
    # Utterance 0 of channel 0 and of channel 1 are different partial slots in the outbox.
    other = c.on_channel_event(0, final(0, 0.0, 1.0, "hi", "endpoint"), RECEIVED)
    assert isinstance(out[0], Send) and isinstance(other[0], Send)
    assert out[0].message.utterance != other[0].message.utterance
    assert messages(c.on_channel_event(0, Done(SR, 1), RECEIVED)) == []
    (meta,) = messages(c.on_channel_event(1, Done(SR, 1), RECEIVED))
    assert meta["type"] == "Metadata" and meta["channels"] == 2
    # A Finalize before any audio is answered per channel.
    fresh = codec(RAW + "&channels=2&multichannel=true")
    answers = messages(fresh.on_text('{"type": "Finalize"}', ALLOW))
    assert [a["channel_index"] for a in answers] == [[0, 2], [1, 2]]


def test_container_stream_setup_and_duration_from_the_decoded_audio() -> None:
    c = codec("model=nova-3")
    assert c.stream_setup().audio.encoding == "container"
    c.on_binary(b"\x1a\x45\xdf\xa3" * 100)  # (bytes of a container: their count says nothing)
    (meta,) = messages(c.on_event(Done(2 * SR, 0), AudioReceived(32000, 16000)))
    assert meta["duration"] == 2.0
