"""Deepgram's ``diarize`` on the wire: the query, the live Results' words and the prerecorded
body's words carry ``speaker`` and ``speaker_confidence``, as the SDK's models parse them;
a server with no speaker model refuses it with 400 in Deepgram's shape."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from deepgram.listen.v1.types import ListenV1Results
from deepgram.types import ListenV1Response
from kettle.streaming.protocols.base import ModelInfo
from kettle.streaming.protocols.deepgram import live as deepgram
from kettle.streaming.protocols.deepgram.rest import (
    PrerecordedParams,
    parse_prerecorded_query,
    render_prerecorded,
)
from kettle.streaming.protocols.deepgram.wire import (
    NO_SPEAKER_MODEL,
    ListenParamError,
    check_speakers,
    parse_listen_query,
)
from kettle.streaming.protocols.handshake import HandshakeRefused, HandshakeRequest
from kettle.transcribe.transcript import Segment, Transcript
from kettle.transcribe.types import Word

from tests.streaming.protocols.deepgram.conftest import RAW, RECEIVED, codec, final, messages
from tests.streaming.protocols.deepgram.conftest import REST_MODEL as MODEL
from tests.streaming.protocols.deepgram.conftest import REST_TRANSCRIPT as TRANSCRIPT


def live(query: str) -> Any:
    return parse_listen_query(query, multilingual=False, model_name="tiny.en")


def test_diarize_and_diarize_model_ask_for_speakers() -> None:
    assert not live("").diarize and not live("diarize=false").diarize
    assert live("diarize=true").diarize and live("diarize_model=latest").diarize
    assert live("diarize=true").session_config().diarize
    assert not live("").session_config().diarize
    pre = parse_prerecorded_query("diarize=true", multilingual=False, model_name="tiny.en")
    assert pre.diarize
    with pytest.raises(ListenParamError, match="diarize"):
        live("diarize=maybe")
    with pytest.raises(ListenParamError, match="no speaker model"):
        check_speakers(True, speakers=False)
    check_speakers(True, speakers=True)
    check_speakers(False, speakers=False)


def test_live_final_words_carry_the_speaker() -> None:
    c = codec(RAW + "&diarize=true")
    event = dataclasses.replace(
        final(0, 0.0, 1.0, "hello there", "endpoint"), speaker=1, speaker_confidence=0.873
    )
    (result,) = messages(c.on_event(event, RECEIVED))
    words = result["channel"]["alternatives"][0]["words"]
    assert [(w["speaker"], w["speaker_confidence"]) for w in words] == [(1, 0.873)] * 2
    parsed = ListenV1Results.model_validate(result)
    assert [w.speaker for w in parsed.channel.alternatives[0].words] == [1, 1]


def test_live_without_diarize_and_interim_results_have_no_speaker() -> None:
    c = codec(RAW + "&interim_results=true")
    (result,) = messages(c.on_event(final(0, 0.0, 1.0, "hello there", "endpoint"), RECEIVED))
    assert all("speaker" not in w for w in result["channel"]["alternatives"][0]["words"])


def test_live_multichannel_labels_each_channel() -> None:
    c = codec(RAW + "&channels=2&multichannel=true&diarize=true")
    assert c.stream_setup().session.diarize  # each channel's stream diarizes on its own
    for channel, speaker in ((0, 0), (1, 0)):
        event = dataclasses.replace(
            final(0, 0.0, 1.0, "hi", "endpoint"), speaker=speaker, speaker_confidence=1.0
        )
        (result,) = messages(c.on_channel_event(channel, event, RECEIVED))
        assert result["channel_index"] == [channel, 2]
        assert result["channel"]["alternatives"][0]["words"][0]["speaker"] == speaker


def test_handshake_refuses_diarize_without_a_speaker_model() -> None:
    request = HandshakeRequest("/v1/listen", RAW + "&diarize=true")
    with pytest.raises(HandshakeRefused) as info:
        deepgram.prepare(request, ModelInfo("tiny.en", False))
    assert info.value.status == 400 and info.value.message == NO_SPEAKER_MODEL
    body, kind = deepgram.refusal(400, info.value.message)
    assert kind == "application/json"
    assert json.loads(body) == {"err_code": "Bad Request", "err_msg": NO_SPEAKER_MODEL}
    assert deepgram.prepare(request, ModelInfo("tiny.en", False, speakers=True))
    off = HandshakeRequest("/v1/listen", RAW + "&diarize=false")
    assert deepgram.prepare(off, ModelInfo("tiny.en", False))


LABELED = dataclasses.replace(
    TRANSCRIPT,
    segments=(
        dataclasses.replace(TRANSCRIPT.segments[0], speaker=0, speaker_confidence=0.91),
        dataclasses.replace(TRANSCRIPT.segments[1], speaker=1, speaker_confidence=0.42),
    ),
)


def render(transcript: Transcript, params: PrerecordedParams) -> dict[str, Any]:
    return render_prerecorded(
        transcript,
        params,
        request_id="req-3",
        created="2026-12-01T08:00:00.000Z",
        sha256="ab" * 32,
        channels=1,
        model=MODEL,
    )


def test_prerecorded_words_take_their_segments_speaker() -> None:
    body = render(LABELED, PrerecordedParams(diarize=True))
    words = body["results"]["channels"][0]["alternatives"][0]["words"]
    assert [(w["word"], w["speaker"], w["speaker_confidence"]) for w in words] == [
        ("hello", 0, 0.91),
        ("world", 0, 0.91),
        ("bye", 1, 0.42),
    ]
    parsed: Any = ListenV1Response.model_validate(body)
    alt = parsed.results.channels[0].alternatives[0]
    assert [(w.speaker, w.speaker_confidence) for w in alt.words or []] == [
        (0, 0.91),
        (0, 0.91),
        (1, 0.42),
    ]
    # Without diarize the labels (had the transcript any) are not shown.
    plain = render(LABELED, PrerecordedParams())["results"]["channels"][0]["alternatives"][0]
    assert all("speaker" not in w for w in plain["words"])


def test_prerecorded_segment_without_a_confidence_says_zero() -> None:
    segment = Segment(0.0, 1.0, "Hi", (Word(" Hi", 0.0, 1.0, 0.9),), speaker=2)
    unsure = Transcript(1.0, "en", (segment,))
    (word,) = render(unsure, PrerecordedParams(diarize=True))["results"]["channels"][0][
        "alternatives"
    ][0]["words"]
    assert (word["speaker"], word["speaker_confidence"]) == (2, 0.0)
