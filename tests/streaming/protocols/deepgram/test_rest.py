"""Deepgram's prerecorded response body and query, checked against the SDK's models."""

from __future__ import annotations

from typing import Any

import pytest
from deepgram.core.unchecked_base_model import construct_type
from deepgram.listen.v1.media.types import MediaTranscribeResponse
from deepgram.types import ListenV1Response
from kettle.streaming.protocols.deepgram.rest import (
    PrerecordedParams,
    parse_prerecorded_query,
    render_prerecorded,
)
from kettle.streaming.protocols.deepgram.wire import ListenParamError
from kettle.transcribe.audio.read import RawFormat

from tests.streaming.protocols.deepgram.conftest import REST_MODEL as MODEL
from tests.streaming.protocols.deepgram.conftest import REST_TRANSCRIPT as TRANSCRIPT


def render(params: PrerecordedParams) -> dict[str, Any]:
    return render_prerecorded(
        TRANSCRIPT,
        params,
        request_id="req-2",
        created="2026-12-01T08:00:00.000Z",
        sha256="ab" * 32,
        channels=1,
        model=MODEL,
    )


def test_body_is_a_listen_response_for_the_sdk() -> None:
    body = render(PrerecordedParams(punctuate=True))
    ListenV1Response.model_validate(body)
    parsed = construct_type(type_=MediaTranscribeResponse, object_=body)  # type: ignore[arg-type]
    assert isinstance(parsed, ListenV1Response)  # not the callback acknowledgement
    assert "request_id" not in body and body["metadata"]["request_id"] == "req-2"
    meta = body["metadata"]
    assert (meta["duration"], meta["channels"], meta["models"]) == (4.25, 1, [MODEL.uuid])
    assert meta["model_info"] == {
        MODEL.uuid: {"name": "tiny.en", "version": "0.1.0", "arch": "whisper"}
    }
    result: Any = parsed
    parsed_alt = result.results.channels[0].alternatives[0]
    assert parsed_alt.transcript == "Hello, world. Bye!" and parsed_alt.confidence == 0.8
    alt = body["results"]["channels"][0]["alternatives"][0]
    assert [(w["word"], w["start"], w["end"], w["punctuated_word"]) for w in alt["words"]] == [
        ("hello", 0.5, 0.9, "Hello,"),
        ("world", 1.0, 1.5, "world."),
        ("bye", 2.0, 3.0, "Bye!"),
    ]


def test_plain_transcript_and_detected_language() -> None:
    body = render(PrerecordedParams(detect_language=True))
    channel = body["results"]["channels"][0]
    assert channel["alternatives"][0]["transcript"] == "hello world bye"
    assert channel["detected_language"] == "en"
    assert "detected_language" not in render(PrerecordedParams())["results"]["channels"][0]


def parse(query: str, multilingual: bool = False) -> PrerecordedParams:
    return parse_prerecorded_query(query, multilingual=multilingual, model_name="tiny.en")


def test_query() -> None:
    assert parse("") == PrerecordedParams()
    p = parse("model=nova-3&smart_format=true&encoding=alaw&channels=2&sample_rate=8000")
    assert p.raw == RawFormat("alaw", 8000, 2) and p.formatted and p.model == "nova-3"
    assert parse("encoding=linear16&sample_rate=16000").raw == RawFormat("s16le", 16000, 1)
    # As on the live socket: a self-describing encoding is read as the container it is.
    assert parse("encoding=flac&sample_rate=44100").raw is None
    assert parse("encoding=ogg-opus").raw is None
    assert parse("detect_language=true", multilingual=True).language is None
    assert parse("detect_language=true").language == "en"  # English-only: nothing to detect
    assert parse("language=fr-CA", multilingual=True).language == "fr"
    # detect_language wins over language, which is then not read at all.
    assert parse("detect_language=true&language=xx", multilingual=True).language is None
    assert parse("tag=a&tag=b&punctuate=true&punctuate=true").punctuate  # as the live query


@pytest.mark.parametrize(
    ("query", "match"),
    [
        ("encoding=opus", "encoding"),
        ("encoding=linear16&sample_rate=0", "sample_rate"),
        # Raw audio needs its rate, as on the live socket (Deepgram documents both).
        ("encoding=linear16", "sample_rate is required with encoding=linear16"),
        ("encoding=mulaw&channels=2", "sample_rate is required with encoding=mulaw"),
        ("multichannel=maybe", "multichannel"),
        ("language=de", "English-only"),
        ("punctuate=maybe", "punctuate"),
        ("language=en&language=de", "more than once"),
        ("model=%ff", "decoded"),
    ],
)
def test_bad_query(query: str, match: str) -> None:
    with pytest.raises(ListenParamError, match=match):
        parse(query)
