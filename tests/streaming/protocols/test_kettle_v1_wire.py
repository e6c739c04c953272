"""The pure codec of PROTOCOL.md, the admission/rate policy, the outbox and the arrival log."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kettle.streaming.core.backlog import FINAL, OTHER, PARTIAL
from kettle.streaming.core.events import Done, Error, Final, Partial
from kettle.streaming.engine.report import BatchReport
from kettle.streaming.protocols import kettle_v1_wire as proto
from kettle.streaming.protocols.base import OutMessage
from kettle.streaming.protocols.handshake import bearer_token
from kettle.streaming.server.limits import (
    Authenticator,
    SessionSlots,
    TokenBucket,
    key_digest,
    key_matches,
)
from kettle.streaming.server.metrics import ArrivalLog, ServerMetrics
from kettle.streaming.server.outbox import Outbox
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


# -- limits ---------------------------------------------------------------------------------


def test_bearer_token() -> None:
    assert bearer_token("Bearer abc") == "abc"
    assert bearer_token("bEaReR   abc ") == "abc"
    assert bearer_token("Basic abc") is None
    assert bearer_token("Bearer") is None
    assert bearer_token(None) is None


def test_authenticator() -> None:
    open_door = Authenticator()
    assert not open_door.required and open_door.allows(None, None)
    auth = Authenticator.from_keys(("k1", "secret-2"))
    assert "secret" not in repr(auth) and auth.digests[0] == key_digest("k1")
    assert all(len(d) == 32 for d in auth.digests)  # one length whatever the key's
    assert auth.allows("Bearer secret-2", None)
    assert auth.allows("BEARER k1", None)
    assert auth.allows(None, "k1")
    assert auth.allows("Bearer wrong", "k1")
    assert not auth.allows("Bearer wrong", None)
    assert not auth.allows(None, "k")
    assert not auth.allows("k1", None)  # no scheme
    assert not auth.allows(None, None)
    assert key_matches("ünï", ["ünï"]) and not key_matches("\udcff", ["x"])


def test_session_slots() -> None:
    slots = SessionSlots(2)
    assert slots.try_acquire() and slots.try_acquire()
    assert slots.full and not slots.try_acquire()
    slots.release()
    assert slots.active == 1 and slots.try_acquire()
    with pytest.raises(ValueError):
        SessionSlots(0)


def test_token_bucket() -> None:
    bucket = TokenBucket(rate=2.0, burst=3, now=0.0)
    assert [bucket.allow(0.0) for _ in range(4)] == [True, True, True, False]
    assert bucket.allow(0.5)  # one token back after 0.5 s at 2/s
    assert not bucket.allow(0.5)
    assert bucket.allow(100.0) and bucket.allow(100.0) and bucket.allow(100.0)
    assert not bucket.allow(100.0)  # refill is capped at the burst
    with pytest.raises(ValueError):
        TokenBucket(rate=0, burst=1, now=0)


# -- outbox ---------------------------------------------------------------------------------


def _kinds(box: Outbox) -> list[tuple[str, int, str]]:
    out = []
    while (m := box.get_nowait()) is not None:
        out.append((m.kind, m.utterance, m.text))
    return out


def test_outbox_drops_stale_partials_never_finals() -> None:
    box = Outbox(limit=100)
    box.put(OutMessage(OTHER, "ready"))
    box.put(OutMessage(PARTIAL, "p0a", 0))
    box.put(OutMessage(PARTIAL, "p0b", 0))  # replaces p0a
    box.put(OutMessage(PARTIAL, "p1a", 1))  # replaces p0b (older utterance)
    box.put(OutMessage(FINAL, "f0", 0))
    box.put(OutMessage(PARTIAL, "p1b", 1))  # replaces p1a, lands after f0
    box.put(OutMessage(FINAL, "f1", 1))  # drops p1b
    box.put(OutMessage(OTHER, "done", closing=True))
    assert _kinds(box) == [
        (OTHER, -1, "ready"),
        (FINAL, 0, "f0"),
        (FINAL, 1, "f1"),
        (OTHER, -1, "done"),
    ]
    assert box.dropped_partials == 4


def test_outbox_keeps_partial_of_next_utterance_before_older_final() -> None:
    box = Outbox()
    box.put(OutMessage(PARTIAL, "p2", 2))
    box.put(OutMessage(FINAL, "f1", 1))
    assert [t for _, _, t in _kinds(box)] == ["p2", "f1"]


def test_outbox_overflow_is_reported() -> None:
    box = Outbox(limit=3)
    assert all(box.put(OutMessage(FINAL, f"f{i}", i)) for i in range(3))
    assert not box.put(OutMessage(FINAL, "f3", 3))
    assert box.overflowed


async def test_outbox_get_waits_for_a_message() -> None:
    box = Outbox()
    getter = asyncio.create_task(box.get())
    await asyncio.sleep(0)
    assert not getter.done()
    box.put(OutMessage(FINAL, "f0", 0))
    assert (await asyncio.wait_for(getter, 1)).text == "f0"


# -- arrival log and metrics ----------------------------------------------------------------


def test_arrival_log_maps_16k_samples_to_input_messages() -> None:
    log = ArrivalLog(sample_rate=8000)
    log.record(800, 1.0)  # input frames 0..800 (= 16 kHz samples 0..1600) arrived at t=1
    log.record(800, 1.5)  # no new frames: ignored
    log.record(1600, 2.0)
    log.record(2400, 3.0)
    assert log.arrival_of(0) == 1.0
    assert log.arrival_of(1600) == 1.0
    assert log.arrival_of(1601) == 2.0
    assert log.arrival_of(4800) == 3.0
    assert log.arrival_of(10**9) == 3.0  # past the end (resampler tail): the last message
    log.prune_before(3300)
    assert len(log) == 2
    assert log.arrival_of(3200) == 2.0
    assert log.arrival_of(3300) == 3.0


def test_metrics_render_and_observer() -> None:
    m = ServerMetrics()
    m.on_batch(BatchReport(4, 1, (0.01, 0.02, 0.03, 0.04), 0.2, cache_hits=2))
    m.on_batch_failed(2, "boom")
    m.errors.labels(code="bad_audio").inc()
    text = m.render().decode()
    for name in (
        "kettle_sessions_active",
        "kettle_sessions_total",
        "kettle_audio_seconds_total",
        "kettle_partial_lag_seconds_bucket",
        "kettle_final_lag_seconds_bucket",
        "kettle_queue_wait_seconds_count 4.0",
        "kettle_batch_size_sum 4.0",
        "kettle_decode_seconds_count 1.0",
        "kettle_encoder_cache_hits_total 2.0",
        'kettle_errors_total{code="bad_audio"} 1.0',
    ):
        assert name in text, name
    assert m.value("kettle_batches_failed_total") == 1.0
    # Private registries: a second server's metrics start from zero.
    assert ServerMetrics().value("kettle_encoder_cache_hits_total") == 0.0
