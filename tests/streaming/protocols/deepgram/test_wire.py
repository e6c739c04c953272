"""Deepgram's wire vocabulary: the live handshake's query and credentials."""

from __future__ import annotations

import pytest
from kettle.streaming.protocols.deepgram.wire import (
    MIN_ENDPOINTING_MS,
    ListenParamError,
    ListenParams,
    listen_credentials,
    parse_listen_query,
)

RAW = "encoding=linear16&sample_rate=16000"  # raw audio: both are required


def parse(query: str, *, multilingual: bool = False) -> ListenParams:
    return parse_listen_query(query, multilingual=multilingual, model_name="tiny.en")


def test_query_defaults_and_every_parameter() -> None:
    p = parse(RAW)
    assert (p.sample_rate, p.channels, p.language, p.interim_results) == (16000, 1, "en", False)
    assert p.endpointing and p.endpointing_ms is None and p.utterance_end_ms is None
    assert not (p.vad_events or p.punctuate or p.smart_format or p.formatted)
    assert parse("encoding=mulaw&sample_rate=8000").sample_rate == 8000
    assert parse("encoding=alaw&sample_rate=8000").pcm_encoding == "alaw"
    p = parse(
        "model=nova-3&language=en-US&encoding=linear16&sample_rate=48000&channels=2"
        "&interim_results=true&endpointing=300&utterance_end_ms=1000&vad_events=True"
        "&punctuate=true&smart_format=false&diarize=true&multichannel=false"
    )
    assert (p.model, p.language, p.sample_rate, p.channels, p.frame_bytes) == (
        "nova-3",
        "en",
        48000,
        2,
        4,
    )
    assert p.interim_results and p.vad_events and p.punctuate and p.formatted
    assert (p.endpointing_ms, p.utterance_end_ms) == (300, 1000)
    config = p.session_config()
    assert config.endpoint_silence_ms == 300 and config.partials and config.word_timestamps
    assert config.vad_events and config.language == "en"
    # Deepgram's default of 10 ms would cut Whisper's windows into word fragments.
    assert parse(RAW + "&endpointing=10").session_config().endpoint_silence_ms == (
        MIN_ENDPOINTING_MS
    )
    off = parse(RAW + "&endpointing=false")
    assert not off.endpointing and off.session_config().endpoint_silence_ms == 500
    assert parse(RAW + "&language=multi", multilingual=True).language is None
    assert parse(RAW + "&language=de", multilingual=True).language == "de"
    # Parameters kettle ignores may repeat, as Deepgram's lists do; those it reads may
    # repeat only with one value.
    assert parse(RAW + "&tag=a&tag=b&keywords=x:2&keywords=y").encoding == "linear16"
    assert parse(RAW + "&encoding=linear16").encoding == "linear16"


@pytest.mark.parametrize(
    ("query", "match"),
    [
        ("encoding=opus", "encoding must be one of"),
        # Raw audio says neither its encoding nor its rate: Deepgram requires both.
        ("encoding=linear16", "sample_rate is required with encoding=linear16"),
        ("encoding=mulaw&channels=2", "sample_rate is required with encoding=mulaw"),
        ("encoding=ALAW", "sample_rate is required with encoding=alaw"),
        ("encoding=linear16&sample_rate=7000", "sample_rate"),
        ("encoding=linear16&sample_rate=fast", "sample_rate"),
        (RAW + "&channels=9", "channels"),
        (RAW + "&multichannel=maybe", "multichannel"),
        (RAW + "&language=de", "English-only"),
        (RAW + "&language=xx", "language"),
        (RAW + "&interim_results=yes", "interim_results"),
        (RAW + "&endpointing=-5", "endpointing"),
        (RAW + "&utterance_end_ms=0", "utterance_end_ms"),
        (RAW + "&encoding=mulaw", "more than once"),
        (RAW + "&model=%ff", "decoded"),
    ],
)
def test_bad_query_is_refused_with_a_reason(query: str, match: str) -> None:
    with pytest.raises(ListenParamError, match=match):
        parse(query)


def test_containers_and_multichannel() -> None:
    # No encoding: a container, whatever sample_rate says (its header gives the rate).
    p = parse("sample_rate=8000&channels=2")
    assert p.encoding is None and p.pcm_encoding is None and p.frame_bytes == 1
    assert (p.channels, p.multichannel, p.streams) == (2, False, 1)
    assert parse("encoding=ogg-opus&sample_rate=48000").encoding is None
    assert parse("encoding=FLAC").encoding is None
    p = parse(RAW + "&channels=3&multichannel=true")
    assert (p.channels, p.multichannel, p.streams, p.frame_bytes) == (3, True, 3, 6)


def test_keyterm_and_keywords_become_one_list_of_terms() -> None:
    p = parse(
        RAW + "&keyterm=Kettle&keyterm=tiny%20en&keywords=Whisper:2"
        "&keywords=kettle:-1.5&keywords=Ray"
    )
    # keyterm first, then keywords without their intensifiers; duplicates once.
    assert p.keyterms == ("Kettle", "tiny en", "Whisper", "Ray")
    assert p.session_config().keyterms == p.keyterms
    assert parse(RAW).keyterms == ()
    with pytest.raises(ListenParamError, match="at most"):
        parse(RAW + "&" + "&".join(f"keyterm=t{i}" for i in range(101)))
    with pytest.raises(ListenParamError, match="at most"):
        parse(RAW + "&keyterm=" + "x" * 101)


def test_credentials_from_header_or_subprotocols() -> None:
    assert listen_credentials("Token abc", []) == ("abc", None)
    assert listen_credentials("token  abc ", []) == ("abc", None)
    assert listen_credentials("bearer jwt.x.y", []) == ("jwt.x.y", None)
    assert listen_credentials(None, ["token", "abc"]) == ("abc", "token")
    assert listen_credentials(None, ["token"]) == (None, None)
    assert listen_credentials("Basic abc", ["realtime"]) == (None, None)
