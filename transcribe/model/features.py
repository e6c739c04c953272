"""Log-mel features for the encoder: batched for windows, incremental for growing stream windows.

Uses ``kettle.kernels.logmel`` (batched numpy/torch STFT and an incremental per-stream state).
When that module cannot be imported, faster-whisper's FeatureExtractor gives the same
featurization (``pad_or_trim(fe(window)[..., :-1])``), one window at a time.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

N_FRAMES = 3000
# Samples compared at the head and at the old end when checking that a stream window extends
# the previous one: cheap, and a new utterance or a shifted window differs there.
_CHECK = 256
# Stream states kept (LRU); each holds its utterance's samples and frames, ~3 MB at 30 s.
MAX_STREAMS = 64


@dataclass
class _StreamState:
    mel: Any  # kernels.logmel.IncrementalLogMel
    head: np.ndarray
    tail: np.ndarray
    n_samples: int


def _kernels() -> Any | None:
    try:
        from kettle.kernels import logmel
    except ImportError:
        return None
    if not hasattr(logmel, "log_mel_batch"):
        return None
    return logmel


def _torch_cuda() -> bool:
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return False
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


class FeatureComputer:
    """Model features of 16 kHz float32 windows, shape (B, n_mels, n_frames): the window,
    then silence up to ``n_frames`` (3000: Whisper's 30 s)."""

    def __init__(self, n_mels: int, *, device: str = "cpu", max_streams: int = MAX_STREAMS) -> None:
        self._n_mels = n_mels
        # GPU features need torch with CUDA; decided once, not warned about on every batch.
        self._device = "cuda" if device == "cuda" and _torch_cuda() else "cpu"
        self._max_streams = max_streams
        self._streams: OrderedDict[Hashable, _StreamState] = OrderedDict()
        self._kernels = _kernels()
        self._fallback: Any = None
        self.incremental_hits = 0
        if self._kernels is None:
            logger.info("kettle.kernels.logmel not available; using faster-whisper features")

    def batch(self, windows: Sequence[np.ndarray], n_frames: int = N_FRAMES) -> np.ndarray:
        if not windows:
            return np.zeros((0, self._n_mels, n_frames), dtype=np.float32)
        if self._kernels is not None:
            out = self._kernels.log_mel_batch(
                list(windows), n_mels=self._n_mels, n_frames=n_frames, device=self._device
            )
            return np.asarray(out, dtype=np.float32)
        return np.stack([self._fw_features(w, n_frames) for w in windows])

    def _fw_features(self, window: np.ndarray, n_frames: int) -> np.ndarray:
        from kettle.transcribe.model import fw

        if self._fallback is None:
            self._fallback = fw.FeatureExtractor(feature_size=self._n_mels)
        feats = self._fallback(window)[..., :-1]
        return np.asarray(fw.pad_or_trim(feats, n_frames), dtype=np.float32)

    def stream(
        self, key: Hashable, window: np.ndarray, n_frames: int = N_FRAMES
    ) -> np.ndarray | None:
        """Features of a stream window via its incremental state, or None to compute in full.

        The state is reused when ``window`` extends the audio of the previous call for ``key``
        (same head, same samples at the old end); otherwise it restarts from ``window``.
        """
        if self._kernels is None or not hasattr(self._kernels, "IncrementalLogMel"):
            return None
        state = self._streams.get(key)
        n = window.shape[0]
        if state is not None and self._extends(state, window):
            self._streams.move_to_end(key)
            if n > state.n_samples:
                state.mel.extend(window[state.n_samples :])
            self.incremental_hits += 1
        else:
            mel = self._kernels.IncrementalLogMel(self._n_mels)
            mel.extend(window)
            state = _StreamState(mel=mel, head=window[:_CHECK].copy(), tail=window[:0], n_samples=0)
            self._streams[key] = state
            self._streams.move_to_end(key)
            while len(self._streams) > self._max_streams:
                self._streams.popitem(last=False)
        state.n_samples = n
        state.tail = window[max(0, n - _CHECK) :].copy()
        return np.asarray(state.mel.features(n_frames), dtype=np.float32)

    @staticmethod
    def _extends(state: _StreamState, window: np.ndarray) -> bool:
        n_old = state.n_samples
        if window.shape[0] < n_old or n_old == 0:
            return False
        head = window[: state.head.shape[0]]
        if head.shape != state.head.shape or not np.array_equal(head, state.head):
            return False
        tail = window[n_old - state.tail.shape[0] : n_old]
        return bool(np.array_equal(tail, state.tail))

    def forget(self, key: Hashable) -> None:
        self._streams.pop(key, None)
