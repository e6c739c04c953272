"""Speaker embeddings from resemblyzer's GE2E encoder (the ``diarize`` extra).

resemblyzer ships its pretrained weights (``pretrained.pt``, 17 MB) in its wheel, but its
package imports librosa, numba and a source-built webrtcvad on import. kettle needs none of
that: it reads the weights file where pip put it, builds the same three-layer LSTM on torch,
and computes the same 40-band mel spectrogram (librosa's, rebuilt on torch.stft with
faster-whisper's Slaney filterbank; tests/transcribe/speakers/test_encoder.py holds librosa's
figures). Embeddings are unit vectors: the cosine similarity of two is their dot product.
"""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from kettle.transcribe.errors import KettleError
from kettle.transcribe.types import SAMPLE_RATE

EMBEDDING_SIZE = 256
MEL_BANDS = 40
N_FFT = 400  # 25 ms
HOP = 160  # 10 ms
PARTIAL_FRAMES = 160  # 1.6 s: the encoder's training window
PARTIAL_RATE = 1.3  # partial windows per second (resemblyzer's default)
MIN_COVERAGE = 0.75  # a last window shorter than this share of 1.6 s is dropped
TARGET_DBFS = -30.0  # resemblyzer raises quiet audio to this level before embedding
INSTALL_HINT = "pip install 'kettle[diarize]' && pip install --no-deps resemblyzer==0.1.4"


class SpeakerEncoder(Protocol):
    """Audio (16 kHz float32 mono) to a unit-length voice embedding."""

    def embed(self, audio: np.ndarray) -> np.ndarray: ...


def weights_path() -> Path | None:
    """resemblyzer's pretrained.pt, found without importing resemblyzer; None if absent."""
    spec = importlib.util.find_spec("resemblyzer")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "pretrained.pt"
    return path if path.is_file() else None


def available() -> bool:
    """Whether the speaker model can load here (resemblyzer's weights and torch)."""
    return weights_path() is not None and importlib.util.find_spec("torch") is not None


def partial_slices(n_samples: int) -> list[slice]:
    """The 1.6 s mel-frame windows resemblyzer averages over (its compute_partial_slices)."""
    n_frames = int(np.ceil((n_samples + 1) / HOP))
    step = round(SAMPLE_RATE / PARTIAL_RATE / HOP)
    count = max(1, n_frames - PARTIAL_FRAMES + step + 1)
    slices = [slice(i, i + PARTIAL_FRAMES) for i in range(0, count, step)]
    last = slices[-1]
    coverage = (n_samples - last.start * HOP) / (PARTIAL_FRAMES * HOP)
    if coverage < MIN_COVERAGE and len(slices) > 1:
        slices.pop()
    return slices


def normalize_volume(audio: np.ndarray) -> np.ndarray:
    """Raise (never lower) the level to TARGET_DBFS, as resemblyzer's preprocessing does."""
    rms = float(np.sqrt(np.mean(audio.astype(np.float64) ** 2)))
    if rms <= 0.0:
        return audio
    gain_db = TARGET_DBFS - 20.0 * np.log10(rms)
    return audio if gain_db <= 0 else audio * np.float32(10 ** (gain_db / 20.0))


class ResemblyzerEncoder:
    """GE2E on torch, CPU, one thread (the model's thread keeps the others)."""

    def __init__(self, path: Path | None = None, threads: int = 1) -> None:
        import torch
        from faster_whisper.feature_extractor import FeatureExtractor

        path = path or weights_path()
        if path is None:
            raise KettleError(f"no speaker model: install it with {INSTALL_HINT}")
        self._torch = torch
        self._threads = threads
        self._lock = threading.Lock()  # torch modules are not safe to call from two threads
        self._lstm = torch.nn.LSTM(MEL_BANDS, EMBEDDING_SIZE, 3, batch_first=True)
        self._linear = torch.nn.Linear(EMBEDDING_SIZE, EMBEDDING_SIZE)
        state = torch.load(path, map_location="cpu", weights_only=True)["model_state"]
        self._lstm.load_state_dict({k[5:]: v for k, v in state.items() if k.startswith("lstm.")})
        self._linear.load_state_dict(
            {k[7:]: v for k, v in state.items() if k.startswith("linear.")}
        )
        self._lstm.eval()
        self._linear.eval()
        filters = FeatureExtractor.get_mel_filters(SAMPLE_RATE, N_FFT, n_mels=MEL_BANDS)
        self._filters = torch.from_numpy(filters.astype(np.float32))
        self._window = torch.hann_window(N_FFT)

    def mel(self, audio: np.ndarray) -> Any:
        """librosa.feature.melspectrogram(y, sr=16000, n_fft=400, hop_length=160, n_mels=40)
        transposed: (frames, 40), power (not log) mel."""
        torch = self._torch
        signal = torch.from_numpy(np.ascontiguousarray(audio, dtype=np.float32))
        spec = torch.stft(
            signal,
            N_FFT,
            HOP,
            window=self._window,
            center=True,
            pad_mode="constant",
            return_complex=True,
        )
        return (self._filters @ spec.abs() ** 2).T

    def embed(self, audio: np.ndarray) -> np.ndarray:
        torch = self._torch
        audio = normalize_volume(np.asarray(audio, dtype=np.float32))
        slices = partial_slices(len(audio))
        needed = slices[-1].stop * HOP
        if needed >= len(audio):
            audio = np.pad(audio, (0, needed - len(audio)))
        with self._lock, torch.inference_mode():
            previous = torch.get_num_threads()
            torch.set_num_threads(self._threads)
            try:
                mel = self.mel(audio)
                batch = torch.stack([mel[s] for s in slices])
                _, (hidden, _) = self._lstm(batch)
                raw = torch.relu(self._linear(hidden[-1]))
                partials = raw / torch.norm(raw, dim=1, keepdim=True).clamp_min(1e-12)
            finally:
                torch.set_num_threads(previous)
        mean = partials.mean(dim=0).numpy().astype(np.float32)
        norm = float(np.linalg.norm(mean))
        return mean / norm if norm > 0 else mean


_SHARED: ResemblyzerEncoder | None = None
_SHARED_LOCK = threading.Lock()


def shared_encoder() -> ResemblyzerEncoder:
    """One encoder per process, loaded on first use (torch's import takes seconds)."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = ResemblyzerEncoder()
        return _SHARED
