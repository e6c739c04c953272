"""OpenAI Realtime corrections (kettle's ``kettle_revisions`` URL parameter): where a later
refinement reads a completed item's final otherwise, another ``completed`` event for the same
item and content index carries the corrected transcript; without the parameter the stream
asks for no revisions and the events are what they always were. Through a real Session and
the fake model, whose refinement spells "alpha" as "alfa" (transcribe/model/fake.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kettle.streaming.core.backlog import OTHER, REVISION
from kettle.streaming.protocols.base import Action, CodecContext, ModelInfo, Send
from kettle.streaming.protocols.handshake import HandshakeRefused, HandshakeRequest
from kettle.streaming.protocols.openai import realtime_route as route
from kettle.streaming.protocols.openai.realtime import RealtimeCodec
from kettle.streaming.protocols.openai.rest import MODEL_ALIASES
from openai.types.realtime import ConversationItemInputAudioTranscriptionCompletedEvent

from tests.streaming.protocols.openai.conftest import PREFIX, TWO, Harness, pcm24k

COMPLETED = PREFIX + "completed"
MODEL = ModelInfo("tiny.en", False, aliases=MODEL_ALIASES)
MANUAL = {"type": "transcription", "audio": {"input": {"turn_detection": None}}}


class Revising(Harness):
    """The test_openai_realtime harness on a codec made as the route makes it; it keeps each
    sent message's outbox kind too."""

    def __init__(self, query: str = "kettle_revisions=true") -> None:
        self.query = query
        self.kinds: list[str] = []
        super().__init__()

    def apply(self, actions: list[Action]) -> None:
        if not hasattr(self, "started"):  # Harness.__init__: the codec is made here instead
            self.started = True
            prepared = route.prepare(HandshakeRequest(route.PATH, self.query), MODEL)
            codec = prepared.make_codec(CodecContext("sess1", MODEL))
            assert isinstance(codec, RealtimeCodec)
            self.codec = codec
            self.out.clear()
            actions = codec.start()
        self.kinds += [a.message.kind for a in actions if isinstance(a, Send)]
        super().apply(actions)

    def completed(self) -> list[dict[str, Any]]:
        events = self.of(COMPLETED)
        for e in events:  # the official SDK's model of the event
            ConversationItemInputAudioTranscriptionCompletedEvent.model_validate(e)
        return events


# -- the parameter ----------------------------------------------------------------------------


def test_the_parameter_reaches_the_session_and_nothing_else() -> None:
    h = Revising("intent=transcription&kettle_revisions=true&model=gpt-4o-transcribe")
    assert h.codec.settings.revisions and h.codec.stream_setup().session.revisions
    assert "kettle" not in json.dumps(h.out)  # session.created says nothing of it
    h.send(type="session.update", session={"type": "transcription"})
    assert h.out[-1]["type"] == "session.updated" and "kettle" not in json.dumps(h.out[-1])
    assert h.codec.stream_setup().session.revisions  # an update keeps it
    for query in ("", "intent=transcription", "kettle_revisions=FALSE", "other=1"):
        assert not Revising(query).codec.stream_setup().session.revisions


@pytest.mark.parametrize("value", ["yes", "", "1", "on"])
def test_a_bad_value_is_refused_with_openais_error_object(value: str) -> None:
    request = HandshakeRequest(route.PATH, f"intent=transcription&kettle_revisions={value}")
    with pytest.raises(HandshakeRefused) as refused:
        route.prepare(request, MODEL)
    assert refused.value.status == 400 and "kettle_revisions" in refused.value.message
    body, kind = route.refusal(400, refused.value.message)
    assert kind == "application/json"
    assert json.loads(body)["error"] == {
        "message": refused.value.message,
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_request",
    }


# -- server_vad items -----------------------------------------------------------------------------


def test_a_revised_item_gets_another_completed_event() -> None:
    h = Revising()
    h.append(TWO)
    first, second, fix = h.completed()
    assert fix["item_id"] == first["item_id"] != second["item_id"]
    assert fix["content_index"] == first["content_index"] == 0
    assert first["transcript"].split()[0] == "alpha"
    assert fix["transcript"] == first["transcript"].replace("alpha", "alfa")
    assert fix["usage"] == first["usage"] and fix["languages"] == first["languages"]
    assert set(fix) == set(first)  # no field of kettle's own
    ids = [e["event_id"] for e in h.out]
    assert len(set(ids)) == len(ids)
    # Only after the item completed; the server measures its delay as a revision's.
    assert h.out.index(first) < h.out.index(fix)
    assert [k for k, e in zip(h.kinds, h.out, strict=True) if e is fix] == [REVISION]
    assert all(k == OTHER for k, e in zip(h.kinds, h.out, strict=True) if e is not fix)
    # The deltas are untouched: they add up to the first completed event, as before.
    deltas = [e["delta"] for e in h.of(PREFIX + "delta") if e["item_id"] == first["item_id"]]
    assert "".join(deltas) == first["transcript"]


def test_without_the_parameter_nothing_changes() -> None:
    plain, revising = Revising(""), Revising()
    plain.append(TWO)
    revising.append(TWO)
    assert len(plain.completed()) == 2 and len(revising.completed()) == 3
    strip = [{k: v for k, v in e.items() if k != "event_id"} for e in plain.out]
    fix = revising.completed()[-1]
    assert strip == [{k: v for k, v in e.items() if k != "event_id"}
                     for e in revising.out if e is not fix]  # fmt: skip
    assert plain.session is not None and plain.session.refinements is None


def test_logprobs_follow_the_corrected_words() -> None:
    h = Revising()
    h.send(
        type="session.update",
        session={"type": "transcription", "include": ["item.input_audio_transcription.logprobs"]},
    )
    h.append(TWO)
    first, _, fix = h.completed()
    assert fix["logprobs"][0]["token"].strip() == "alfa"
    assert len(fix["logprobs"]) == len(first["logprobs"])


def test_a_cleared_item_is_never_corrected() -> None:
    h = Revising()
    h.append(pcm24k([("silence", 0.5), ("voice", 1.5)]))
    (started,) = h.of("input_audio_buffer.speech_started")
    h.send(type="input_audio_buffer.clear")
    h.append(pcm24k([("silence", 1.0), ("voice", 2.5), ("silence", 1.0)]))
    assert h.session is not None and h.session.refinements is not None
    assert h.session.refinements.revised >= 1  # the cleared utterance was revised too
    assert started["item_id"] not in {e["item_id"] for e in h.completed()}


# -- manual commits ---------------------------------------------------------------------------


def test_a_revision_before_the_commit_follows_the_completed_event() -> None:
    h = Revising()
    h.send(type="session.update", session=MANUAL)
    h.append(TWO)  # the first utterance is revised before the commit
    assert not h.completed()
    h.send(type="input_audio_buffer.commit")
    completed, fix = h.completed()
    assert fix["item_id"] == completed["item_id"]
    assert completed["transcript"].split()[0] == "alpha"  # as the deltas said
    assert fix["transcript"] == completed["transcript"].replace("alpha", "alfa", 1)
    assert h.out.index(fix) == h.out.index(completed) + 1
