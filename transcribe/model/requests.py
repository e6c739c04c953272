"""What the adapter checks before any model work: a window's samples and a decode request's
fields, each refused with a ConfigError that names what is wrong."""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
from kettle.transcribe.errors import ConfigError
from kettle.transcribe.model.prompts import MAX_LENGTH
from kettle.transcribe.types import (
    MAX_WINDOW_SAMPLES,
    SAMPLE_RATE,
    TASKS,
    DecodeKind,
    DecodeRequest,
)

# Whisper generates at most MAX_LENGTH // 2 tokens, forced ones included, so a request's
# context text is bounded (about 140 tokens of English) to leave room for new words.
MAX_CONTEXT_CHARS = 600


def check_int(name: str, value: object, low: int, high: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ConfigError(f"{name} must be an integer in [{low}, {high}], got {value!r}")


def check_audio(audio: object) -> np.ndarray:
    """A window's samples as contiguous float32: 1-D, finite, at most 30 s."""
    if not isinstance(audio, np.ndarray):
        raise ConfigError(f"audio must be a numpy array, got {type(audio).__name__}")
    if audio.ndim != 1:
        raise ConfigError(f"audio must be 1-D mono samples, got shape {audio.shape}")
    if not np.issubdtype(audio.dtype, np.floating):
        raise ConfigError(f"audio must be float32 samples in [-1, 1], got {audio.dtype}")
    if audio.shape[0] > MAX_WINDOW_SAMPLES:
        raise ConfigError(
            f"window of {audio.shape[0] / SAMPLE_RATE:.2f} s is longer than the "
            f"{MAX_WINDOW_SAMPLES / SAMPLE_RATE:.0f} s Whisper takes"
        )
    samples = np.ascontiguousarray(audio, dtype=np.float32)
    if samples.size and not np.isfinite(samples).all():
        raise ConfigError("audio holds NaN or infinite samples")
    return samples


class RequestCheck:
    """A loaded model's rules for decode requests: which languages it knows (none to check
    for an English-only model) and whether it can translate."""

    def __init__(self, model_name: str, *, multilingual: bool, languages: Collection[str]) -> None:
        self._name = model_name
        self._multilingual = multilingual
        self._languages = languages

    def __call__(self, r: DecodeRequest) -> np.ndarray:
        """The request's samples (``check_audio``'s), once every field is valid."""
        if not isinstance(r.kind, DecodeKind):
            raise ConfigError(f"request {r.request_id!r}: kind must be a DecodeKind")
        samples = check_audio(r.audio)
        if r.beam_size is not None:
            check_int("beam_size", r.beam_size, 1, 64)
        if r.max_new_tokens is not None:
            check_int("max_new_tokens", r.max_new_tokens, 1, MAX_LENGTH // 2)
        if r.language is not None and self._multilingual and r.language not in self._languages:
            raise ConfigError(f"request {r.request_id!r}: unknown language code {r.language!r}")
        if r.context is not None and len(r.context) > MAX_CONTEXT_CHARS:
            raise ConfigError(
                f"request {r.request_id!r}: context of {len(r.context)} characters is longer "
                f"than {MAX_CONTEXT_CHARS}"
            )
        if r.encode_min_s is not None and not 0.0 <= r.encode_min_s <= 30.0:
            raise ConfigError(
                f"request {r.request_id!r}: encode_min_s must be within 0..30, not {r.encode_min_s}"
            )
        if r.task not in TASKS:
            raise ConfigError(f"request {r.request_id!r}: task must be one of {', '.join(TASKS)}")
        if r.task == "translate" and not self._multilingual:
            raise ConfigError(f"model {self._name} is English-only and cannot translate")
        return samples


__all__ = ["MAX_CONTEXT_CHARS", "RequestCheck", "check_audio", "check_int"]
