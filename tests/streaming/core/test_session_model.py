"""The session with the real tiny.en model: live finals as accurate as offline decoding, and
no words from noise or tones."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from kettle.streaming.core.events import Event, Final
from kettle.streaming.core.session import Session, SessionConfig
from kettle.transcribe.audio.read import load_audio
from kettle.transcribe.types import SAMPLE_RATE

pytestmark = pytest.mark.slow

SR = SAMPLE_RATE
CATEGORIES = ("fleurs", "arctic_accent", "vctk_accent", "librivox", "librispeech", "ljspeech")


def stream_events(decoder: Any, audio: np.ndarray, config: SessionConfig) -> list[Event]:
    """Play audio into a session in 20 ms chunks, decoding each request at once (the decodes
    happen at the audio positions a real-time stream would have them at); every event."""
    session = Session(config, session_id="m")
    events: list[Event] = []

    def settle() -> None:
        while requests := session.poll_requests():
            for result in decoder.decode_batch(requests):
                session.on_result(result)
        events.extend(session.poll_events())

    for i in range(0, len(audio), 320):
        session.feed_audio(audio[i : i + 320])
        settle()
    session.stop()
    settle()
    return events


def stream_finals(decoder: Any, audio: np.ndarray, config: SessionConfig) -> list[Final]:
    return [e for e in stream_events(decoder, audio, config) if isinstance(e, Final)]


@pytest.fixture(scope="module")
def conversation(eval_clips: list[Any]) -> tuple[np.ndarray, str]:
    """One clip of each of several voices, joined with 0.7-1.5 s of silence."""
    chosen = []
    for category in CATEGORIES:
        chosen += [c for c in eval_clips if c.category == category and 2 <= c.duration_s <= 9][:1]
    gaps = [0.7, 1.5, 1.0, 1.2, 0.8, 1.4]
    parts = [np.zeros(SR // 2, np.float32)]
    for clip, gap in zip(chosen, gaps, strict=False):
        parts += [load_audio(clip.path), np.zeros(int(gap * SR), np.float32)]
    return np.concatenate(parts), " ".join(c.reference for c in chosen)


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
