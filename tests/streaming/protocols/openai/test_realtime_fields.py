"""Realtime transcription fields the voice-agent plugins send: transcription.model (REST's
rule), languages[], keywords[] (also mid-stream), include logprobs, semantic_vad's eagerness,
and the turn-detection default of the models OpenAI serves without server-side endpointing."""

from __future__ import annotations

from typing import Any

import pytest

from tests.streaming.protocols.openai.conftest import PREFIX, TWO, Harness

PARAM = "session.audio.input.transcription"


def transcription(**fields: Any) -> dict[str, Any]:
    return {"type": "transcription", "audio": {"input": {"transcription": fields}}}


def test_model_names_follow_the_rest_rule() -> None:
    h = Harness()
    for name in ("tiny.en", "whisper-1", "gpt-4o-mini-transcribe-2025-12-15", "gpt-transcribe"):
        h.send(type="session.update", session=transcription(model=name))
        assert h.out[-1]["type"] == "session.updated", name
    h.send(type="session.update", session=transcription(model="gpt-9-transcribe"), event_id="e")
    error = h.out[-1]["error"]
    assert (error["code"], error["param"], error["event_id"]) == (
        "model_not_found",
        PARAM + ".model",
        "e",
    )
    assert "does not exist" in error["message"]


@pytest.mark.parametrize("model", ["gpt-realtime-whisper", "gpt-live-transcribe-2026-01-01"])
def test_realtime_only_models_default_to_no_turn_detection(model: str) -> None:
    h = Harness()
    h.send(type="session.update", session=transcription(model=model))
    assert h.out[-1]["session"]["audio"]["input"]["turn_detection"] is None
    h.append(TWO)
    assert not h.of("input_audio_buffer.speech_started")  # the client commits (its own VAD)
    h.send(type="input_audio_buffer.commit")
    (completed,) = h.of(PREFIX + "completed")
    assert completed["transcript"].split()[:2] == ["alpha", "bravo"]


def test_other_models_and_explicit_settings_keep_their_turn_detection() -> None:
    h = Harness()
    h.send(type="session.update", session=transcription(model="gpt-4o-mini-transcribe"))
    assert h.out[-1]["session"]["audio"]["input"]["turn_detection"]["type"] == "server_vad"
    explicit = {
        "type": "transcription",
        "audio": {
            "input": {
                "transcription": {"model": "gpt-live-transcribe"},
                "turn_detection": {"type": "server_vad", "silence_duration_ms": 350},
            }
        },
    }
    h.send(type="session.update", session=explicit)
    td = h.out[-1]["session"]["audio"]["input"]["turn_detection"]
    assert (td["type"], td["silence_duration_ms"]) == ("server_vad", 350)
    # Set by the client once, it stays when a later update names such a model.
    h.send(type="session.update", session=transcription(model="gpt-realtime-whisper"))
    assert h.out[-1]["session"]["audio"]["input"]["turn_detection"]["type"] == "server_vad"


@pytest.mark.parametrize(("eagerness", "ms"), [("low", 1000), ("medium", 500), ("auto", 500),
                                               ("high", 250)])  # fmt: skip
def test_semantic_vad_eagerness_sets_the_endpoint_pause(eagerness: str, ms: int) -> None:
    h = Harness()
    td = {"type": "semantic_vad", "eagerness": eagerness, "create_response": False}
    h.send(
        type="session.update",
        session={"type": "transcription", "audio": {"input": {"turn_detection": td}}},
    )
    assert h.out[-1]["session"]["audio"]["input"]["turn_detection"] == td
    assert h.codec.stream_setup().session.endpoint_silence_ms == ms


def test_semantic_vad_bad_eagerness_is_refused() -> None:
    h = Harness()
    td = {"type": "semantic_vad", "eagerness": "eager"}
    h.send(
        type="session.update",
        session={"type": "transcription", "audio": {"input": {"turn_detection": td}}},
    )
    assert h.out[-1]["error"]["param"] == "session.audio.input.turn_detection.eagerness"


def test_languages_and_keywords() -> None:
    h = Harness(multilingual=True)
    update = transcription(model="gpt-transcribe", languages=["de", "FR"],
                           keywords=["Kettle", " kettle ", "CTranslate2"])  # fmt: skip
    h.send(type="session.update", session=update)
    tr = h.out[-1]["session"]["audio"]["input"]["transcription"]
    assert (tr["languages"], tr["keywords"]) == (["de", "fr"], ["Kettle", "CTranslate2"])
    config = h.codec.stream_setup().session
    assert (config.language, config.languages) == (None, ("de", "fr"))
    assert config.keyterms == ("Kettle", "CTranslate2")
    h.send(type="session.update", session=transcription(languages=["es"]))
    config = h.codec.stream_setup().session
    assert (config.language, config.languages) == ("es", ())
    h.send(type="session.update", session=transcription(language="it", languages=["de", "fr"]))
    config = h.codec.stream_setup().session
    assert (config.language, config.languages) == ("it", ())


def test_bad_languages_and_keywords_are_refused() -> None:
    h = Harness()
    cases: list[tuple[dict[str, Any], str]] = [
        ({"languages": ["de"]}, PARAM + ".languages"),  # tiny.en is English-only
        ({"languages": "en"}, PARAM + ".languages"),
        ({"keywords": ["x" * 101]}, PARAM + ".keywords"),
        ({"keywords": "Kettle"}, PARAM + ".keywords"),
    ]
    for fields, param in cases:
        h.send(type="session.update", session=transcription(**fields))
        assert h.out[-1]["error"]["param"] == param
    h.send(type="session.update", session={"type": "transcription", "include": ["logprobs"]})
    assert h.out[-1]["error"]["param"] == "session.include"


def test_keywords_change_mid_stream() -> None:
    h = Harness()
    h.send(type="session.update", session=transcription(keywords=["Kettle"]))
    h.append(TWO[: len(TWO) // 2])
    h.send(type="session.update", session=transcription(keywords=["Whisper", "Kettle"]))
    assert h.out[-1]["type"] == "session.updated"
    # (Before audio the stream opens with them; after it, a Reconfigure changes them.)
    assert h.codec.stream_setup().session.keyterms == ("Whisper", "Kettle")
    assert [r.session.keyterms for r in h.reconfigured if r.session] == [("Whisper", "Kettle")]
    assert h.session is not None and h.session.keyterms == ("Whisper", "Kettle")
    # The same keywords again change nothing.
    h.send(type="session.update", session=transcription(keywords=["Whisper", "Kettle"]))
    assert len(h.reconfigured) == 1


def test_logprobs_and_languages_on_items() -> None:
    h = Harness()
    h.send(
        type="session.update",
        session={"type": "transcription", "include": ["item.input_audio_transcription.logprobs"]},
    )
    assert h.out[-1]["session"]["include"] == ["item.input_audio_transcription.logprobs"]
    assert h.codec.stream_setup().session.word_timestamps
    h.append(TWO)
    completed = h.of(PREFIX + "completed")
    assert len(completed) == 2
    for done in completed:
        assert done["languages"] == [{"code": "en"}]
        tokens = [p["token"].strip() for p in done["logprobs"]]
        assert tokens == done["transcript"].split()
        assert all(p["logprob"] <= 0 and p["bytes"] for p in done["logprobs"])
        deltas = [e for e in h.of(PREFIX + "delta") if e["item_id"] == done["item_id"]]
        assert [p for d in deltas for p in d["logprobs"]] == done["logprobs"]


def test_no_logprobs_unless_asked() -> None:
    h = Harness()
    h.append(TWO)
    assert all("logprobs" not in e for e in h.of(PREFIX + "delta") + h.of(PREFIX + "completed"))
    assert h.out[0]["session"]["include"] is None


def test_language_after_audio_is_taken() -> None:
    # Pipecat's OpenAIRealtimeSTTService appends audio before its update (language "en").
    h = Harness()
    h.append(TWO[:3200])
    h.send(type="session.update", session=transcription(language="en"))
    assert h.out[-1]["type"] == "session.updated"
    multilingual = Harness(multilingual=True)
    multilingual.append(TWO[:3200])
    multilingual.send(type="session.update", session=transcription(language="en"))
    assert multilingual.out[-1]["type"] == "session.updated"  # for the next item
    (change,) = multilingual.reconfigured
    assert change.session is not None and change.session.language == "en"
