"""torch backend of ``log_mel_batch`` (``torch.stft``, CPU or CUDA). Imported lazily only.

Same featurization as the numpy path (see ``logmel``'s docstring): each window is zero-extended
by 160 samples and reflect-padded by 200 on each side on the host (cheap, and it reproduces
numpy's reflect semantics for very short windows), the padded windows are stacked with zeros
to a common length, and one batched ``torch.stft(center=False)`` runs on the device. Frames past
a window's own end are masked out of its maximum and zeroed, as ``pad_or_trim`` would.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import torch

from .melfilters import HOP_LENGTH, N_FFT, hann_window

_CENTER = N_FFT // 2
_MODEL_PADDING = HOP_LENGTH


def cuda_available() -> bool:
    return bool(torch.cuda.is_available())


@lru_cache(maxsize=16)
def _constants(filters_key: bytes, n_mels: int, device: str) -> tuple[Any, Any]:
    filters = np.frombuffer(filters_key, dtype=np.float32).reshape(n_mels, -1)
    dev = torch.device(device)
    return (
        torch.from_numpy(hann_window().copy()).to(dev),
        torch.from_numpy(filters.copy()).to(dev),
    )


def log_mel_batch_torch(
    windows: Sequence[np.ndarray], filters: np.ndarray, n_frames: int, device: str
) -> np.ndarray:
    """(B, n_mels, n_frames) float32; `windows` are validated 1-D float32 arrays."""
    n_mels = filters.shape[0]
    batch = len(windows)
    out = np.zeros((batch, n_mels, n_frames), dtype=np.float32)
    if batch == 0:
        return out
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} requested but torch has no CUDA here")
    # Frames before faster-whisper drops the last STFT frame, per window.
    counts = [(w.shape[0] + _MODEL_PADDING) // HOP_LENGTH for w in windows]
    stft_frames = max(counts)
    # Every signal is padded to the same length; surplus frames are masked below.
    length = (stft_frames - 1) * HOP_LENGTH + N_FFT
    host = np.zeros((batch, length), dtype=np.float32)
    for i, w in enumerate(windows):
        padded = np.pad(np.pad(w, (0, _MODEL_PADDING)), (_CENTER, _CENTER), mode="reflect")
        take = min(padded.shape[0], length)
        host[i, :take] = padded[:take]
    window, mel_filters = _constants(filters.tobytes(), n_mels, device)
    dev = window.device
    with torch.inference_mode():
        signal = torch.from_numpy(host).to(dev, non_blocking=True)
        spec = torch.stft(
            signal,
            N_FFT,
            HOP_LENGTH,
            window=window,
            center=False,
            return_complex=True,
        )  # (B, 201, stft_frames)
        power = spec.real.square() + spec.imag.square()
        mel = torch.matmul(mel_filters, power)  # (B, n_mels, stft_frames)
        log_spec = torch.log10(torch.clamp(mel, min=1e-10))
        frame_idx = torch.arange(stft_frames, device=dev)
        valid = frame_idx[None, :] < torch.tensor(counts, device=dev)[:, None]  # (B, T)
        masked = torch.where(valid[:, None, :], log_spec, torch.full_like(log_spec, -torch.inf))
        maximum = masked.amax(dim=(1, 2), keepdim=True)
        log_spec = torch.maximum(log_spec, maximum - 8.0)
        log_spec = (log_spec + 4.0) / 4.0
        # The model drops each window's last frame; beyond that, zeros (pad_or_trim).
        keep = frame_idx[None, :] < (torch.tensor(counts, device=dev) - 1)[:, None]
        log_spec = torch.where(keep[:, None, :], log_spec, torch.zeros_like(log_spec))
        take = min(n_frames, stft_frames)
        out[:, :, :take] = log_spec[:, :, :take].float().cpu().numpy()
    return out
