"""Hallucination guards on decoded text: repetition loops, and context decodes gone wrong.

Whisper, tiny.en most of all, sometimes falls into a loop ("the first to be the first to be
...") or, forced to continue a context it does not hear well, invents a sentence. A loop is
cut to one pass of it before anything is shown; a context decode that reads as a
hallucination (far more words than the utterance can hold, or a text the model itself finds
repetitive) is thrown away and the utterance decoded alone. A decode that starts by saying
again a phrase its forced context just said (the model continuing the text, not the audio:
"...you can call me Abby. You" -> "can call me Abby. He was") loses the repeated words.
"""

from __future__ import annotations

from collections.abc import Sequence

from kettle.streaming.core.agreement import normalize_word
from kettle.transcribe.model.repeats import loop_cut as loop_cut  # re-exported
from kettle.transcribe.types import DecodeResult

MAX_WORDS_PER_S = 6.0  # fast read speech is 3-4 words per second
EXTRA_WORDS = 4
MAX_COMPRESSION_RATIO = 2.4  # Whisper's own repetition threshold
MIN_ECHO_WORDS = 3  # a repeated phrase this long at a decode's start is an echo


def implausible(result: DecodeResult, seconds: float) -> bool:
    """Whether a decode of an utterance ``seconds`` long reads as a hallucination."""
    words = len(result.text.split())
    if words > MAX_WORDS_PER_S * seconds + EXTRA_WORDS:
        return True
    return result.compression_ratio > MAX_COMPRESSION_RATIO


def context_echo(finals: Sequence[str], words: list[str]) -> int:
    """How many leading ``words`` repeat the phrase that ends the context (the ``finals``
    joined), or ends one word before its end: at least MIN_ECHO_WORDS words, the longest
    such phrase, one that starts inside a final (0: none). A phrase that starts a final is
    a speaker starting again as before; one from inside a final is the model going on
    with the text. A speaker who repeats the tail of a sentence at once loses it too:
    rare, where the echo came every few minutes of multi-voice conversation."""
    tail: list[str] = []
    starts: set[int] = set()  # indices in ``tail`` where a final begins
    for text in finals:
        starts.add(len(tail))
        tail.extend(normalize_word(w) for w in text.split())
    norm = [normalize_word(w) for w in words]
    end = len(tail)
    for n in range(min(len(norm), end), MIN_ECHO_WORDS - 1, -1):
        phrase = norm[:n]
        for first in (end - n, end - n - 1):
            if first > 0 and first not in starts and tail[first : first + n] == phrase:
                return n
    return 0


def phrase_in(texts: Sequence[str], words: Sequence[str]) -> int | None:
    """The first of ``texts`` that holds ``words``, MIN_ECHO_WORDS or more, as a phrase
    (None: none does, or too few words)."""
    norm = [normalize_word(w) for w in words]
    if len(norm) < MIN_ECHO_WORDS:
        return None
    for k, text in enumerate(texts):
        said = [normalize_word(w) for w in text.split()]
        if any(said[i : i + len(norm)] == norm for i in range(len(said) - len(norm) + 1)):
            return k
    return None
