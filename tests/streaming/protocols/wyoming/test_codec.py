"""The Wyoming codec, driven as the runner would on real Sessions and the fake model."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from kettle.streaming.protocols.base import CodecContext, Limits, ModelInfo
from kettle.streaming.protocols.wyoming import frames
from kettle.streaming.protocols.wyoming.codec import WyomingCodec
from kettle.transcribe.model.fake import FakeDecoder, scripted_audio
from kettle.transcribe.types import DecodeRequest, DecodeResult
from wyoming.asr import Transcribe
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.event import Event
from wyoming.info import Describe
from wyoming.ping import Ping

from tests.streaming.protocols.driver import Driver
from tests.streaming.protocols.wyoming.conftest import wire

SPEECH = scripted_audio(
    [("silence", 0.3), ("voice", 1.5), ("silence", 1.0), ("voice", 2.0), ("silence", 0.3)]
)  # fmt: skip
FORMAT = {"rate": 16000, "width": 2, "channels": 1}


def pcm(samples: np.ndarray) -> bytes:
    return (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()


def driver(multilingual: bool = False, **limits: object) -> Driver:
    model = ModelInfo("tiny.en", multilingual=multilingual)
    return Driver(WyomingCodec(CodecContext("s", model, Limits(**limits))))  # type: ignore[arg-type]


def send_round(d: Driver, audio: bytes, chunk: int = 3200, **fmt: int) -> None:
    f = {**FORMAT, **fmt}
    d.binary(wire(AudioStart(**f)))
    for i in range(0, len(audio), chunk):
        d.binary(wire(AudioChunk(audio=audio[i : i + chunk], **f)))


def types(d: Driver) -> list[str]:
    return d.messages()


def test_describe_answers_info_with_streaming() -> None:
    d = driver()
    d.binary(wire(Describe()))
    (info,) = [s.obj for s in d.sent]
    assert info["type"] == "info"
    (asr,) = info["data"]["asr"]
    assert asr["supports_transcript_streaming"] is True
    assert asr["models"][0]["name"] == "tiny.en" and asr["models"][0]["languages"] == ["en"]


def test_ping_gets_pong() -> None:
    d = driver()
    d.binary(wire(Ping(text="x")))
    assert d.sent[0].obj == {"type": "pong", "data": {"text": "x"}}


def test_a_round_streams_chunks_then_the_transcript_equal_to_them() -> None:
    d = driver()
    d.binary(wire(Transcribe(language="en")))
    send_round(d, pcm(SPEECH))
    before_stop = types(d)
    assert before_stop[0] == "transcript-start"
    assert "transcript-chunk" in before_stop  # words arrive while audio does
    d.binary(wire(AudioStop()))
    kinds = types(d)
    assert kinds[-2:] == ["transcript", "transcript-stop"]
    assert set(kinds[1:-2]) == {"transcript-chunk"}
    chunks = "".join(s.obj["data"]["text"] for s in d.sent if s.obj["type"] == "transcript-chunk")
    transcript = d.sent[-2].obj["data"]
    assert transcript["text"] == chunks and chunks.strip()
    assert " ".join(f.text.strip() for f in d.finals).split() == chunks.split()
    assert not any(s.closing for s in d.sent)


def test_several_rounds_on_one_connection() -> None:
    d = driver()
    texts = []
    for _ in range(3):
        d.binary(wire(Transcribe()))
        send_round(d, pcm(SPEECH))
        d.binary(wire(AudioStop()))
        texts.append(d.sent[-2].obj["data"]["text"])
        assert types(d)[-1] == "transcript-stop"
    assert types(d).count("transcript-start") == 3 and all(texts)
    assert len(d.streams) == 1  # one engine stream serves every round


def test_a_round_is_decoded_in_its_own_context_never_in_an_earlier_rounds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Satellites' commands are separate requests: the stream carries on, its context does not.
    asked: list[DecodeRequest] = []
    decode = FakeDecoder.decode_batch

    def spy(self: FakeDecoder, requests: list[DecodeRequest]) -> list[DecodeResult]:
        asked.extend(requests)
        return decode(self, requests)

    monkeypatch.setattr(FakeDecoder, "decode_batch", spy)
    d = driver()
    for _ in range(2):  # two utterances a round: ordinals 0, 1 and then 2, 3
        d.binary(wire(Transcribe()))
        send_round(d, pcm(SPEECH))
        d.binary(wire(AudioStop()))
    by_utterance: dict[int, set[tuple[str | None, str | None]]] = {}
    for r in asked:
        assert isinstance(r.stream_key, tuple)
        by_utterance.setdefault(r.stream_key[1], set()).add((r.context, r.prompt))
    assert any(context for context, _ in by_utterance[1])  # the round's first final
    assert by_utterance[2] == {(None, None)}
    assert any(context for context, _ in by_utterance[3])


def test_a_new_format_at_the_next_audio_start_is_taken() -> None:
    d = driver()
    send_round(d, pcm(SPEECH))
    d.binary(wire(AudioStop()))
    fast = np.repeat(SPEECH, 3)  # 48 kHz
    send_round(d, pcm(fast), rate=48000)
    d.binary(wire(AudioStop()))
    assert types(d).count("transcript") == 2 and not any(s.closing for s in d.sent)
    assert d.sent[-2].obj["data"]["text"]


def test_audio_stop_without_audio_gets_an_empty_transcript() -> None:
    d = driver()
    d.binary(wire(AudioStart(**FORMAT)))
    d.binary(wire(AudioStop()))
    assert types(d) == ["transcript-start", "transcript", "transcript-stop"]
    assert d.sent[1].obj["data"]["text"] == ""


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b"{not json\n", frames.BAD_HEADER),
        (b"[1, 2]\n", frames.BAD_HEADER),
        (b'{"data": {}}\n', frames.BAD_HEADER),
        (b'{"type": "audio-chunk", "payload_length": -1}\n', frames.BAD_HEADER),
        (b'{"type": "audio-chunk", "payload_length": 99999999}\n', frames.TOO_BIG),
        (b'{"type": "describe", "data_length": 5}\n{"a"', frames.TRUNCATED),
        (b'{"type": "describe", "data_length": 3}\n[1]', frames.BAD_HEADER),
        (b'{"type": "x"' + b" " * frames.MAX_HEADER_BYTES, frames.TOO_BIG),
        (b'{"type": "transcribe"', frames.TRUNCATED),
    ],
)
def test_bad_frames_get_an_error_and_the_close(raw: bytes, code: str) -> None:
    d = driver()
    d.binary(raw)
    (error,) = d.sent
    assert error.obj["type"] == "error" and error.obj["data"]["code"] == code
    assert error.closing and error.obj["data"]["text"]
    d.binary(wire(Describe()))
    assert len(d.sent) == 1  # nothing more is read


def bad(d: Driver) -> dict[str, str]:
    last = d.sent[-1]
    assert last.closing and last.obj["type"] == "error", d.sent
    return last.obj["data"]


def test_audio_before_audio_start_is_refused() -> None:
    d = driver()
    d.binary(wire(AudioChunk(audio=b"\0\0" * 160, **FORMAT)))
    assert bad(d)["code"] == "bad_audio" and "before audio-start" in bad(d)["text"]


def test_a_chunk_format_that_changes_mid_stream_is_refused() -> None:
    d = driver()
    send_round(d, pcm(SPEECH[:8000]))
    d.binary(wire(AudioChunk(audio=b"\0\0" * 160, rate=8000, width=2, channels=1)))
    assert bad(d)["code"] == "bad_audio" and "format may change" in bad(d)["text"]


@pytest.mark.parametrize(
    ("fmt", "words"),
    [({"width": 4}, "width 4"), ({"width": 1}, "width 1"), ({"rate": 4000}, "rate 4000"),
     ({"channels": 9}, "9 channels")],
)  # fmt: skip
def test_formats_outside_the_bounds_are_refused(fmt: dict[str, int], words: str) -> None:
    d = driver()
    d.binary(wire(AudioStart(**{**FORMAT, **fmt})))
    assert bad(d)["code"] == "bad_audio" and words in bad(d)["text"]


def test_a_language_the_model_lacks_is_refused() -> None:
    d = driver()
    d.binary(wire(Transcribe(language="de")))
    assert bad(d)["code"] == "unsupported_language"
    d = driver()
    d.binary(wire(Transcribe(language="xx")))
    assert bad(d)["code"] == "unsupported_language"


def test_a_multilingual_model_takes_the_language_asked() -> None:
    d = driver(multilingual=True)
    d.binary(wire(Transcribe(language="de-DE", transcript_names=["Küche"])))
    setup = d.codec.stream_setup()
    assert setup.session.language == "de" and setup.session.keyterms == ("Küche",)
    d.binary(wire(Describe()))
    assert "de" in d.sent[-1].obj["data"]["asr"][0]["models"][0]["languages"]


def test_stray_events_and_order_errors() -> None:
    d = driver()
    d.binary(wire(AudioStop()))
    assert "without audio-start" in bad(d)["text"]
    d = driver()
    d.binary(wire(AudioStart(**FORMAT)))
    d.binary(wire(AudioStart(**FORMAT)))
    assert "twice" in bad(d)["text"]


def test_unknown_events_are_ignored() -> None:
    d = driver()
    d.binary(wire(frames_event := _event("select-program", {"name": "x"})))
    assert d.sent == [] and frames_event


def _event(kind: str, data: dict[str, Any]) -> Event:
    return Event(kind, data)


def test_chunk_text_is_json_event_data() -> None:
    d = driver()
    d.binary(wire(Describe()))
    assert json.loads(json.dumps(d.sent[0].obj))["type"] == "info"
