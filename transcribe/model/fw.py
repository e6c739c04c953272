"""The one door to faster-whisper's internals (and to CTranslate2 itself).

Everything kettle reuses from faster-whisper (model class, tokenizer, feature extractor, word
alignment, Silero VAD, PyAV decoding, hub download) is reached through this module, so a
faster-whisper upgrade touches one file. Importing faster_whisper pulls in ctranslate2 and PyAV,
so callers import this module lazily (inside functions) where import time matters.
"""

from __future__ import annotations

import os
from typing import Any

import ctranslate2
import numpy as np
from faster_whisper import BatchedInferencePipeline, WhisperModel
from faster_whisper.audio import decode_audio, pad_or_trim
from faster_whisper.feature_extractor import FeatureExtractor
from faster_whisper.tokenizer import _LANGUAGE_CODES, Tokenizer
from faster_whisper.transcribe import get_compression_ratio, get_suppressed_tokens
from faster_whisper.utils import available_models, download_model
from faster_whisper.vad import SileroVADModel, VadOptions, get_speech_timestamps, get_vad_model

LANGUAGE_CODES: tuple[str, ...] = tuple(_LANGUAGE_CODES)

# Word-timestamp punctuation merging, as faster-whisper's transcribe() defaults.
PREPEND_PUNCTUATIONS = "\"'“¿([{-"
APPEND_PUNCTUATIONS = "\"'.。,，!！?？:：”)]}、"

__all__ = [
    "APPEND_PUNCTUATIONS",
    "LANGUAGE_CODES",
    "PREPEND_PUNCTUATIONS",
    "BatchedInferencePipeline",
    "FeatureExtractor",
    "SileroVADModel",
    "Tokenizer",
    "VadOptions",
    "WhisperModel",
    "available_models",
    "cuda_device_count",
    "decode_audio",
    "download_model",
    "get_compression_ratio",
    "get_speech_timestamps",
    "get_suppressed_tokens",
    "get_vad_model",
    "load_whisper",
    "pad_or_trim",
    "storage",
    "to_numpy",
]


def cuda_device_count() -> int:
    """How many CUDA devices CTranslate2 can use (0 on a CPU-only build or machine)."""
    try:
        return int(ctranslate2.get_cuda_device_count())
    except Exception:  # a CPU-only build may raise instead of returning 0
        return 0


# oneDNN, CTranslate2's GEMM backend on CPUs without Intel MKL (AMD, say), keeps up to 1024
# compiled primitives, one per shape, and a stream's shapes vary with batch, beam, encoder
# length and hypothesis count: a server's RSS crept up for many minutes as that cache filled
# (benchmarks/RESULTS.md "rss": after 150 s of decodes about 60 MB less with 16 than with
# 1024, at the same decode speed). oneDNN reads the capacity when it makes its first
# primitive, so it is set before a model is loaded; a value already in the environment wins.
ONEDNN_CACHE_CAPACITY = 16


def load_whisper(
    path: str, *, device: str, compute_type: str, threads: int, replicas: int = 1
) -> WhisperModel:
    """A faster-whisper model over a local CTranslate2 folder (never touches the network):
    ``replicas`` copies that run at once (CTranslate2's inter_threads), ``threads`` each."""
    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", str(ONEDNN_CACHE_CAPACITY))
    return WhisperModel(
        path, device=device, compute_type=compute_type, cpu_threads=threads, num_workers=replicas
    )


def storage(array: np.ndarray) -> Any:
    """A CTranslate2 StorageView over a C-contiguous array."""
    return ctranslate2.StorageView.from_array(np.ascontiguousarray(array))


def to_numpy(view: Any) -> np.ndarray:
    """Copy a CPU StorageView into a numpy array (bfloat16, which numpy lacks, as float32)."""
    if view.dtype == ctranslate2.DataType.bfloat16:
        view = view.to(ctranslate2.DataType.float32)
    return np.array(view)
