"""The kettle v1 codec alone: plain values in, actions out (no socket, no engine)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kettle.streaming.core.events import Done, Error, Final, Partial, Revision
from kettle.streaming.protocols.base import (
    Action,
    AudioReceived,
    CodecContext,
    FeedAudio,
    Finalize,
    Limits,
    ModelInfo,
    Send,
    Stop,
)
from kettle.streaming.protocols.handshake import HandshakeRefused, HandshakeRequest
from kettle.streaming.protocols.kettle_v1 import live as kettle_v1
from kettle.streaming.protocols.kettle_v1.live import KettleV1Codec
from kettle.streaming.protocols.kettle_v1.wire import StreamSettings
from kettle.transcribe.types import Word


class Gate:
    def __init__(self, *verdicts: str) -> None:
        self.verdicts = list(verdicts)
        self.checked = 0

    def check(self) -> str:
        self.checked += 1
        return self.verdicts.pop(0) if self.verdicts else "allow"


def codec(multilingual: bool = False, **limits: Any) -> KettleV1Codec:
    context = CodecContext("sid", ModelInfo("tiny.en", multilingual), Limits(**limits))
    return KettleV1Codec(context, StreamSettings())


def sent(actions: list[Action]) -> list[dict[str, Any]]:
    return [json.loads(a.message.text) for a in actions if isinstance(a, Send)]


def test_start_sends_ready() -> None:
    (ready,) = sent(codec().start())
    assert ready == {
        "type": "ready",
        "session_id": "sid",
        "protocol": 1,
        "model": "tiny.en",
        "sample_rate": 16000,
        "multilingual": False,
    }


def test_audio_over_the_frame_limit_is_bad_audio_and_dropped() -> None:
    c = codec(max_frame_bytes=10)
    (action,) = c.on_binary(bytes(11))
    assert isinstance(action, Send) and action.error_code == "bad_audio"
    assert c.on_binary(bytes(10)) == [FeedAudio(bytes(10))]


def test_config_applies_before_audio_and_is_refused_after() -> None:
    c = codec()
    assert c.on_text('{"type": "config", "encoding": "mulaw"}', Gate()) == []
    setup = c.stream_setup()
    assert (setup.audio.encoding, setup.audio.sample_rate) == ("mulaw", 8000)
    c.on_binary(b"\x00")
    (refused,) = sent(c.on_text('{"type": "config", "channels": 2}', Gate()))
    assert refused["code"] == "bad_message" and "before the first audio" in refused["message"]
    assert c.stream_setup().audio.channels == 1


def test_language_on_an_english_model_is_refused_whole() -> None:
    c = codec()
    (refused,) = sent(c.on_text('{"type": "config", "language": "de", "partials": false}', Gate()))
    assert refused["code"] == "bad_message" and "English-only" in refused["message"]
    assert c.stream_setup().session.partials is True
    multi = codec(multilingual=True)
    assert multi.on_text('{"type": "config", "language": "de"}', Gate()) == []
    assert multi.stream_setup().session.language == "de"


def test_stop_is_never_rate_limited_and_others_are() -> None:
    c = codec()
    gate = Gate("notify", "drop")
    assert c.on_text('{"type": "stop"}', gate) == [Stop()]
    assert gate.checked == 0
    (limited,) = sent(c.on_text('{"type": "keepalive"}', gate))
    assert limited["code"] == "rate_limited"
    assert c.on_text('{"type": "finalize"}', gate) == []  # dropped silently
    assert c.on_text('{"type": "finalize"}', gate) == [Finalize()]
    assert c.on_text('{"type": "keepalive"}', gate) == []


@pytest.mark.parametrize("text", ["nope", "[]", "{}", '{"type": "dance"}'])
def test_bad_messages_are_bad_message(text: str) -> None:
    (error,) = sent(codec().on_text(text, Gate()))
    assert error["type"] == "error" and error["code"] == "bad_message"


def test_events_in_protocol_shapes() -> None:
    c = codec()
    got = AudioReceived(48000, 16000)
    (partial,) = sent(c.on_event(Partial(0, 1600, 16000, "a b", "a"), got))
    assert partial == {"type": "partial", "utterance": 0, "start": 0.1, "end": 1.0,
                       "text": "a b", "stable": "a"}  # fmt: skip
    words = (Word("a", 0.1, 0.2, 0.9),)
    (final,) = c.on_event(Final(0, 1600, 16000, "A b.", words, "en"), got)
    assert isinstance(final, Send) and final.message.kind == "final"
    assert "words" not in json.loads(final.message.text)
    (error,) = c.on_event(Error("internal", "boom", fatal=True), got)
    assert isinstance(error, Send) and error.message.closing and error.message.fatal
    (done,) = c.on_event(Done(48000, 1, "idle"), got)
    assert isinstance(done, Send) and done.message.closing
    assert json.loads(done.message.text) == {"type": "done", "audio_seconds": 3.0,
                                             "utterances": 1, "reason": "idle"}  # fmt: skip


def test_partials_off_sends_none() -> None:
    c = codec()
    c.on_text('{"type": "config", "partials": false}', Gate())
    assert c.on_event(Partial(0, 0, 1600, "a", ""), AudioReceived()) == []


def test_route_credentials_and_subprotocol() -> None:
    request = HandshakeRequest(
        "/v1/stream",
        "token=q",
        {"authorization": "Bearer h"},
        ("kettle.v1", "kettle-key.s"),
    )
    assert list(kettle_v1.credentials(request)) == ["h", "s", "q"]
    prepared = kettle_v1.prepare(request, ModelInfo("tiny.en", False))
    assert prepared.subprotocol == "kettle.v1"  # never the key
    assert kettle_v1.prepare(HandshakeRequest("/v1/stream"), None).subprotocol is None


def test_route_refuses_bad_query_with_400() -> None:
    with pytest.raises(HandshakeRefused) as info:
        kettle_v1.prepare(HandshakeRequest("/v1/stream", "language=de"), ModelInfo("x", False))
    assert info.value.status == 400 and "English-only" in info.value.message
    # while the model loads, the language cannot be checked against it yet
    kettle_v1.prepare(HandshakeRequest("/v1/stream", "language=de"), None)


def test_revisions_are_asked_for_in_config_and_sent_in_the_finals_shape() -> None:
    c = codec()
    assert c.stream_setup().session.revisions is False  # off unless asked
    assert c.on_text('{"type": "config", "revisions": true, "word_timestamps": true}', Gate()) == []
    assert c.stream_setup().session.revisions is True
    words = (Word(" A", 0.1, 0.2, 0.9),)
    (action,) = c.on_event(
        Revision(3, 1600, 16000, "A b.", words, "en", "A be."), AudioReceived(0, 16000)
    )
    assert isinstance(action, Send) and action.message.kind == "revision"
    assert action.message.utterance == 3
    assert json.loads(action.message.text) == {
        "type": "revision", "utterance": 3, "start": 0.1, "end": 1.0, "text": "A b.",
        "words": [{"word": " A", "start": 0.1, "end": 0.2, "probability": 0.9}], "language": "en",
    }  # fmt: skip


def test_diarize_is_refused_without_a_speaker_model() -> None:
    c = codec()
    (refused,) = sent(c.on_text('{"type": "config", "diarize": true, "partials": false}', Gate()))
    assert refused["code"] == "bad_message" and "diarize" in refused["message"]
    assert c.stream_setup().session.partials is True  # refused whole
    assert c.on_text('{"type": "config", "diarize": false, "max_speakers": 2}', Gate()) == []
    assert kettle_v1.INFO["revision"] == "1.2"
