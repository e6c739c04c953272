"""The VAD segmenter: hysteresis, pre-roll, pauses, max-length cuts, noise rejection."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kettle.streaming.core.vad import (
    FRAME_SAMPLES,
    EnergyClassifier,
    Pause,
    Resume,
    Segmenter,
    SegmenterConfig,
    SpeechEnd,
    SpeechStart,
    WebrtcClassifier,
    spectral_flatness,
)
from kettle.transcribe.errors import ConfigError
from kettle.transcribe.model.fake import scripted_audio, synth_voice
from kettle.transcribe.types import SAMPLE_RATE

SR = SAMPLE_RATE


def run(seg: Segmenter, audio: np.ndarray, chunk: int = 320, stop: bool = True) -> list[object]:
    events: list[object] = []
    for i in range(0, len(audio), chunk):
        events += seg.feed(audio[i : i + chunk])
    if stop:
        events += seg.stop()
    return events


def test_voice_between_silences_gives_one_utterance_with_preroll_and_tail() -> None:
    audio = scripted_audio([("silence", 1.0), ("voice", 1.5), ("silence", 1.0)])
    events = run(Segmenter(SegmenterConfig(), WebrtcClassifier(2)), audio)
    assert [type(e) for e in events] == [SpeechStart, Pause, SpeechEnd]
    start, pause, end = events
    assert isinstance(start, SpeechStart) and isinstance(end, SpeechEnd)
    # Pre-roll: the utterance opens ~250 ms before the voice (frame-aligned).
    assert 1.0 * SR - 300 * 16 <= start.start <= 1.0 * SR - 200 * 16
    # Endpoint: 200 ms of tail after the last voiced frame.
    assert end.reason == "endpoint"
    assert 2.6 * SR <= end.end <= 2.8 * SR
    assert pause == Pause(end.end)


def test_exact_positions_with_energy_classifier() -> None:
    audio = scripted_audio([("silence", 1.0), ("voice", 2.0), ("silence", 1.0)])
    events = run(Segmenter(SegmenterConfig(), EnergyClassifier()), audio)
    # Voice begins at frame 50; 250 ms pre-roll rounds to 12 frames -> frame 38.
    assert events == [
        SpeechStart(38 * 320),
        Pause(int(3.2 * SR)),
        SpeechEnd(int(3.2 * SR), "endpoint"),
    ]


@pytest.mark.parametrize("level", [0.003, 0.03, 0.3])
def test_white_noise_is_not_speech(level: float) -> None:
    rng = np.random.default_rng(1)
    noise = (rng.standard_normal(5 * SR) * level).astype(np.float32)
    assert run(Segmenter(SegmenterConfig(), WebrtcClassifier(2)), noise) == []


def test_silence_is_not_speech() -> None:
    assert run(Segmenter(), np.zeros(3 * SR, dtype=np.float32)) == []


def test_flatness_separates_noise_from_voice() -> None:
    rng = np.random.default_rng(2)
    noise = rng.standard_normal(FRAME_SAMPLES).astype(np.float32)
    assert spectral_flatness(noise) > 0.4
    assert spectral_flatness(synth_voice(0.02)) < 0.1


def test_short_blip_in_a_pause_does_not_resume_but_speech_does() -> None:
    blip = [("voice", 1.0), ("silence", 0.3), ("voice", 0.04), ("silence", 1.0)]
    events = run(Segmenter(SegmenterConfig(), EnergyClassifier()), scripted_audio(blip))
    assert [type(e) for e in events] == [SpeechStart, Pause, SpeechEnd]
    resumed = [("voice", 1.0), ("silence", 0.3), ("voice", 0.5), ("silence", 1.0)]
    events = run(Segmenter(SegmenterConfig(), EnergyClassifier()), scripted_audio(resumed))
    assert [type(e) for e in events] == [SpeechStart, Pause, Resume, Pause, SpeechEnd]
    end = events[-1]
    assert isinstance(end, SpeechEnd) and end.end == int((1.0 + 0.3 + 0.5 + 0.2) * SR)


def test_next_utterance_never_starts_before_the_previous_end() -> None:
    # A gap shorter than tail + pre-roll: the pre-roll is clipped at the previous end.
    audio = scripted_audio([("voice", 1.0), ("silence", 0.6), ("voice", 1.0), ("silence", 1.0)])
    cfg = SegmenterConfig(preroll_ms=600)
    events = run(Segmenter(cfg, EnergyClassifier()), audio)
    starts = [e.start for e in events if isinstance(e, SpeechStart)]
    ends = [e.end for e in events if isinstance(e, SpeechEnd)]
    assert len(starts) == 2 and starts[1] == ends[0]


def test_max_length_cuts_at_the_quietest_point_and_continues() -> None:
    cfg = SegmenterConfig(max_utterance_s=10.0, cut_search_s=3.0)
    voice = synth_voice(25.0)
    # A quiet (but still voiced) dip at 8.5 s: the quietest frame within [7, 10) s.
    dip = slice(int(8.5 * SR), int(8.5 * SR) + 320)
    voice[dip] *= 0.2
    events = run(Segmenter(cfg, EnergyClassifier(0.005)), voice)
    ends = [e for e in events if isinstance(e, SpeechEnd)]
    starts = [e for e in events if isinstance(e, SpeechStart)]
    assert ends[0].reason == "max_length"
    assert ends[0].end == int(8.5 * SR)
    # Contiguous: every cut opens the next utterance exactly there; the last ends at stop.
    assert [s.start for s in starts[1:]] == [e.end for e in ends[:-1]]
    assert ends[-1].reason == "stop" and ends[-1].end == len(voice)
    assert all(e.end - s.start <= 10 * SR for s, e in zip(starts, ends, strict=True))


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=5000), min_size=1, max_size=40))
def test_chunking_does_not_change_decisions(sizes: list[int]) -> None:
    audio = scripted_audio(
        [("silence", 0.5), ("voice", 1.3), ("silence", 0.35), ("voice", 0.7), ("silence", 0.9)]
    )
    reference = run(Segmenter(SegmenterConfig(), EnergyClassifier()), audio)
    seg = Segmenter(SegmenterConfig(), EnergyClassifier())
    events: list[object] = []
    pos, i = 0, 0
    while pos < len(audio):
        n = sizes[i % len(sizes)]
        events += seg.feed(audio[pos : pos + n])
        pos += n
        i += 1
    events += seg.stop()
    assert events == reference


def test_finalize_closes_the_open_utterance_at_the_current_position() -> None:
    seg = Segmenter(SegmenterConfig(), EnergyClassifier())
    events = seg.feed(scripted_audio([("voice", 1.0)]))
    assert [type(e) for e in events] == [SpeechStart]
    assert seg.finalize() == [SpeechEnd(SR, "finalize")]
    assert seg.finalize() == []


def test_stop_counts_a_trailing_partial_frame() -> None:
    seg = Segmenter(SegmenterConfig(), EnergyClassifier())
    seg.feed(synth_voice(1.1)[:16100])
    assert seg.stop() == [SpeechEnd(16100, "stop")]
    assert seg.feed(synth_voice(1.0)) == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {"aggressiveness": 4},
        {"onset_ms": 0},
        {"endpoint_silence_ms": 10},
        {"preroll_ms": -1},
        {"max_utterance_s": 31.0},
        {"tail_ms": 900},
    ],
)
def test_bad_config_is_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        SegmenterConfig(**kwargs)


def test_synthesized_speech_is_found(espeak: Callable[..., np.ndarray]) -> None:
    speech = espeak("the quick brown fox jumps over the lazy dog")
    silence = np.zeros(SR, dtype=np.float32)
    audio = np.concatenate([silence, speech, silence, speech, silence])
    events = run(Segmenter(SegmenterConfig(), WebrtcClassifier(2)), audio)
    ends = [e for e in events if isinstance(e, SpeechEnd)]
    assert len(ends) == 2 and all(e.reason == "endpoint" for e in ends)


def test_the_hush_comes_before_the_pause_and_speech_back_in_it_says_resume() -> None:
    seg = Segmenter(SegmenterConfig(hush_ms=60), EnergyClassifier())
    voice_end = int(2.0 * SR)
    events = run(seg, scripted_audio([("silence", 1.0), ("voice", 1.0)]), stop=False)
    assert seg.hush_end is None
    quiet = np.zeros(2 * FRAME_SAMPLES, np.float32)
    events += seg.feed(quiet)
    assert seg.hush_end is None  # 40 ms of silence: not yet
    events += seg.feed(quiet[:FRAME_SAMPLES])
    # 60 ms: the end the endpoint would give (200 ms of tail), though not heard yet.
    assert seg.hush_end == voice_end + 200 * 16 and not seg.paused
    events += seg.feed(scripted_audio([("voice", 0.1)]))
    assert seg.hush_end is None and events[-1] == Resume()
    assert [type(e) for e in events] == [SpeechStart, Resume]


def test_a_hush_as_long_as_the_tail_is_the_pause() -> None:
    audio = scripted_audio([("silence", 1.0), ("voice", 1.0), ("silence", 0.3), ("voice", 1.0)])
    events = run(Segmenter(SegmenterConfig(), EnergyClassifier()), audio, stop=False)
    # The default hush is the pause: one Resume, from the pause, as before hushes existed.
    assert [type(e) for e in events] == [SpeechStart, Pause, Resume]
