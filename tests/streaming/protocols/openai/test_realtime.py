"""The OpenAI Realtime transcription codec, driven through a real Session and a fake model
with no server and no clock (the SDK tests in test_openai_sdk.py drive it over a socket)."""

from __future__ import annotations

import json

from kettle.streaming.core.events import Done, Error
from kettle.streaming.protocols.base import (
    AudioReceived,
)

from tests.streaming.protocols.openai.conftest import PREFIX, TWO, Allow, Harness, pcm24k


def test_session_created_then_updated() -> None:
    h = Harness()
    assert h.types() == ["session.created"]
    session = h.out[0]["session"]
    assert session["type"] == "transcription"
    assert session["audio"]["input"]["format"] == {"type": "audio/pcm", "rate": 24000}
    assert session["audio"]["input"]["turn_detection"]["type"] == "server_vad"
    h.send(
        type="session.update",
        session={
            "type": "transcription",
            "audio": {
                "input": {
                    "format": {"type": "audio/pcmu"},
                    "transcription": {
                        "model": "gpt-4o-transcribe",
                        "language": "en",
                        "prompt": "Kettle",
                    },
                    "turn_detection": {"type": "server_vad", "silence_duration_ms": 700},
                }
            },
        },
    )
    updated = h.out[-1]
    assert updated["type"] == "session.updated"
    inp = updated["session"]["audio"]["input"]
    assert inp["format"] == {"type": "audio/pcmu"}
    assert inp["transcription"] == {
        "model": "tiny.en",
        "language": "en",
        "prompt": "Kettle",
        "delay": None,
    }
    assert inp["turn_detection"]["silence_duration_ms"] == 700
    setup = h.codec.stream_setup()
    assert (setup.audio.encoding, setup.audio.sample_rate) == ("mulaw", 8000)
    assert setup.session.endpoint_silence_ms == 700 and setup.session.prompt == "Kettle"
    ids = [e["event_id"] for e in h.out]
    assert len(set(ids)) == len(ids)


def test_bad_updates_change_nothing() -> None:
    h = Harness()
    for session, param in [
        ({"type": "transcription", "audio": {"input": {"format": {"type": "audio/pcm",
                                                                   "rate": 16000}}}},
         "session.audio.input.format.rate"),
        ({"type": "realtime"}, "session.type"),
        ({"type": "transcription", "audio": {"input": {"transcription": {"language": "de"}}}},
         "session.audio.input.transcription.language"),  # tiny.en is English-only
        ({"type": "transcription",
          "audio": {"input": {"turn_detection": {"type": "server_vad", "threshold": 3}}}},
         "session.audio.input.turn_detection.threshold"),
    ]:  # fmt: skip
        h.send(type="session.update", session=session, event_id="client_1")
        error = h.out[-1]
        assert error["type"] == "error"
        assert error["error"]["param"] == param and error["error"]["event_id"] == "client_1"
    assert h.codec.stream_setup().audio.sample_rate == 24000


def test_server_vad_items() -> None:
    h = Harness()
    h.append(TWO)
    types = h.types()
    started, stopped = (
        h.of("input_audio_buffer.speech_started"),
        h.of("input_audio_buffer.speech_stopped"),
    )
    committed, completed = h.of("input_audio_buffer.committed"), h.of(PREFIX + "completed")
    assert len(started) == len(stopped) == len(committed) == len(completed) == 2
    previous = None
    for s, st, c, done in zip(started, stopped, committed, completed, strict=True):
        item = s["item_id"]
        assert st["item_id"] == c["item_id"] == done["item_id"] == item
        assert c["previous_item_id"] == previous
        previous = item
        deltas = [e["delta"] for e in h.of(PREFIX + "delta") if e["item_id"] == item]
        assert deltas and "".join(deltas) == done["transcript"]
        # Deltas come after the commit, the completed event last.
        first_delta = next(
            i for i, e in enumerate(h.out) if e["type"] == PREFIX + "delta" and e["item_id"] == item
        )
        assert h.out.index(c) < first_delta < h.out.index(done)
        assert st["audio_end_ms"] > s["audio_start_ms"]
        assert done["usage"]["type"] == "duration" and done["usage"]["seconds"] > 0
    assert completed[0]["transcript"].split() == ["alpha", "bravo", "charlie", "delta"]
    assert 500 - 350 <= started[0]["audio_start_ms"] <= 500  # the pre-roll reaches back
    assert types[0] == "session.created"


def test_manual_commits() -> None:
    h = Harness()
    manual = {"type": "transcription", "audio": {"input": {"turn_detection": None}}}
    h.send(type="session.update", session=manual)
    assert h.out[-1]["session"]["audio"]["input"]["turn_detection"] is None
    h.append(TWO)
    assert not h.of("input_audio_buffer.speech_started")
    assert not h.of("input_audio_buffer.committed")
    h.send(type="input_audio_buffer.commit")
    (committed,) = h.of("input_audio_buffer.committed")
    (completed,) = h.of(PREFIX + "completed")
    assert completed["item_id"] == committed["item_id"]
    # Both utterances of the buffer make one item's transcript.
    assert completed["transcript"].split() == ["alpha", "bravo", "charlie", "delta", "alpha",
                                               "bravo"]  # fmt: skip
    deltas = [e["delta"] for e in h.of(PREFIX + "delta")]
    assert "".join(deltas) == completed["transcript"]
    assert abs(completed["usage"]["seconds"] - 5.5) < 0.01


def test_commit_mid_speech_ends_the_item_there() -> None:
    h = Harness()
    h.send(
        type="session.update",
        session={"type": "transcription", "audio": {"input": {"turn_detection": None}}},
    )
    h.append(pcm24k([("silence", 0.5), ("voice", 2.0)]))
    h.send(type="input_audio_buffer.commit")
    (completed,) = h.of(PREFIX + "completed")
    assert completed["transcript"].split()[:3] == ["alpha", "bravo", "charlie"]


def test_empty_commit() -> None:
    h = Harness()
    h.send(type="input_audio_buffer.commit", event_id="c1")
    error = h.out[-1]
    assert error["type"] == "error"
    assert error["error"]["code"] == "input_audio_buffer_commit_empty"
    assert error["error"]["event_id"] == "c1"
    h.append(pcm24k([("silence", 0.05)]))  # 50 ms is still too little
    h.send(type="input_audio_buffer.commit")
    assert h.out[-1]["error"]["code"] == "input_audio_buffer_commit_empty"
    assert not h.of("input_audio_buffer.committed")


def test_commit_of_silence_in_vad_mode_is_an_empty_item() -> None:
    h = Harness()
    h.append(pcm24k([("silence", 1.0)]))
    h.send(type="input_audio_buffer.commit")
    (committed,) = h.of("input_audio_buffer.committed")
    (completed,) = h.of(PREFIX + "completed")
    assert completed["item_id"] == committed["item_id"] and completed["transcript"] == ""
    h.send(type="input_audio_buffer.commit")  # nothing new since
    assert h.out[-1]["error"]["code"] == "input_audio_buffer_commit_empty"


def test_clear_drops_the_uncommitted_audio() -> None:
    h = Harness()
    h.send(
        type="session.update",
        session={"type": "transcription", "audio": {"input": {"turn_detection": None}}},
    )
    h.append(pcm24k([("silence", 0.3), ("voice", 2.0), ("silence", 1.0)]))
    h.send(type="input_audio_buffer.clear")
    assert h.out[-1]["type"] == "input_audio_buffer.cleared"
    h.append(pcm24k([("voice", 1.0), ("silence", 1.0)]))
    h.send(type="input_audio_buffer.commit")
    (completed,) = h.of(PREFIX + "completed")
    assert completed["transcript"].split() == ["alpha", "bravo"]  # the second speech only


def test_clear_mid_speech_in_vad_mode() -> None:
    h = Harness()
    h.append(pcm24k([("silence", 0.5), ("voice", 1.5)]))
    (started,) = h.of("input_audio_buffer.speech_started")
    h.send(type="input_audio_buffer.clear")
    h.append(pcm24k([("silence", 1.0), ("voice", 1.0), ("silence", 1.0)]))
    committed = h.of("input_audio_buffer.committed")
    completed = h.of(PREFIX + "completed")
    assert started["item_id"] not in {e["item_id"] for e in committed + completed}
    assert [c["transcript"].split() for c in completed] == [["alpha", "bravo"]]


def test_bad_client_events_are_errors_never_exceptions() -> None:
    h = Harness()
    h.apply(h.codec.on_text("{not json", Allow()))
    h.apply(h.codec.on_text("[1, 2]", Allow()))
    h.apply(h.codec.on_binary(b"\x00\x01"))
    h.send(type="input_audio_buffer.append", audio="***")
    h.send(type="input_audio_buffer.append")
    h.send(type="response.create")
    errors = h.of("error")
    assert len(errors) == 6
    assert all(e["error"]["message"] and e["error"]["type"] for e in errors)
    assert h.session is None  # nothing reached the engine


def test_settings_change_after_audio_too() -> None:
    # As at OpenAI (test_openai_realtime_update.py has what applies when).
    h = Harness()
    h.append(pcm24k([("silence", 0.2)]))
    h.send(
        type="session.update",
        session={"type": "transcription", "audio": {"input": {"format": {"type": "audio/pcma"}}}},
    )
    assert h.out[-1]["type"] == "session.updated"
    h.send(
        type="session.update",
        session={"type": "transcription", "audio": {"input": {"turn_detection": None}}},
    )
    assert h.out[-1]["type"] == "session.updated"


def test_done_and_fatal_errors_close() -> None:
    h = Harness()
    h.apply(h.codec.on_event(Done(0, 0, "idle"), AudioReceived()))
    assert h.out[-1]["error"]["code"] == "session_expired" and h.closing[-1]
    h.apply(h.codec.on_event(Error("overloaded", "skipping partials"), AudioReceived()))
    assert h.out[-1]["type"] == "error" and h.out[-1]["error"]["code"] == "session_expired"
    h.apply(h.codec.on_event(Error("internal", "boom", fatal=True), AudioReceived()))
    assert h.out[-1]["error"]["type"] == "server_error" and h.closing[-1]
    assert json.loads(h.codec.fatal_error("x"))["type"] == "error"


def test_commit_in_vad_mode_mid_speech_commits_that_turn_only() -> None:
    h = Harness()
    h.append(pcm24k([("silence", 0.5), ("voice", 1.5)]))
    (started,) = h.of("input_audio_buffer.speech_started")
    h.send(type="input_audio_buffer.commit")
    (committed,) = h.of("input_audio_buffer.committed")
    (completed,) = h.of(PREFIX + "completed")
    assert committed["item_id"] == completed["item_id"] == started["item_id"]
    assert completed["transcript"]


def test_commit_in_vad_mode_after_a_turn_commits_the_silence_after_it() -> None:
    h = Harness()
    h.append(pcm24k([("silence", 0.5), ("voice", 1.5), ("silence", 1.5)]))
    (turn,) = h.of(PREFIX + "completed")
    h.send(type="input_audio_buffer.commit")
    committed = h.of("input_audio_buffer.committed")
    assert len(committed) == 2 and committed[1]["previous_item_id"] == turn["item_id"]
    silence = h.of(PREFIX + "completed")[-1]
    assert silence["item_id"] == committed[1]["item_id"] and silence["transcript"] == ""
    assert 0.1 <= silence["usage"]["seconds"] <= 1.5


def test_high_delay_sends_deltas_from_finals_only() -> None:
    h = Harness()
    high = {"type": "transcription", "audio": {"input": {"transcription": {"delay": "high"}}}}
    h.send(type="session.update", session=high)
    assert h.out[-1]["session"]["audio"]["input"]["transcription"]["delay"] == "high"
    assert h.codec.stream_setup().session.partials is False
    h.append(TWO)
    completed = h.of(PREFIX + "completed")
    deltas = h.of(PREFIX + "delta")
    assert len(completed) == len(deltas) == 2  # one delta per turn: its final's text
    assert [d["delta"] for d in deltas] == [c["transcript"] for c in completed]
    assert Harness().codec.stream_setup().session.partials is True
