"""Pure decision rules of the decoder: scores, the fallback test, the silence gates.

The thresholds and rules are faster-whisper's (and OpenAI Whisper's): a hypothesis needs a
retry at the next temperature when it is too repetitive (gzip compression ratio above the
threshold) or too unlikely (average log-probability below the threshold), unless the model
says the window is silence (no-speech probability above its threshold while the log-prob is
low), in which case the window yields no text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# A window whose RMS is below this (-80 dBFS) holds nothing to transcribe; Whisper tends to
# hallucinate on digital silence, so it never reaches the model.
SILENCE_RMS = 1e-4


# What Whisper says over noise, music or silence when it has nothing to transcribe; dropped
# only when the model also leans to "no speech" (a real "Thank you." scores low there).
KNOWN_HALLUCINATIONS = frozenset(
    {
        "you",
        "thank you",
        "thank you very much",
        "thanks for watching",
        "thank you for watching",
        "thanks for listening",
        "please subscribe",
        "bye",
        "oh",
        "so",
        "um",
        "hmm",
        "the end",
        "i'm sorry",
    }
)


@dataclass(frozen=True)
class Hypothesis:
    tokens: tuple[int, ...]
    text: str
    avg_logprob: float
    no_speech_prob: float
    compression_ratio: float
    temperature: float


@dataclass(frozen=True)
class Thresholds:
    no_speech: float | None
    log_prob: float | None
    compression_ratio: float | None


def avg_logprob(score: float, n_tokens: int, length_penalty: float = 1.0) -> float:
    """Average log-probability per token (incl. end of text) from CTranslate2's normalized score."""
    cum = score * (n_tokens**length_penalty)
    return float(cum / (n_tokens + 1))


def is_silence(hyp: Hypothesis, th: Thresholds) -> bool:
    """faster-whisper's no-speech rule: confident no-speech AND low log-probability."""
    if th.no_speech is None or th.log_prob is None:
        return False
    return hyp.no_speech_prob > th.no_speech and hyp.avg_logprob < th.log_prob


def _normalized(text: str) -> str:
    kept = "".join(c for c in text.lower() if c.isalnum() or c in " '")
    return " ".join(kept.split())


def is_hallucination(hyp: Hypothesis, th: Thresholds) -> bool:
    """A stock phrase over a window the model itself thinks holds no speech."""
    if th.no_speech is None or hyp.no_speech_prob <= th.no_speech:
        return False
    return _normalized(hyp.text) in KNOWN_HALLUCINATIONS


def suppressed(hyp: Hypothesis, th: Thresholds) -> bool:
    """Whether a hypothesis yields no text: silence by the no-speech rule, or a hallucination."""
    return is_silence(hyp, th) or is_hallucination(hyp, th)


def too_repetitive(hyp: Hypothesis, th: Thresholds) -> bool:
    return th.compression_ratio is not None and hyp.compression_ratio > th.compression_ratio


def needs_fallback(hyp: Hypothesis, th: Thresholds) -> bool:
    """Whether to re-decode at the next temperature."""
    if is_silence(hyp, th):
        return False
    if too_repetitive(hyp, th):
        return True
    return th.log_prob is not None and hyp.avg_logprob < th.log_prob


def pick_after_fallback(attempts: Sequence[Hypothesis], th: Thresholds) -> Hypothesis:
    """When every temperature failed: the most likely attempt that is not too repetitive."""
    candidates = [h for h in attempts if not too_repetitive(h, th)] or list(attempts)
    return max(candidates, key=lambda h: h.avg_logprob)


def rms(audio: np.ndarray) -> float:
    if audio.size == 0:
        return 0.0
    a = audio.astype(np.float64, copy=False)
    return float(np.sqrt(np.mean(a * a)))


def is_negligible(audio: np.ndarray, threshold: float = SILENCE_RMS) -> bool:
    """True for an empty window or one whose energy is too low to hold speech."""
    return audio.size == 0 or rms(audio) < threshold
