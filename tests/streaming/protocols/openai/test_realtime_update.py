"""session.update after audio, as OpenAI allows it (everything but voice and model): language,
prompt and include for the next item, turn detection and keywords from now on, the input
format for the audio appended after it; and what cannot change refused in OpenAI's shape
with the session going on."""

from __future__ import annotations

import base64
from typing import Any

from kettle.kernels.resample import resample
from kettle.streaming.protocols.base import Reconfigure
from kettle.transcribe.model.fake import scripted_audio
from kettle.transcribe.types import DecodeRequest

from tests.conftest import mulaw
from tests.streaming.protocols.openai.conftest import PREFIX, TWO, Harness, pcm24k

TURN = "session.audio.input.turn_detection"
SPLIT = 72000  # bytes of TWO: 1.5 s, inside its first voice (0.5..2.5 s)


def update(h: Harness, event_id: str | None = None, **session: Any) -> dict[str, Any]:
    event: dict[str, Any] = {
        "type": "session.update",
        "session": {"type": "transcription", **session},
    }
    if event_id is not None:
        event["event_id"] = event_id
    h.send(**event)
    return h.out[-1]


def transcription(**fields: Any) -> dict[str, Any]:
    return {"input": {"transcription": fields}}


def by_utterance(h: Harness) -> dict[int, list[DecodeRequest]]:
    """The decode requests the fake model saw, per utterance (their ordinal)."""
    out: dict[int, list[DecodeRequest]] = {}
    for r in h.decoder.requests_seen:
        assert isinstance(r.stream_key, tuple)  # (session, utterance)
        out.setdefault(r.stream_key[1], []).append(r)
    return out


def test_language_and_prompt_apply_from_the_next_item() -> None:
    h = Harness(multilingual=True)
    h.append(TWO[:SPLIT])
    assert len(h.of("input_audio_buffer.speech_started")) == 1  # the first item is open
    answer = update(h, audio=transcription(language="fr", prompt="Kettle, Whisper."))
    assert answer["type"] == "session.updated"
    assert answer["session"]["audio"]["input"]["transcription"]["language"] == "fr"
    h.append(TWO[SPLIT:])
    first, second = h.of(PREFIX + "completed")
    seen = by_utterance(h)
    assert sorted(seen) == [0, 1]
    # The open item keeps what it began with, partials and final alike ...
    assert {(r.language, r.prompt) for r in seen[0]} == {(None, None)}
    # ... and the next one is decoded in French with the new prompt.
    assert {r.language for r in seen[1]} == {"fr"}
    assert all(r.prompt is not None and r.prompt.startswith("Kettle, Whisper.") for r in seen[1])
    assert (first["languages"], second["languages"]) == ([{"code": "en"}], [{"code": "fr"}])
    assert first["transcript"] and second["transcript"]


def test_include_applies_from_the_next_item() -> None:
    h = Harness()
    h.append(TWO[:SPLIT])
    update(h, include=["item.input_audio_transcription.logprobs"])
    h.append(TWO[SPLIT:])
    first, second = h.of(PREFIX + "completed")
    assert "logprobs" not in first
    assert [p["token"].strip() for p in second["logprobs"]] == second["transcript"].split()
    deltas = h.of(PREFIX + "delta")
    assert all("logprobs" not in d for d in deltas if d["item_id"] == first["item_id"])
    joined = [p for d in deltas if d["item_id"] == second["item_id"] for p in d["logprobs"]]
    assert joined == second["logprobs"]
    # And off again, from the next item.
    h.send(type="input_audio_buffer.clear")
    update(h, include=None)
    h.append(TWO)
    third, fourth = h.of(PREFIX + "completed")[2:]
    assert "logprobs" not in third and "logprobs" not in fourth


def test_turn_detection_changes_from_now_on() -> None:
    plain = Harness()
    plain.append(TWO)
    assert len(plain.of(PREFIX + "completed")) == 2  # the 1 s pause ends the first turn
    (start, *_) = plain.of("input_audio_buffer.speech_started")
    h = Harness()
    h.append(TWO[:9600])  # 0.2 s of the silence before the speech
    td = {"type": "server_vad", "silence_duration_ms": 1500, "prefix_padding_ms": 100,
          "threshold": 0.9}  # fmt: skip
    answer = update(h, audio={"input": {"turn_detection": td}})
    assert answer["session"]["audio"]["input"]["turn_detection"] == td
    (change,) = h.reconfigured
    assert change.session is not None
    config = change.session
    assert (config.endpoint_silence_ms, config.preroll_ms, config.vad_aggressiveness) == (
        1500,
        100,
        3,
    )
    h.append(TWO[9600:] + pcm24k([("silence", 2.0)]))
    # The 1 s pause no longer ends the turn: one item, from 100 ms before the speech.
    (completed,) = h.of(PREFIX + "completed")
    (started,) = h.of("input_audio_buffer.speech_started")
    assert started["audio_start_ms"] - start["audio_start_ms"] == 200
    words = [len(c["transcript"].split()) for c in plain.of(PREFIX + "completed")]
    assert len(completed["transcript"].split()) == sum(words)


def mulaw8k(pattern: list[tuple[str, float]]) -> bytes:
    return mulaw(resample(scripted_audio(pattern), 16000, 8000))


def test_format_switch_mid_stream_decodes_the_rest_in_the_new_format() -> None:
    # TWO's audio
    pattern = [("silence", 0.5), ("voice", 2.0), ("silence", 1.0), ("voice", 1.0),
               ("silence", 1.0)]  # fmt: skip
    plain = Harness()
    plain.append(TWO)
    h = Harness()
    h.append(TWO[:SPLIT])
    answer = update(h, audio={"input": {"format": {"type": "audio/pcmu"}}})
    assert answer["session"]["audio"]["input"]["format"] == {"type": "audio/pcmu"}
    (change,) = h.reconfigured
    assert change == Reconfigure(audio=change.audio) and change.audio is not None
    assert (change.audio.encoding, change.audio.sample_rate) == ("mulaw", 8000)
    rest = mulaw8k(pattern)[SPLIT // 6 :]  # the same audio from 1.5 s on, 8 kHz u-law
    for i in range(0, len(rest), 800):
        chunk = base64.b64encode(rest[i : i + 800]).decode()
        h.send(type="input_audio_buffer.append", audio=chunk)
    assert not h.of("error")
    want, got = plain.of(PREFIX + "completed"), h.of(PREFIX + "completed")
    assert [c["transcript"] for c in got] == [c["transcript"] for c in want]
    # Input audio time runs on across the switch (24 kHz bytes before it, 8 kHz after).
    for kind, key in (("input_audio_buffer.speech_stopped", "audio_end_ms"),
                      ("input_audio_buffer.speech_started", "audio_start_ms")):  # fmt: skip
        for a, b in zip(plain.of(kind), h.of(kind), strict=True):
            assert abs(a[key] - b[key]) <= 40


def test_buffer_length_counts_each_format_at_its_own_rate() -> None:
    h = Harness()
    update(h, audio={"input": {"turn_detection": None}})
    h.append(bytes(3840))  # 80 ms of 24 kHz pcm16
    update(h, audio={"input": {"format": {"type": "audio/pcma"}}})
    h.send(type="input_audio_buffer.commit", event_id="c1")
    error = h.out[-1]["error"]
    assert (error["code"], error["event_id"]) == ("input_audio_buffer_commit_empty", "c1")
    assert "80.00ms" in error["message"]
    h.send(type="input_audio_buffer.append", audio=base64.b64encode(bytes(160)).decode())
    h.send(type="input_audio_buffer.commit")  # 80 + 20 ms of 8 kHz a-law
    assert h.out[-2]["type"] == "input_audio_buffer.committed"


def test_keywords_and_model_names_change_after_audio() -> None:
    h = Harness()
    h.append(TWO[:SPLIT])
    for name in ("gpt-4o-transcribe", "whisper-1", "tiny.en"):
        assert update(h, audio=transcription(model=name))["type"] == "session.updated"
    assert not h.reconfigured  # the same model: nothing for the stream
    update(h, audio=transcription(keywords=["Kettle"]))
    (change,) = h.reconfigured
    assert change.session is not None and change.session.keyterms == ("Kettle",)
    h.append(TWO[SPLIT:])
    assert h.decoder.requests_seen[-1].hotwords == "Kettle."


def test_what_cannot_change_is_refused_and_the_session_goes_on() -> None:
    h = Harness()
    h.append(TWO[:SPLIT])
    refused: list[tuple[dict[str, Any], str, str]] = [
        ({"model": "gpt-realtime"}, "session.model", "cannot_update_model"),
        ({"audio": {"output": {"voice": "alloy"}}}, "session.audio.output.voice",
         "cannot_update_voice"),
        ({"voice": "marin"}, "session.voice", "cannot_update_voice"),
        ({"type": "realtime"}, "session.type", "invalid_value"),
    ]  # fmt: skip
    for i, (session, param, code) in enumerate(refused):
        # With a change that could apply: nothing of a refused update does.
        fields = {**session, "include": ["item.input_audio_transcription.logprobs"]}
        error = update(h, f"evt_{i}", **fields)
        assert error["type"] == "error"
        assert error["error"] == {
            "type": "invalid_request_error",
            "code": code,
            "message": error["error"]["message"],
            "param": param,
            "event_id": f"evt_{i}",
        }
        assert error["error"]["message"]
    assert not h.reconfigured and not h.codec.settings.logprobs
    assert update(h, model="tiny.en")["type"] == "session.updated"  # the model served
    h.append(TWO[SPLIT:])
    completed = h.of(PREFIX + "completed")
    assert len(completed) == 2 and all(c["transcript"] for c in completed)
    assert all("logprobs" not in c for c in completed)
