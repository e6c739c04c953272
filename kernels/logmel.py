"""Whisper log-mel features: one-shot, batched (numpy or torch) and incremental for streams.

Conventions (faster-whisper 1.2.1, ``feature_extractor.py`` and ``transcribe.py``):

- ``log_mel(audio, padding)`` is ``FeatureExtractor(feature_size=n_mels)(audio, padding=padding)``:
  append ``padding`` zeros, reflect-pad 200 samples on each side (``center=True``), 400-point
  STFT with a periodic Hann window and hop 160, drop the LAST STFT frame, power spectrum, mel
  filterbank, ``log10(max(mel, 1e-10))``, clamp at ``max - 8`` (max over every frame of this
  call), then ``(x + 4) / 4``.
- The *model featurization* of one window of at most 30 s (``log_mel_batch`` and
  ``IncrementalLogMel``) is what faster-whisper feeds the encoder for one chunk:
  ``pad_or_trim(feature_extractor(chunk)[..., :-1], n_frames)``, i.e. ``log_mel(chunk, 160)``
  with its last frame dropped (the maximum still includes that frame), then cut to ``n_frames``
  or padded with zeros (zeros after normalisation, as ``pad_or_trim`` does).
  ``BatchedInferencePipeline`` does exactly this per chunk; ``WhisperModel.generate_segments``
  does the same for audio up to 30 s (it featurizes the whole file, uses ``content_frames =
  n - 1`` frames and pads each segment with ``pad_or_trim``). A window of L samples yields
  ``L // 160`` frames before padding.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from .melfilters import HOP_LENGTH, N_FFT, N_FREQS, hann_window, mel_filters

logger = logging.getLogger(__name__)

__all__ = ["BACKENDS", "IncrementalLogMel", "log_mel", "log_mel_batch"]

BACKENDS = ("auto", "numpy", "torch")
_CENTER = N_FFT // 2  # reflect padding on each side (torch.stft/librosa center=True)
_MODEL_PADDING = HOP_LENGTH  # faster-whisper's default `padding` for model features
_LOG_FLOOR = 1e-10
# The mel projection runs in blocks small enough that OpenBLAS (numpy's wheel BLAS) stays on
# the calling thread: it goes multi-threaded above m*n*k = 4 * 65536, and on a busy machine
# (the model's own threads) a threaded product waits milliseconds for a core. Measured on 2
# shared cores: 8 ms instead of 0.05 ms per incremental step, 12-16 ms instead of 1.6 ms for a
# 30 s window. Other BLAS builds just see a few more small calls.
_BLAS_SINGLE_THREAD_MNK = 4 * 65536
_DYNAMIC_RANGE = 8.0


def _check_audio(audio: object, name: str = "audio") -> np.ndarray:
    """Return `audio` as a 1-D float32 array, or raise ValueError with a clear reason."""
    if not isinstance(audio, np.ndarray):
        raise ValueError(f"{name} must be a numpy array, got {type(audio).__name__}")
    if audio.ndim != 1:
        raise ValueError(f"{name} must be 1-D (mono samples), got shape {audio.shape}")
    if not (np.issubdtype(audio.dtype, np.floating) or np.issubdtype(audio.dtype, np.integer)):
        raise ValueError(f"{name} must hold real numbers, got dtype {audio.dtype}")
    out = np.ascontiguousarray(audio, dtype=np.float32)
    if out.size and not np.isfinite(out).all():
        raise ValueError(f"{name} contains NaN or infinite samples")
    return out


def _check_n_frames(n_frames: object) -> int:
    if not isinstance(n_frames, (int, np.integer)) or isinstance(n_frames, bool) or n_frames < 1:
        raise ValueError(f"n_frames must be a positive integer, got {n_frames!r}")
    return int(n_frames)


def _log_frames(padded: np.ndarray, n_frames: int, filters: np.ndarray) -> np.ndarray:
    """log10 mel power of the first `n_frames` STFT frames of an already centre-padded signal.

    Returns (n_mels, n_frames) float32, before the clamp and normalisation.
    """
    n_mels = filters.shape[0]
    if n_frames <= 0:
        return np.empty((n_mels, 0), dtype=np.float32)
    padded = np.ascontiguousarray(padded, dtype=np.float32)
    if padded.shape[0] < (n_frames - 1) * HOP_LENGTH + N_FFT:
        raise AssertionError("internal: padded signal too short for the requested frames")
    step = padded.strides[0]
    frames = np.lib.stride_tricks.as_strided(
        padded, (n_frames, N_FFT), (HOP_LENGTH * step, step), writeable=False
    )
    spectrum = np.fft.rfft(frames * hann_window(), axis=-1)  # complex64 (numpy >= 2)
    power = spectrum.real**2 + spectrum.imag**2  # (n_frames, 201) float32
    mel = np.empty((n_mels, n_frames), dtype=np.float32)
    block = max(1, _BLAS_SINGLE_THREAD_MNK // (n_mels * N_FREQS))
    for start in range(0, n_frames, block):
        stop = min(start + block, n_frames)
        np.matmul(filters, power[start:stop].T, out=mel[:, start:stop])
    np.maximum(mel, _LOG_FLOOR, out=mel)
    return np.log10(mel, out=mel).astype(np.float32, copy=False)


def _normalize_into(dst: np.ndarray, log_spec: np.ndarray, maximum: np.float32) -> None:
    """dst = (max(log_spec, maximum - 8) + 4) / 4, in float32 like faster-whisper."""
    np.maximum(log_spec, np.float32(maximum) - np.float32(_DYNAMIC_RANGE), out=dst)
    dst += np.float32(4.0)
    dst /= np.float32(4.0)


def _full_log(audio: np.ndarray, padding: int, filters: np.ndarray) -> np.ndarray:
    """Un-normalised log10 mel frames of faster-whisper's FeatureExtractor (last frame dropped)."""
    waveform = np.pad(audio, (0, padding)) if padding else audio
    if waveform.shape[0] == 0:
        raise ValueError("audio is empty and padding is 0: there is nothing to featurize")
    padded = np.pad(waveform, (_CENTER, _CENTER), mode="reflect")
    # STFT frames: 1 + len(waveform) // hop; faster-whisper drops the last one.
    return _log_frames(padded, waveform.shape[0] // HOP_LENGTH, filters)


def log_mel(audio: np.ndarray, n_mels: int = 80, padding: int = 160) -> np.ndarray:
    """(n_mels, n_frames) float32 log-mel, equal to faster-whisper's ``FeatureExtractor(audio)``.

    `audio` is 16 kHz mono; ``n_frames = (len(audio) + padding) // 160``.
    """
    filters = mel_filters(n_mels)
    samples = _check_audio(audio)
    if not isinstance(padding, (int, np.integer)) or isinstance(padding, bool) or padding < 0:
        raise ValueError(f"padding must be a non-negative integer, got {padding!r}")
    log_spec = _full_log(samples, int(padding), filters)
    out = np.empty_like(log_spec)
    if log_spec.shape[1]:
        _normalize_into(out, log_spec, log_spec.max())
    return out


def _model_features_into(dst: np.ndarray, samples: np.ndarray, filters: np.ndarray) -> None:
    """Write the model featurization of one window into zeroed `dst` (n_mels, n_frames)."""
    log_spec = _full_log(samples, _MODEL_PADDING, filters)
    keep = min(log_spec.shape[1] - 1, dst.shape[1])
    if keep > 0:
        _normalize_into(dst[:, :keep], log_spec[:, :keep], log_spec.max())


def _resolve_backend(backend: str, device: str) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if not isinstance(device, str) or not (
        device == "cpu" or device == "cuda" or device.startswith("cuda:")
    ):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}")
    on_cuda = device.startswith("cuda")
    if backend == "numpy":
        if on_cuda:
            raise ValueError("backend 'numpy' runs on the CPU only; use device='cpu'")
        return "numpy"
    if backend == "torch":
        _torch_backend()  # fails here, clearly, when torch is missing
        return "torch"
    if not on_cuda:
        return "numpy"
    module = _load_torch_backend()
    if module is not None and module.cuda_available():
        return "torch"
    global _warned_no_cuda
    if not _warned_no_cuda:
        _warned_no_cuda = True
        logger.warning("log_mel_batch: torch with CUDA is not available; using numpy on the CPU")
    return "numpy"


_warned_no_cuda = False


@lru_cache(maxsize=1)
def _load_torch_backend() -> Any | None:
    """The torch backend module, or None without torch (looked up once per process)."""
    try:
        from . import _torch_logmel
    except ImportError:
        return None
    return _torch_logmel


def _torch_backend() -> Any:
    module = _load_torch_backend()
    if module is None:
        raise ImportError(
            "log-mel backend 'torch' needs PyTorch (install the extra: pip install 'kettle[torch]')"
        )
    return module


def log_mel_batch(
    windows: Sequence[np.ndarray],
    n_mels: int = 80,
    n_frames: int = 3000,
    backend: str = "auto",
    device: str = "cpu",
) -> np.ndarray:
    """(B, n_mels, n_frames) float32 model features of each window (see the module docstring).

    Each window is 16 kHz mono float32, normally at most 30 s. `backend`: "numpy", "torch"
    (``torch.stft`` on `device`, which may be "cpu" or "cuda[:N]") or "auto" (torch when the
    device is CUDA and torch with CUDA is importable, else numpy). The numpy path never
    imports torch.
    """
    filters = mel_filters(n_mels)
    frames = _check_n_frames(n_frames)
    chosen = _resolve_backend(backend, device)
    if isinstance(windows, np.ndarray) and windows.ndim == 2:
        windows = list(windows)
    if not isinstance(windows, Sequence):
        raise ValueError("windows must be a sequence of 1-D numpy arrays")
    samples = [_check_audio(w, f"windows[{i}]") for i, w in enumerate(windows)]
    if chosen == "torch":
        return _torch_backend().log_mel_batch_torch(samples, filters, frames, device)
    out = np.zeros((len(samples), n_mels, frames), dtype=np.float32)
    for i, window in enumerate(samples):
        _model_features_into(out[i], window, filters)
    return out


class IncrementalLogMel:
    """Model features of a growing buffer, computing each STFT frame once.

    ``features(n)`` equals ``log_mel_batch([all samples so far], n_frames=n)[0]`` (``None`` = no
    pad/trim: ``n_samples // 160`` frames). STFT frame t reads samples ``[160t - 200, 160t + 200)``;
    once those lie inside the buffer (and frame 0's left reflection, samples 1..200, exists) the
    frame never changes and its log-mel column is cached. Only the two or three trailing frames
    that touch the end padding are recomputed per call. The clamp ``max - 8`` uses the maximum of
    the cached columns (a running maximum, which only grows) and the fresh trailing columns (which
    may shrink on the next call, so they never enter the running maximum).

    The buffer keeps every sample (the trailing frames need the last 360); call `reset` at each
    utterance boundary. Not thread-safe.
    """

    def __init__(self, n_mels: int = 80) -> None:
        self._filters = mel_filters(n_mels)
        self._n_mels = n_mels
        self.reset()

    @property
    def n_mels(self) -> int:
        return self._n_mels

    @property
    def n_samples(self) -> int:
        """Samples received since construction or the last reset."""
        return self._n

    @property
    def n_frames(self) -> int:
        """Frames ``features(None)`` returns: ``n_samples // 160``."""
        return self._n // HOP_LENGTH

    @property
    def audio(self) -> np.ndarray:
        """Read-only view of the samples so far."""
        view = self._audio[: self._n]
        view.flags.writeable = False
        return view

    def reset(self) -> None:
        """Forget all audio and cached frames."""
        self._audio = np.empty(16000, dtype=np.float32)
        self._n = 0
        self._log = np.empty((self._n_mels, 128), dtype=np.float32)
        self._n_stable = 0
        self._stable_max = np.float32(-np.inf)

    def extend(self, samples: np.ndarray) -> None:
        """Append new 16 kHz mono samples (converted to float32)."""
        new = _check_audio(samples, "samples")
        end = self._n + new.shape[0]
        if end > self._audio.shape[0]:
            grown = np.empty(max(end, 2 * self._audio.shape[0]), dtype=np.float32)
            grown[: self._n] = self._audio[: self._n]
            self._audio = grown
        self._audio[self._n : end] = new
        self._n = end

    @staticmethod
    def _stable_count(n: int) -> int:
        # Frame t is final once 160t + 200 <= n, and frame 0 needs sample 200 for its reflection.
        return 0 if n <= _CENTER else (n - _CENTER) // HOP_LENGTH + 1

    def _update_stable(self) -> None:
        target = self._stable_count(self._n)
        first = self._n_stable
        if target <= first:
            return
        x = self._audio
        stop = (target - 1) * HOP_LENGTH + _CENTER  # last sample (exclusive) the new frames read
        if first * HOP_LENGTH < _CENTER:
            # The first frames read the left reflection x[200], ..., x[1].
            head = np.concatenate([x[_CENTER:0:-1], x[:stop]])
            padded = head[first * HOP_LENGTH :]
        else:
            padded = x[first * HOP_LENGTH - _CENTER : stop]
        cols = _log_frames(padded, target - first, self._filters)
        if target > self._log.shape[1]:
            grown = np.empty((self._n_mels, max(target, 2 * self._log.shape[1])), np.float32)
            grown[:, :first] = self._log[:, :first]
            self._log = grown
        self._log[:, first:target] = cols
        self._stable_max = max(self._stable_max, cols.max())
        self._n_stable = target

    def _trailing(self) -> np.ndarray:
        """Un-normalised columns from the first non-final frame to the last kept frame."""
        n = self._n
        total = (n + _MODEL_PADDING) // HOP_LENGTH  # frames before the model's [..., :-1]
        first = self._n_stable
        # The segment starts 200 samples before frame `first`; the stable count guarantees
        # first >= 2 here, so it starts inside the buffer, and it is >= 400 samples long, so its
        # right reflection equals that of the whole zero-padded buffer.
        segment = np.concatenate(
            [self._audio[first * HOP_LENGTH - _CENTER : n], np.zeros(_MODEL_PADDING, np.float32)]
        )
        padded = np.pad(segment, (0, _CENTER), mode="reflect")
        return _log_frames(padded, total - first, self._filters)

    def features(self, n_frames: int | None = 3000) -> np.ndarray:
        """(n_mels, n_frames) float32 model features of all samples so far (see class doc)."""
        frames = None if n_frames is None else _check_n_frames(n_frames)
        n_out = self._n // HOP_LENGTH if frames is None else frames
        out = np.zeros((self._n_mels, n_out), dtype=np.float32)
        if self._n < 2 * HOP_LENGTH + _CENTER:
            # Too short for any cached frame to be final: featurize the whole (tiny) buffer.
            _model_features_into(out, self._audio[: self._n], self._filters)
            return out
        self._update_stable()
        stable = self._n_stable
        tail = self._trailing()
        maximum = max(self._stable_max, tail.max())
        keep = min(self._n // HOP_LENGTH, n_out)  # the model drops the last frame
        head = min(stable, keep)
        if head:
            _normalize_into(out[:, :head], self._log[:, :head], maximum)
        if keep > stable:
            _normalize_into(out[:, stable:keep], tail[:, : keep - stable], maximum)
        return out
