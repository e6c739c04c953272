"""Whisper's STFT window and Slaney-style mel filterbank, computed here (no faster-whisper import).

The filterbank is librosa's ``filters.mel(sr=16000, n_fft=400, n_mels=N, htk=False,
norm="slaney")``, which is what Whisper and faster-whisper use; tests compare it to
faster-whisper's own copy.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

SAMPLE_RATE = 16000
N_FFT = 400
HOP_LENGTH = 160
N_FREQS = N_FFT // 2 + 1

# Slaney mel scale: linear below 1 kHz, logarithmic above.
_F_SP = 200.0 / 3.0
_MIN_LOG_HZ = 1000.0
_MIN_LOG_MEL = _MIN_LOG_HZ / _F_SP
_LOGSTEP = np.log(6.4) / 27.0


def hz_to_mel(hz: float) -> float:
    """Slaney mel of a frequency in Hz."""
    if hz < _MIN_LOG_HZ:
        return hz / _F_SP
    return float(_MIN_LOG_MEL + np.log(hz / _MIN_LOG_HZ) / _LOGSTEP)


def _mel_to_hz(mels: np.ndarray) -> np.ndarray:
    freqs = _F_SP * mels
    log_region = mels >= _MIN_LOG_MEL
    freqs[log_region] = _MIN_LOG_HZ * np.exp(_LOGSTEP * (mels[log_region] - _MIN_LOG_MEL))
    return freqs


@lru_cache(maxsize=8)
def _mel_filters(n_mels: int) -> np.ndarray:
    fft_freqs = np.fft.rfftfreq(n=N_FFT, d=1.0 / SAMPLE_RATE)
    mels = np.linspace(0.0, hz_to_mel(SAMPLE_RATE / 2), n_mels + 2)
    band_edges = _mel_to_hz(mels)
    widths = np.diff(band_edges)
    ramps = band_edges[:, None] - fft_freqs[None, :]
    lower = -ramps[:-2] / widths[:-1, None]
    upper = ramps[2:] / widths[1:, None]
    weights = np.maximum(0.0, np.minimum(lower, upper))
    # Slaney normalisation: roughly constant energy per band.
    weights *= (2.0 / (band_edges[2 : n_mels + 2] - band_edges[:n_mels]))[:, None]
    out = weights.astype(np.float32)
    out.setflags(write=False)
    return out


def mel_filters(n_mels: int = 80) -> np.ndarray:
    """(n_mels, 201) float32 filterbank for 16 kHz audio and a 400-point FFT (read-only)."""
    if not isinstance(n_mels, int) or isinstance(n_mels, bool) or not 1 <= n_mels <= 256:
        raise ValueError(f"n_mels must be an integer in 1..256, got {n_mels!r}")
    return _mel_filters(n_mels)


@lru_cache(maxsize=1)
def _hann() -> np.ndarray:
    # Periodic Hann of 400 points, built the way faster-whisper builds it (float64 then float32).
    window = np.hanning(N_FFT + 1)[:-1].astype(np.float32)
    window.setflags(write=False)
    return window


def hann_window() -> np.ndarray:
    """Periodic 400-point Hann window, float32, read-only."""
    return _hann()
