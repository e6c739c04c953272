"""Silero VAD as a stream, and as webrtcvad's veto after the words on short endpoints."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from faster_whisper.vad import get_vad_model
from kettle.streaming.core.config import SessionConfig
from kettle.streaming.core.events import Final
from kettle.streaming.core.session import Session
from kettle.streaming.core.silero import WINDOW, SileroStream, speech_veto
from kettle.streaming.core.vad import (
    Segmenter,
    SegmenterConfig,
    SegmentEvent,
    SpeechEnd,
    SpeechStart,
)
from kettle.transcribe.audio.read import load_audio
from kettle.transcribe.model.fake import FakeDecoder, synth_voice
from kettle.transcribe.types import SAMPLE_RATE

from tests.conftest import EvalClip

SR = SAMPLE_RATE


@pytest.fixture(scope="module")
def jfk(eval_clip: Callable[[str], EvalClip]) -> np.ndarray:
    """JFK's 11 s: his last word ends at about 10.5 s; crowd noise follows, which webrtcvad
    calls speech."""
    return np.asarray(load_audio(eval_clip("jfk__openai_whisper_jfk.flac").path), np.float32)


def test_the_stream_hears_what_faster_whispers_vad_hears_in_any_chunking(
    jfk: np.ndarray,
) -> None:
    whole = len(jfk) // WINDOW * WINDOW
    offline = get_vad_model()(jfk[:whole]).reshape(-1)  # the file pipeline's probabilities
    stream, fed = SileroStream(), 0
    for size in (320, 1000, 77, 4096):  # frames, odd sizes, several windows at once
        for i in range(fed, min(fed + 40 * size, whole), size):
            chunk = jfk[i : min(i + size, whole)]
            stream.feed(chunk)
            fed = i + len(chunk)
            if fed >= WINDOW:
                assert stream.probability == pytest.approx(offline[fed // WINDOW - 1], abs=1e-5)


def test_no_verdict_before_a_whole_window_then_silence_is_silent() -> None:
    stream = SileroStream()
    stream.feed(np.zeros(WINDOW - 1, np.float32))
    assert not stream.sure() and not stream.silent()
    stream.feed(np.zeros(1, np.float32))
    assert stream.silent()


def test_speech_is_not_silent_and_a_tone_is(jfk: np.ndarray) -> None:
    speech = SileroStream()
    speech.feed(jfk[: 2 * SR])
    assert not speech.silent()
    tone = SileroStream()
    tone.feed(synth_voice(1.0))  # what webrtcvad (and the fake model) take for a voice
    assert tone.silent()


SHORT = SegmenterConfig(endpoint_silence_ms=200, silero_veto=True)


def segment(audio: np.ndarray, config: SegmenterConfig, veto: bool = True) -> list[SegmentEvent]:
    seg = Segmenter(config, veto=SileroStream() if veto else None)
    events = [e for i in range(0, len(audio), 320) for e in seg.feed(audio[i : i + 320])]
    return events + seg.stop()


def ends(events: list[SegmentEvent]) -> list[SpeechEnd]:
    return [e for e in events if isinstance(e, SpeechEnd)]


def test_the_veto_ends_speech_where_the_words_end_not_where_the_noise_does(
    jfk: np.ndarray,
) -> None:
    audio = np.concatenate([jfk, np.zeros(SR, np.float32)])
    alone = ends(segment(audio, SHORT, veto=False))
    vetoed = ends(segment(audio, SHORT))
    assert alone[-1].speech_end >= int(10.9 * SR)  # webrtcvad hears the crowd to the end
    assert int(10.3 * SR) <= vetoed[-1].speech_end <= int(10.7 * SR)
    # The crowd after the words opens no utterance of its own.
    assert vetoed[-1].end < int(10.9 * SR)


def test_the_veto_waits_for_short_endpoints(jfk: np.ndarray) -> None:
    audio = np.concatenate([jfk, np.zeros(SR, np.float32)])
    default = SegmenterConfig()
    assert segment(audio, default) == segment(audio, default, veto=False)
    assert SessionConfig(endpoint_silence_ms=200).segmenter_config().silero_veto
    assert not SessionConfig().segmenter_config().silero_veto


def test_the_veto_decides_no_onset(espeak: Callable[..., np.ndarray]) -> None:
    # Silero rises late at a word's start; the utterance still opens at webrtcvad's onset.
    speech = espeak("go forward ten meters")
    audio = np.concatenate([np.zeros(SR, np.float32), speech, np.zeros(SR, np.float32)])
    starts = [e for e in segment(audio, SHORT) if isinstance(e, SpeechStart)]
    assert starts == [e for e in segment(audio, SHORT, veto=False) if isinstance(e, SpeechStart)]


def test_a_model_that_reads_tones_gets_no_veto() -> None:
    assert speech_veto(FakeDecoder()) is None
    assert isinstance(speech_veto(object()), SileroStream)


@pytest.fixture(scope="module")
def crowd(jfk: np.ndarray) -> np.ndarray:
    """The crowd after JFK's last word, four times over, between silences: webrtcvad opens an
    utterance on it, Silero never calls it speech."""
    noise = np.tile(jfk[int(10.55 * SR) :], 4)
    return np.concatenate([np.zeros(SR // 2, np.float32), noise, np.zeros(SR, np.float32)])


def test_an_utterance_silero_heard_no_speech_in_is_noise(crowd: np.ndarray) -> None:
    (end,) = ends(segment(crowd, SHORT))
    assert not end.heard
    (end,) = ends(segment(crowd, SegmenterConfig()))  # no veto on a long endpoint
    assert end.heard


def test_a_session_gives_noise_no_final(crowd: np.ndarray) -> None:
    # The fake decoder reads the crowd as words; on a short endpoint Silero says it is none.
    decoder, tone = FakeDecoder(), crowd
    for veto, finals in ((SileroStream(), 0), (None, 1)):
        session = Session(SessionConfig(endpoint_silence_ms=200), session_id="n", veto=veto)
        events = []
        for i in range(0, len(tone), 320):
            session.feed_audio(tone[i : i + 320])
            while requests := session.poll_requests():
                for result in decoder.decode_batch(requests):
                    session.on_result(result)
            events += session.poll_events()
        assert sum(isinstance(e, Final) for e in events) == finals
