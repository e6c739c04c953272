"""OpenAI's ``logprobs``, ``languages`` and token ``usage`` fields, from what kettle's decoder
gives (shared by the audio REST API and Realtime transcription sessions).

kettle's decoder keeps no per-token log-probabilities: a result carries its words, each with
the probability faster-whisper gives it (the mean of its tokens' probabilities), and the ids
of its tokens. So an OpenAI ``logprobs`` entry here is one *word*: ``token`` is the word as
Whisper spells it (with its leading space), ``logprob`` the natural log of the word's
probability, ``bytes`` its UTF-8 bytes. Joined, the tokens give the transcript, as OpenAI's do.

Token usage (the shape OpenAI's ``transcript.text.done`` carries): ``output_tokens`` are the
text tokens decoded; ``input_tokens`` are audio tokens at Whisper's encoder rate, one per
20 ms of audio (the prompt and keywords are not counted).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from kettle.transcribe.types import Word

AUDIO_TOKENS_PER_S = 50  # Whisper's encoder: 1500 positions per 30 s
_FLOOR = 1e-12  # a probability of 0 would be a logprob of -inf, which JSON cannot carry


def word_logprobs(words: Iterable[Word]) -> list[dict[str, Any]]:
    """One ``{token, logprob, bytes}`` per word (see the module docstring)."""
    return [
        {
            "token": w.word,
            "logprob": round(math.log(max(w.probability, _FLOOR)), 6),
            "bytes": list(w.word.encode("utf-8")),
        }
        for w in words
        if w.word
    ]


def languages(codes: Iterable[str]) -> list[dict[str, str]]:
    """OpenAI's ``languages``: each code once, in order of first appearance."""
    return [{"code": code} for code in dict.fromkeys(c for c in codes if c)]


def token_usage(duration_s: float, token_counts: Sequence[int]) -> dict[str, Any]:
    audio = math.ceil(max(duration_s, 0.0) * AUDIO_TOKENS_PER_S)
    output = sum(token_counts)
    return {
        "type": "tokens",
        "input_tokens": audio,
        "output_tokens": output,
        "total_tokens": audio + output,
        "input_token_details": {"audio_tokens": audio, "text_tokens": 0},
    }
