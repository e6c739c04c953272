"""The pure codec of docs/protocol.md."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kettle.streaming.core.events import Done, Error, Final, Partial
from kettle.streaming.protocols.kettle_v1 import wire as proto
from kettle.transcribe.types import Word

# -- client messages ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"type": "finalize"}', proto.FinalizeMessage()),
        ('{"type": "stop"}', proto.StopMessage()),
        ('{"type": "keepalive"}', proto.KeepaliveMessage()),
        ('{"type": "stop", "extra": 1}', proto.StopMessage()),
    ],
)
def test_control_messages(text: str, expected: object) -> None:
    assert proto.parse_client_message(text) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("not json", "not valid JSON"),
        ("", "not valid JSON"),
        ("[1, 2]", "JSON object"),
        ('"stop"', "JSON object"),
        ("null", "JSON object"),
        ("{}", "'type'"),
        ('{"type": 3}', "'type'"),
        ('{"type": "bogus"}', "unknown message type 'bogus'"),
        ("[" * 100_000, "not valid JSON"),
    ],
)
def test_bad_messages_are_bad_message(text: str, fragment: str) -> None:
    with pytest.raises(proto.ProtocolError) as info:
        proto.parse_client_message(text)
    assert info.value.code == "bad_message"
    assert fragment in info.value.message


def test_full_config_parses() -> None:
    msg = proto.parse_client_message(
        json.dumps(
            {
                "type": "config",
                "sample_rate": 44100,
                "encoding": "pcm_f32le",
                "channels": 2,
                "language": "EN",
                "partials": False,
                "word_timestamps": True,
                "future_field": "ignored",
            }
        )
    )
    assert isinstance(msg, proto.ConfigMessage)
    settings = proto.StreamSettings().apply(msg.update)
    assert settings == proto.StreamSettings(
        encoding="pcm_f32le",
        requested_sample_rate=44100,
        channels=2,
        language="en",
        partials=False,
        word_timestamps=True,
    )
    assert settings.sample_rate == 44100
    assert settings.frame_bytes == 8


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("sample_rate", 7999),
        ("sample_rate", 48001),
        ("sample_rate", 16000.0),
        ("sample_rate", "16000"),
        ("sample_rate", True),
        ("sample_rate", None),
        ("encoding", "opus"),
        ("encoding", None),
        ("channels", 3),
        ("channels", 0),
        ("channels", True),
        ("channels", "1"),
        ("language", "english"),
        ("language", "xx"),
        ("language", 5),
        ("partials", "yes"),
        ("partials", 1),
        ("word_timestamps", None),
        ("revisions", "true"),
        ("diarize", 1),
        ("max_speakers", 0),
        ("max_speakers", 17),
        ("max_speakers", True),
    ],
)
def test_invalid_config_field_refuses_whole_config(field: str, value: object) -> None:
    # A valid field next to the invalid one must not apply either: the whole config is refused.
    text = json.dumps({"type": "config", "encoding": "mulaw", field: value})
    with pytest.raises(proto.ProtocolError) as info:
        proto.parse_client_message(text)
    assert info.value.code == "bad_message"
    assert field in info.value.message


def test_config_error_lists_every_bad_field() -> None:
    with pytest.raises(proto.ProtocolError) as info:
        proto.parse_client_message('{"type":"config","channels":5,"partials":"no"}')
    assert "channels" in info.value.message and "partials" in info.value.message


def test_sample_rate_defaults() -> None:
    assert proto.StreamSettings().sample_rate == 16000
    mulaw = proto.StreamSettings().apply(proto.ConfigUpdate(encoding="mulaw"))
    assert mulaw.sample_rate == 8000
    explicit = mulaw.apply(proto.ConfigUpdate(sample_rate=16000))
    assert explicit.sample_rate == 16000
    # An explicit rate survives a later change of encoding.
    assert explicit.apply(proto.ConfigUpdate(encoding="mulaw")).sample_rate == 16000


def test_language_null_versus_absent() -> None:
    fr = proto.StreamSettings(language="fr")
    absent = proto.parse_config_fields({"partials": True})
    assert fr.apply(absent).language == "fr"
    null = proto.parse_config_fields({"language": None})
    assert fr.apply(null).language is None


def test_english_only_model_refuses_other_languages() -> None:
    proto.StreamSettings(language="en").check_model(False, "tiny.en")
    proto.StreamSettings(language=None).check_model(False, "tiny.en")
    proto.StreamSettings(language="de").check_model(True, "base")
    with pytest.raises(proto.ProtocolError, match="English-only"):
        proto.StreamSettings(language="de").check_model(False, "tiny.en")


# -- query string ---------------------------------------------------------------------------


def test_query_params() -> None:
    q = proto.parse_query("token=abc&sample_rate=8000&encoding=mulaw&channels=2&language=de&x=1")
    assert q.token == "abc"
    s = proto.StreamSettings().apply(q.update)
    assert (s.sample_rate, s.encoding, s.channels, s.language) == (8000, "mulaw", 2, "de")
    assert proto.parse_query("").token is None
    assert proto.StreamSettings().apply(proto.parse_query("language=").update).language is None


@pytest.mark.parametrize(
    "query",
    [
        "sample_rate=abc",
        "sample_rate=16000.0",
        "sample_rate=-16000",
        "sample_rate=96000",
        "encoding=flac",
        "channels=3",
        "language=klingon",
        "sample_rate=8000&sample_rate=16000",
        "language=%ff%fe",
        # config-only fields are not query parameters: ignored, not an error
    ],
)
def test_bad_query_values(query: str) -> None:
    with pytest.raises(proto.ProtocolError) as info:
        proto.parse_query(query)
    assert info.value.code == "bad_message"


def test_config_only_fields_in_query_are_ignored() -> None:
    q = proto.parse_query("partials=maybe")
    assert proto.StreamSettings().apply(q.update) == proto.StreamSettings()


# -- server messages ------------------------------------------------------------------------


def test_encode_ready() -> None:
    obj = json.loads(proto.encode_ready("s1", "tiny.en", 16000, multilingual=False))
    assert obj == {
        "type": "ready",
        "session_id": "s1",
        "protocol": 1,
        "model": "tiny.en",
        "sample_rate": 16000,
        "multilingual": False,
    }
    two = json.loads(proto.encode_ready("s1", "tiny.en", 8000, final_model="base"))
    assert two["final_model"] == "base" and "multilingual" not in two


def test_encode_partial_seconds_to_the_millisecond() -> None:
    obj = json.loads(proto.encode_partial(Partial(3, 199_680, 224_321, "the quick brown", "the")))
    assert obj == {
        "type": "partial",
        "utterance": 3,
        "start": 12.48,
        "end": 14.02,
        "text": "the quick brown",
        "stable": "the",
    }


def test_encode_final_with_and_without_words() -> None:
    words = (Word(" The", 12.50049, 12.6104, 0.93333), Word(" quick", 12.61, 12.9, 0.5))
    final = Final(3, 199_680, 241_600, "The quick.", words, "en")
    plain = json.loads(proto.encode_final(final, word_timestamps=False))
    assert plain == {
        "type": "final",
        "utterance": 3,
        "start": 12.48,
        "end": 15.1,
        "text": "The quick.",
        "language": "en",
    }
    rich = json.loads(proto.encode_final(final, word_timestamps=True))
    assert rich["words"][0] == {"word": " The", "start": 12.5, "end": 12.61, "probability": 0.933}
    assert len(rich["words"]) == 2


def test_encode_error_and_done() -> None:
    assert json.loads(proto.encode_error_event(Error("bad_audio", "too big"))) == {
        "type": "error",
        "code": "bad_audio",
        "message": "too big",
    }
    fatal = json.loads(proto.encode_error("internal", "boom", fatal=True))
    assert fatal["fatal"] is True
    done = json.loads(proto.encode_done_event(Done(1, 2), input_frames=61_2005, sample_rate=10_000))
    assert done == {"type": "done", "audio_seconds": 61.2, "utterances": 2}
    idle = json.loads(proto.encode_done(1.0, 0, "idle"))
    assert idle["reason"] == "idle"


def test_audio_seconds_at_input_rate() -> None:
    assert proto.audio_seconds(44_100 * 3 + 22_050, 44_100) == 3.5
    assert proto.audio_seconds(8001, 8000) == 1.0


@given(st.text())
def test_parser_never_raises_anything_else(text: str) -> None:
    try:
        proto.parse_client_message(text)
    except proto.ProtocolError as exc:
        assert exc.code == "bad_message"


@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=40))
def test_query_parser_never_raises_anything_else(query: str) -> None:
    try:
        proto.parse_query(query)
    except proto.ProtocolError as exc:
        assert exc.code == "bad_message"
