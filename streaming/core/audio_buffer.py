"""The stream's recent audio by absolute sample position, and the check of fed samples."""

from __future__ import annotations

import numpy as np
from kettle.streaming.core.vad import FRAME_SAMPLES
from kettle.transcribe.errors import AudioError
from kettle.transcribe.types import SAMPLE_RATE


class AudioBuffer:
    """The stream's recent audio, addressed by absolute sample position; amortised growth."""

    def __init__(self) -> None:
        self._data = np.zeros(SAMPLE_RATE, dtype=np.float32)
        self._len = 0
        self._start = 0  # absolute position of _data[0]

    def append(self, audio: np.ndarray) -> None:
        need = self._len + len(audio)
        if need > len(self._data):
            grown = np.zeros(max(need, 2 * len(self._data)), dtype=np.float32)
            grown[: self._len] = self._data[: self._len]
            self._data = grown
        self._data[self._len : need] = audio
        self._len = need

    def slice(self, start: int, end: int) -> np.ndarray:
        if start < self._start or end > self._start + self._len:
            raise AssertionError(f"audio [{start}, {end}) is no longer buffered")
        return self._data[start - self._start : end - self._start].copy()

    def trim(self, keep_from: int) -> None:
        drop = keep_from - self._start
        # Move data only once a good share is garbage, so trimming stays O(1) amortised.
        if drop > 0 and drop >= max(self._len // 2, 16 * FRAME_SAMPLES):
            self._data[: self._len - drop] = self._data[drop : self._len]
            self._len -= drop
            self._start = keep_from


def as_mono_float32(samples: np.ndarray) -> np.ndarray:
    """1-D float32 samples; NaN and infinities replaced (AudioError if not mono numeric)."""
    arr = np.asarray(samples)
    if arr.ndim != 1:
        raise AudioError(f"audio must be a 1-D array of mono samples, not shape {arr.shape}")
    if arr.dtype.kind not in "fiu":
        raise AudioError(f"audio must be numeric, not {arr.dtype}")
    out = arr.astype(np.float32, copy=False)
    if not np.all(np.isfinite(out)):
        out = np.nan_to_num(out, nan=0.0, posinf=1.0, neginf=-1.0)
    return out
