"""A fake model that notices damaged audio: its words are pure tones it checks sample by sample.

``FakeDecoder`` hears a word in any 0.5 s of loud audio, so audio that arrives byte-shifted,
with samples dropped or doubled, or mixed with something else still "has words". Here each
word of ``fake.WORDS`` is a tone of its own frequency (``tone_speech`` writes them), and a
word is heard only where the window holds an unbroken run of that tone:

- every 20 ms frame of the run fits one sine at the word's frequency and amplitude, with a
  residual under ``RESIDUAL`` of the frame's energy (byte-shifted 16-bit PCM is broadband
  noise; a sample dropped inside a frame leaves a phase step the fit cannot follow);
- the run's frames all have the same phase (each frequency is a whole number of cycles per
  frame, so an unbroken tone has one phase on any frame grid): a sample dropped or doubled
  between two frames shifts the phase of every frame after it;
- the run is long enough (``MIN_FRAMES``): a word cut in two is heard in neither half.

So a test that sends known words and reads them back knows the audio reached the model
sample-exact (up to a resampler's and 16-bit rounding's error, far below the checks).
Everything else (context, prefix, refinement spelling, delays, failures) is FakeDecoder's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from kettle.transcribe.model.fake import WORDS, FakeDecoder
from kettle.transcribe.types import SAMPLE_RATE

FRAME = SAMPLE_RATE // 50  # 20 ms
AMPLITUDE = 0.3
WORD_S = 0.5  # each word's tone, fades included
GAP_S = 0.1  # silence between words
FADE_S = 0.02
BASE_HZ, STEP_HZ = 400, 100  # word k is BASE_HZ + k * STEP_HZ: 8 + 2k cycles per frame
RESIDUAL = 2e-3  # of a frame's energy: 16-bit rounding is ~1e-8, a dropped sample ~1e-2
PHASE_TOLERANCE = np.deg2rad(4.0)  # one sample shifts the phase by 9 degrees or more
AMPLITUDE_TOLERANCE = 0.03  # relative
MIN_FRAMES = 22  # of the 25 a word spans, less its two fade frames and one of grid offset

_FREQS = np.array([BASE_HZ + STEP_HZ * k for k in range(len(WORDS))], dtype=np.float64)
_T = np.arange(FRAME) / SAMPLE_RATE
# Least-squares fit of a cos/sin pair per frequency: each pair is orthogonal over a frame
# (whole cycles), so the coefficients are plain projections.
_BASIS = np.concatenate(
    [np.cos(2 * np.pi * _FREQS[:, None] * _T), np.sin(2 * np.pi * _FREQS[:, None] * _T)]
).T  # (FRAME, 2 * words)
_NORM = FRAME / 2.0


def frequency_of(word: str) -> float:
    return float(_FREQS[WORDS.index(word)])


def tone_speech(words: Sequence[str], *, gap_s: float = GAP_S) -> np.ndarray:
    """``words`` as tones, each WORD_S long with FADE_S fades, ``gap_s`` of silence after each."""
    n = round(WORD_S * SAMPLE_RATE)
    t = np.arange(n) / SAMPLE_RATE
    fade = round(FADE_S * SAMPLE_RATE)
    envelope = np.ones(n)
    ramp = 0.5 - 0.5 * np.cos(np.pi * np.arange(fade) / fade)
    envelope[:fade], envelope[-fade:] = ramp, ramp[::-1]
    gap = np.zeros(round(gap_s * SAMPLE_RATE))
    parts = []
    for word in words:
        parts += [AMPLITUDE * envelope * np.sin(2 * np.pi * frequency_of(word) * t), gap]
    return np.concatenate(parts).astype(np.float32) if parts else np.zeros(0, np.float32)


def frame_words(audio: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per 20 ms frame of ``audio``: the index of the word whose tone it holds cleanly
    (-1: none) and that tone's phase."""
    n = len(audio) // FRAME
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    frames = np.asarray(audio[: n * FRAME], dtype=np.float64).reshape(n, FRAME)
    coef = frames @ _BASIS / _NORM  # (n, 2 * words)
    k = len(WORDS)
    amp2 = coef[:, :k] ** 2 + coef[:, k:] ** 2
    best = np.argmax(amp2, axis=1)
    rows = np.arange(n)
    amplitude = np.sqrt(amp2[rows, best])
    energy = np.sum(frames * frames, axis=1)
    explained = amp2[rows, best] * _NORM
    residual = np.maximum(energy - explained, 0.0) / np.maximum(energy, 1e-12)
    clean = (residual < RESIDUAL) & (
        np.abs(amplitude - AMPLITUDE) <= AMPLITUDE_TOLERANCE * AMPLITUDE
    )
    phase = np.arctan2(coef[rows, k + best], coef[rows, best])
    return np.where(clean, best, -1), phase


def heard_words(audio: np.ndarray) -> list[tuple[str, float, float]]:
    """The words ``audio`` holds unbroken, as (word, start s, end s)."""
    which, phase = frame_words(audio)
    out: list[tuple[str, float, float]] = []
    i, n = 0, len(which)
    while i < n:
        if which[i] < 0:
            i += 1
            continue
        j = i + 1
        while (
            j < n
            and which[j] == which[i]
            and abs(np.angle(np.exp(1j * (phase[j] - phase[i])))) <= PHASE_TOLERANCE
        ):
            j += 1
        if j - i >= MIN_FRAMES:
            out.append((WORDS[int(which[i])], i * FRAME / SAMPLE_RATE, j * FRAME / SAMPLE_RATE))
        i = j
    return out


class ToneDecoder(FakeDecoder):
    """FakeDecoder whose words are ``tone_speech``'s, heard only where they arrive unbroken."""

    def words_for(self, audio: np.ndarray) -> list[tuple[str, float, float]]:
        return heard_words(audio)
