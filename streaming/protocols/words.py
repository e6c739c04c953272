"""Words as Deepgram's messages show them, which AssemblyAI's turns are built from too: a
word's fields, the plain (unpunctuated) transcript, and a hypothesis's words timed evenly over
its window. No I/O."""

from __future__ import annotations

import re
from typing import Any

from kettle.streaming.core.agreement import normalize_word, split_words

# A hyphen between two word characters ("cold-hearted", "twenty-five").
_INNER_HYPHEN = re.compile(r"(?<=\w)-(?=\w)")


def plain_word(word: str) -> str:
    """A word as an unpunctuated transcript shows it: lowercase, punctuation removed, but a
    hyphen inside it kept ("cold-hearted", not the non-word "coldhearted")."""
    parts = ("".join(normalize_word(p).split()) for p in _INNER_HYPHEN.split(word))
    return "-".join(p for p in parts if p)


def word_fields(
    raw: str,
    start: float,
    end: float,
    confidence: float,
    speaker: int | None = None,
    speaker_confidence: float | None = None,
) -> dict[str, Any]:
    """A word as Deepgram gives it; with diarize, its ``speaker`` and ``speaker_confidence``."""
    display = raw.strip()
    fields: dict[str, Any] = {
        "word": plain_word(display),
        "start": round(start, 3),
        "end": round(end, 3),
        "confidence": round(confidence, 4),
        "punctuated_word": display,
    }
    if speaker is not None:
        fields["speaker"] = speaker
        fields["speaker_confidence"] = round(speaker_confidence or 0.0, 4)
    return fields


def plain_transcript(text: str) -> str:
    """Deepgram's unpunctuated transcript: lowercase words, punctuation removed."""
    plain = (plain_word(w) for w in split_words(text))
    return " ".join(w for w in plain if w)


def spread_words(text: str, start: float, end: float) -> list[dict[str, Any]]:
    """A hypothesis's words timed evenly over its window, with no claimed confidence."""
    words = split_words(text)
    if not words:
        return []
    step = max(end - start, 0.0) / len(words)
    return [
        word_fields(w, start + i * step, start + (i + 1) * step, 0.0) for i, w in enumerate(words)
    ]


__all__ = ["plain_transcript", "plain_word", "spread_words", "word_fields"]
