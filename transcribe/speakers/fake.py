"""A stand-in speaker encoder for tests and ``kettle serve --fake-model``: the voice is its pitch.

``PitchSpeakerEncoder`` finds the strongest spectral peak between 70 and 400 Hz (the f0 of
``fake.synth_voice``) and returns a unit vector with a narrow bump at that pitch, so two clips
of one f0 have similarity 1 and clips 20 Hz or more apart have similarity near 0.
"""

from __future__ import annotations

import numpy as np
from kettle.transcribe.speakers.encoder import EMBEDDING_SIZE
from kettle.transcribe.types import SAMPLE_RATE

LOW_HZ, HIGH_HZ = 70.0, 400.0
HZ_PER_DIM = 2.0  # the bump's position: (f0 - LOW_HZ) / HZ_PER_DIM
WIDTH = 2.0  # dims: a 10 Hz difference is 2.5 widths apart


class PitchSpeakerEncoder:
    def __init__(self) -> None:
        self.calls = 0

    def embed(self, audio: np.ndarray) -> np.ndarray:
        self.calls += 1
        f0 = pitch_hz(audio)
        dims = np.arange(EMBEDDING_SIZE, dtype=np.float64)
        centre = 0.0 if f0 is None else (f0 - LOW_HZ) / HZ_PER_DIM
        bump = np.exp(-0.5 * ((dims - centre) / WIDTH) ** 2)
        return (bump / np.linalg.norm(bump)).astype(np.float32)


def pitch_hz(audio: np.ndarray) -> float | None:
    if len(audio) < SAMPLE_RATE // 10:
        return None
    spectrum = np.abs(np.fft.rfft(audio.astype(np.float64)))
    freqs = np.fft.rfftfreq(len(audio), 1.0 / SAMPLE_RATE)
    band = (freqs >= LOW_HZ) & (freqs <= HIGH_HZ)
    if not band.any() or spectrum[band].max() <= 0:
        return None
    return float(freqs[band][np.argmax(spectrum[band])])
