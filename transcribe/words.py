"""How a word is compared (docs/protocol.md#partial): lowercased, punctuation removed, apostrophes
inside words kept."""

from __future__ import annotations

import re

_PUNCT = re.compile(r"[^\w\s']|_")
_EDGE_APOSTROPHES = re.compile(r"(^'+|'+$)")


def normalize_word(word: str) -> str:
    """Lowercase, punctuation removed, apostrophes kept only inside the word."""
    return _EDGE_APOSTROPHES.sub("", _PUNCT.sub("", word.lower().replace("\u2019", "'")))
