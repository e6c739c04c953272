"""AssemblyAI v3 corrections (kettle's ``kettle_revisions`` query parameter): a Revision is one
more end-of-turn ``Turn`` of the turn it corrects, only for a client that asked; without the
parameter the stream asks for no revisions and the wire is what it always was. On scripted
events and through a real Session answered by the fake model (whose refinement spells
"alpha" as "alfa", transcribe/model/fake.py)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from kettle.streaming.core.backlog import FINAL, REVISION
from kettle.streaming.core.events import Done, Final, Partial, Revision
from kettle.streaming.core.session import Session
from kettle.streaming.core.vad import EnergyClassifier
from kettle.streaming.protocols.assemblyai import live as assemblyai
from kettle.streaming.protocols.assemblyai.live import AssemblyAICodec
from kettle.streaming.protocols.assemblyai.wire import parse_query
from kettle.streaming.protocols.base import (
    REVISION_HORIZON,
    Action,
    AudioReceived,
    CodecContext,
    FeedAudio,
    Limits,
    ModelInfo,
    Send,
    Stop,
)
from kettle.streaming.protocols.handshake import HandshakeRefused, HandshakeRequest
from kettle.transcribe.model.fake import FakeDecoder, scripted_audio
from kettle.transcribe.types import SAMPLE_RATE, Word
from pipecat.services.assemblyai.models import TurnMessage

from tests.conftest import pcm16

SR = SAMPLE_RATE
RECEIVED = AudioReceived()
TINY = ModelInfo("tiny.en", False)
# Three turns; each but the last has audio after it, so the fake refinement revises it.
THREE = scripted_audio([("silence", 1.0), ("voice", 2.0), ("silence", 1.0), ("voice", 3.0),
                        ("silence", 1.0), ("voice", 1.5), ("silence", 0.5)])  # fmt: skip


class Allow:
    def check(self) -> str:
        return "allow"


def codec(query: str = "") -> AssemblyAICodec:
    context = CodecContext("s1", TINY, Limits(max_session_s=3600))
    return AssemblyAICodec(context, parse_query(query, multilingual=False))


def turns(actions: list[Action]) -> list[dict[str, Any]]:
    out = []
    for action in actions:
        assert isinstance(action, Send)
        obj = json.loads(action.message.text)
        TurnMessage.model_validate(obj)  # Pipecat's model of AssemblyAI's Turn
        out.append(obj)
    return out


def words(*spec: tuple[str, float, float]) -> tuple[Word, ...]:
    return tuple(Word(w, s, e, 0.9) for w, s, e in spec)


ALPHA = words((" Alpha,", 0.5, 0.9), (" bravo.", 1.0, 1.4))
ALFA = words((" Alfa,", 0.5, 0.9), (" bravo.", 1.0, 1.4))
FINAL_0 = Final(0, 0, 2 * SR, " Alpha, bravo.", ALPHA, "en", reason="endpoint")
REVISION_0 = Revision(0, 0, 2 * SR, "Alfa, bravo.", ALFA, "en", replaced=" Alpha, bravo.")


# -- the parameter ----------------------------------------------------------------------------


def test_kettle_revisions_asks_for_revisions_and_is_off_by_default() -> None:
    assert not parse_query("", multilingual=False).session_config().revisions
    assert not parse_query("kettle_revisions=false", multilingual=False).revisions
    params = parse_query("sample_rate=16000&kettle_revisions=TRUE", multilingual=False)
    assert params.revisions and params.session_config().revisions


@pytest.mark.parametrize(
    "query",
    [
        "kettle_revisions=maybe",
        "kettle_revisions=",
        "kettle_revisions=1",
        "kettle_revisions=true&kettle_revisions=false",
    ],
)
def test_a_bad_value_is_refused_in_assemblyais_shape(query: str) -> None:
    request = HandshakeRequest(assemblyai.PATH, query)
    with pytest.raises(HandshakeRefused) as refused:
        assemblyai.prepare(request, TINY)
    assert refused.value.status == 400 and "kettle_revisions" in refused.value.message
    body, kind = assemblyai.refusal(400, refused.value.message)
    assert kind == "application/json" and set(json.loads(body)) == {"error"}


# -- scripted events --------------------------------------------------------------------------


def test_a_revision_is_one_more_end_of_turn_turn_of_the_same_order() -> None:
    c = codec("kettle_revisions=true")
    c.on_event(Partial(0, 0, SR, " Alpha, bra", " Alpha,"), RECEIVED)
    (eot,) = turns(c.on_event(FINAL_0, RECEIVED))
    c.on_event(Partial(1, 3 * SR, 4 * SR, " Charlie", ""), RECEIVED)  # turn 1 opens
    out = c.on_event(REVISION_0, RECEIVED)
    (fix,) = turns(out)
    assert isinstance(out[0], Send) and out[0].message.kind == REVISION
    assert (out[0].message.utterance, out[0].message.end) == (0, 2 * SR)
    assert fix == {
        **eot,
        "transcript": "alfa bravo",
        "utterance": "alfa bravo",
        "words": [
            {"start": 500, "end": 900, "text": "alfa", "confidence": 0.9, "word_is_final": True},
            {"start": 1000, "end": 1400, "text": "bravo", "confidence": 0.9, "word_is_final": True},
        ],
    }
    assert fix["turn_order"] == 0 and fix["end_of_turn"] and not fix["turn_is_formatted"]


def test_with_format_turns_the_correction_is_formatted() -> None:
    c = codec("format_turns=true&kettle_revisions=true&language_detection=true")
    _, formatted = turns(c.on_event(FINAL_0, RECEIVED))
    (fix,) = turns(c.on_event(REVISION_0, RECEIVED))
    assert fix["turn_is_formatted"] and fix["end_of_turn"] and fix["turn_order"] == 0
    assert fix["transcript"] == "Alfa, bravo." and fix["utterance"] == formatted["utterance"] == ""
    assert [w["text"] for w in fix["words"]] == ["Alfa,", "bravo."]
    assert fix["language_code"] == "en"
    assert set(fix) == set(formatted)


def test_on_universal_3_pro_utterance_is_the_corrected_transcript() -> None:
    c = codec("speech_model=u3-rt-pro&kettle_revisions=true")
    (eot,) = turns(c.on_event(FINAL_0, RECEIVED))
    (fix,) = turns(c.on_event(REVISION_0, RECEIVED))
    assert fix["turn_is_formatted"] and fix["transcript"] == fix["utterance"] == "Alfa, bravo."
    assert fix["end_of_turn_confidence"] == eot["end_of_turn_confidence"]


def test_without_the_parameter_a_revision_sends_nothing() -> None:
    c = codec()
    (eot,) = c.on_event(FINAL_0, RECEIVED)
    assert isinstance(eot, Send) and eot.message.kind == FINAL
    assert c.on_event(REVISION_0, RECEIVED) == []


def test_no_correction_for_a_turn_that_never_was() -> None:
    c = codec("kettle_revisions=true")
    assert c.on_event(Final(0, 0, SR, " ", (), "en"), RECEIVED) == []  # no words: no turn
    assert c.on_event(REVISION_0, RECEIVED) == []
    assert c.on_event(Revision(7, 0, SR, "x", (), "en"), RECEIVED) == []  # an unknown final
    assert len(turns(c.on_event(FINAL_0, RECEIVED))) == 1
    assert c.on_event(Revision(0, 0, SR, " ", (), "en"), RECEIVED) == []  # no words left


def test_turns_far_behind_are_let_go() -> None:
    c = codec("kettle_revisions=true")
    turns(c.on_event(FINAL_0, RECEIVED))
    late = 2 * SR + REVISION_HORIZON + SR
    later = Final(1, late, late + SR, " Charlie", words((" Charlie", late / SR, late / SR + 1)),
                  "en")  # fmt: skip
    turns(c.on_event(later, RECEIVED))
    assert c.on_event(REVISION_0, RECEIVED) == []


# -- a real Session and the fake model ------------------------------------------------------------


def transcribe(query: str, audio: np.ndarray) -> tuple[list[dict[str, Any]], Session]:
    """The codec's Turns for audio sent in 100 ms messages, then Terminate."""
    c = codec(query)
    session = Session(c.stream_setup().session, classifier=EnergyClassifier())
    decoder = FakeDecoder()
    out: list[dict[str, Any]] = []

    def settle() -> None:
        while True:
            for event in session.poll_events():
                for action in c.on_event(event, RECEIVED):
                    assert isinstance(action, Send)
                    out.append(json.loads(action.message.text))
                if isinstance(event, Done):
                    return
            requests = session.poll_requests()
            if not requests:
                return
            for result in decoder.decode_batch(requests):
                session.on_result(result)

    pcm = pcm16(audio)
    for i in range(0, len(pcm), 3200):
        for action in c.on_binary(pcm[i : i + 3200]):
            assert isinstance(action, FeedAudio)
            session.feed_audio(np.frombuffer(action.data, "<i2").astype(np.float32) / 32768)
            settle()
    assert c.on_text('{"type": "Terminate"}', Allow()) == [Stop()]
    session.stop()
    settle()
    return out, session


def test_through_a_session_each_revised_turn_gets_its_correction() -> None:
    out, _ = transcribe("kettle_revisions=true", THREE)
    ends = [m for m in out if m["type"] == "Turn" and m["end_of_turn"]]
    # Each turn's end of turn; the first two (with audio after them) corrected once, each
    # correction after its turn's end.
    assert sorted(m["turn_order"] for m in ends) == [0, 0, 1, 1, 2]
    for order in (0, 1):
        first, fix = [m for m in ends if m["turn_order"] == order]
        assert fix["transcript"] == first["transcript"].replace("alpha", "alfa")
        assert fix["transcript"] != first["transcript"]
        assert [w["text"] for w in fix["words"]] == fix["transcript"].split()
        assert {k: v for k, v in fix.items() if k not in ("transcript", "utterance", "words")} == {
            k: v for k, v in first.items() if k not in ("transcript", "utterance", "words")
        }
    assert out[-1]["type"] == "Termination"


def test_through_a_session_without_the_parameter_nothing_is_refined() -> None:
    out, session = transcribe("", THREE)
    ends = [m for m in out if m["type"] == "Turn" and m["end_of_turn"]]
    assert [m["turn_order"] for m in ends] == [0, 1, 2]
    assert session.refinements is None  # no revision was asked for
