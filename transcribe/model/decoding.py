"""Pure decision rules of the decoder: scores, the fallback test, the silence gates.

The thresholds and rules are faster-whisper's (and OpenAI Whisper's): a hypothesis needs a
retry at the next temperature when it is too repetitive (gzip compression ratio above the
threshold) or too unlikely (average log-probability below the threshold), unless the model
says the window is silence (no-speech probability above its threshold while the log-prob is
low), in which case the window yields no text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

import numpy as np
from kettle.transcribe.model import nonspeech, repeats
from kettle.transcribe.model.nonspeech import NonSpeechPolicy

# A window whose RMS is below this (-80 dBFS) holds nothing to transcribe; Whisper tends to
# hallucinate on digital silence, so it never reaches the model.
SILENCE_RMS = 1e-4


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


def policy(th: Thresholds) -> NonSpeechPolicy:
    """The files' non-speech policy (nonspeech.FILES) at the decoder's configured thresholds."""
    return replace(
        nonspeech.FILES,
        phrase_prob=th.no_speech,
        unsure_prob=th.no_speech,
        unsure_logprob=th.log_prob,
    )


def is_silence(hyp: Hypothesis, th: Thresholds) -> bool:
    """faster-whisper's no-speech rule: confident no-speech AND low log-probability."""
    return policy(th).unsure(hyp.no_speech_prob, hyp.avg_logprob)


def suppressed(hyp: Hypothesis, th: Thresholds) -> bool:
    """Whether a hypothesis yields no text: silence by the no-speech rule, or one of
    Whisper's phrases for non-speech over a window the model thinks holds no speech."""
    return policy(th).drops(hyp.text, hyp.no_speech_prob, hyp.avg_logprob)


def too_repetitive(hyp: Hypothesis, th: Thresholds) -> bool:
    """Whisper's gzip test, and a loop too short for gzip to see ("s s s s s s")."""
    if th.compression_ratio is None:
        return False
    return hyp.compression_ratio > th.compression_ratio or loops(hyp.text)


def loops(text: str) -> bool:
    words = text.split()
    return len(repeats.loop_cut(words)) < len(words)


def needs_fallback(hyp: Hypothesis, th: Thresholds) -> bool:
    """Whether to re-decode at the next temperature."""
    if is_silence(hyp, th):
        return False
    if too_repetitive(hyp, th):
        return True
    return th.log_prob is not None and hyp.avg_logprob < th.log_prob


class Scored(Protocol):
    """A decode attempt as far as choosing among fallback rounds goes (a Hypothesis here, a
    DecodeResult in the streaming engine, which runs each round as a request of its own)."""

    @property
    def avg_logprob(self) -> float: ...


S = TypeVar("S", bound=Scored)


def pick_after_fallback(attempts: Sequence[S], repetitive: Callable[[S], bool]) -> S:
    """When every temperature failed: the most likely attempt that is not too repetitive."""
    candidates = [a for a in attempts if not repetitive(a)] or list(attempts)
    return max(candidates, key=lambda a: a.avg_logprob)


def rms(audio: np.ndarray) -> float:
    if audio.size == 0:
        return 0.0
    a = audio.astype(np.float64, copy=False)
    return float(np.sqrt(np.mean(a * a)))


def is_negligible(audio: np.ndarray, threshold: float = SILENCE_RMS) -> bool:
    """True for an empty window or one whose energy is too low to hold speech."""
    return audio.size == 0 or rms(audio) < threshold
