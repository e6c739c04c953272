"""Sample-rate conversion to 16 kHz, wrapping python-soxr (no filter of our own).

soxr's streaming resampler gives bit-identical output however the input is chunked, so a
stream resampled piecewise equals the one-shot `resample` of the whole signal.
"""

from __future__ import annotations

import numpy as np
import soxr

__all__ = ["MAX_RATE", "MIN_RATE", "StreamResampler", "resample"]

MIN_RATE = 1000
MAX_RATE = 384000
_QUALITY = "HQ"


def _check_rate(rate: object, name: str) -> int:
    if not isinstance(rate, (int, np.integer)) or isinstance(rate, bool):
        raise ValueError(f"{name} must be an integer number of Hz, got {rate!r}")
    if not MIN_RATE <= rate <= MAX_RATE:
        raise ValueError(f"{name} must be in {MIN_RATE}..{MAX_RATE} Hz, got {rate}")
    return int(rate)


def _check_signal(x: object) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        raise ValueError(f"audio must be a numpy array, got {type(x).__name__}")
    if x.ndim != 1:
        raise ValueError(f"audio must be 1-D (mono), got shape {x.shape}")
    if not (np.issubdtype(x.dtype, np.floating) or np.issubdtype(x.dtype, np.integer)):
        raise ValueError(f"audio must hold real numbers, got dtype {x.dtype}")
    return np.ascontiguousarray(x, dtype=np.float32)


def resample(x: np.ndarray, in_rate: int, out_rate: int = 16000) -> np.ndarray:
    """Resample 1-D audio from `in_rate` to `out_rate` (float32 out; a copy when rates match)."""
    in_hz = _check_rate(in_rate, "in_rate")
    out_hz = _check_rate(out_rate, "out_rate")
    signal = _check_signal(x)
    if in_hz == out_hz:
        return signal.copy()
    if signal.shape[0] == 0:
        return np.zeros(0, dtype=np.float32)
    return np.asarray(soxr.resample(signal, in_hz, out_hz, quality=_QUALITY), dtype=np.float32)


class StreamResampler:
    """Streaming resampler keeping filter history across `process` calls.

    `process` returns what the filter can emit so far (soxr holds back its delay); `flush`
    returns the tail at the end of the stream and makes the resampler ready for a new stream.
    Concatenating every output plus `flush()` equals ``resample(whole_input, ...)``.
    """

    def __init__(self, in_rate: int, out_rate: int = 16000) -> None:
        self._in_rate = _check_rate(in_rate, "in_rate")
        self._out_rate = _check_rate(out_rate, "out_rate")
        self._passthrough = self._in_rate == self._out_rate
        self._stream = (
            None
            if self._passthrough
            else soxr.ResampleStream(
                self._in_rate, self._out_rate, 1, dtype="float32", quality=_QUALITY
            )
        )
        self._fed = False

    @property
    def in_rate(self) -> int:
        return self._in_rate

    @property
    def out_rate(self) -> int:
        return self._out_rate

    def process(self, x: np.ndarray) -> np.ndarray:
        """Feed input samples; return the float32 output samples ready now."""
        signal = _check_signal(x)
        if self._stream is None:
            return signal.copy()
        if signal.shape[0] == 0:
            return np.zeros(0, dtype=np.float32)
        self._fed = True
        return np.asarray(self._stream.resample_chunk(signal, last=False), dtype=np.float32)

    def flush(self) -> np.ndarray:
        """Drain the filter's tail (end of stream) and reset for a new stream."""
        if self._stream is None or not self._fed:
            return np.zeros(0, dtype=np.float32)
        tail = np.asarray(
            self._stream.resample_chunk(np.zeros(0, dtype=np.float32), last=True),
            dtype=np.float32,
        )
        self._stream.clear()
        self._fed = False
        return tail
