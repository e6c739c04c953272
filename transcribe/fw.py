"""The one door to faster-whisper's internals.

Everything kettle reuses from faster-whisper (model class, tokenizer, feature extractor, word
alignment, Silero VAD, PyAV decoding) is reached through this module, so a faster-whisper
upgrade touches one file. Importing faster_whisper pulls in ctranslate2 and PyAV, so callers
import this module lazily (inside functions) where import time matters.
"""

from __future__ import annotations

from faster_whisper import BatchedInferencePipeline, WhisperModel
from faster_whisper.audio import decode_audio, pad_or_trim
from faster_whisper.feature_extractor import FeatureExtractor
from faster_whisper.tokenizer import Tokenizer
from faster_whisper.transcribe import get_compression_ratio, get_suppressed_tokens
from faster_whisper.vad import SileroVADModel, VadOptions, get_speech_timestamps, get_vad_model

__all__ = [
    "BatchedInferencePipeline",
    "FeatureExtractor",
    "SileroVADModel",
    "Tokenizer",
    "VadOptions",
    "WhisperModel",
    "decode_audio",
    "get_compression_ratio",
    "get_speech_timestamps",
    "get_suppressed_tokens",
    "get_vad_model",
    "pad_or_trim",
]
