"""The session with the real tiny.en model: live finals as accurate as offline decoding, and
no words from noise or tones."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from kettle.streaming.core.events import Final
from kettle.streaming.core.session import SessionConfig
from kettle.transcribe.types import SAMPLE_RATE

from tests.streaming.core.conftest import stream_events

pytestmark = pytest.mark.slow

SR = SAMPLE_RATE


def stream_finals(decoder: Any, audio: np.ndarray, config: SessionConfig) -> list[Final]:
    return [e for e in stream_events(decoder, audio, config) if isinstance(e, Final)]


def test_streaming_finals_are_within_1_5_points_of_offline_decoding(
    tiny_decoder: Any,
    conversation: tuple[np.ndarray, str],
    wer_fn: Callable[[list[str], list[str]], float],
) -> None:
    from kettle.transcribe.model import fw

    audio, reference = conversation
    finals = stream_finals(tiny_decoder, audio, SessionConfig(word_timestamps=True))
    live = " ".join(f.text for f in finals)
    model = fw.load_whisper(str(tiny_decoder.path), device="cpu", compute_type="int8", threads=2)
    segments, _ = model.transcribe(audio, beam_size=5)
    offline = " ".join(s.text.strip() for s in segments)
    live_wer, offline_wer = wer_fn([reference], [live]), wer_fn([reference], [offline])
    assert live_wer <= offline_wer + 0.015, (live, offline)
    assert [f.utterance for f in finals] == list(range(len(finals)))
    for a, b in itertools.pairwise(finals):
        assert a.end <= b.start
    for f in finals:  # absolute word times inside each utterance's window
        assert f.words and f.start / SR - 0.1 <= f.words[0].start
        assert f.words[-1].end <= f.end / SR + 0.5


def _non_speech(seconds: float) -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    n = int(seconds * SR)
    t = np.arange(n) / SR
    white = rng.standard_normal(n)
    spectrum = np.fft.rfft(rng.standard_normal(n))
    f = np.arange(spectrum.shape[0], dtype=np.float64)
    f[0] = 1.0
    pink = np.fft.irfft(spectrum / np.sqrt(f), n)
    tone = np.sin(2 * np.pi * 440 * t)
    chord = np.sin(2 * np.pi * np.outer((261.6, 329.6, 392.0), t)).sum(axis=0)
    out = []
    for x, level in ((white, 0.3), (pink, 0.3), (tone, 0.3), (chord, 0.2), (0 * t, 0.0)):
        peak = float(np.max(np.abs(x))) or 1.0
        out.append((level * x / peak).astype(np.float32))
    return out


def test_noise_and_tones_give_no_words(tiny_decoder: Any) -> None:
    for audio in _non_speech(8.0):
        assert stream_finals(tiny_decoder, audio, SessionConfig()) == []
