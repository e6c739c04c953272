"""Keyterms: names and terms a caller expects in the audio, as every API spells them.

Deepgram's ``keyterm`` and ``keywords``, OpenAI's ``keywords``, AssemblyAI's
``keyterms_prompt`` and Flux's ``Configure`` keyterms all become one tuple of terms, and that
tuple becomes Whisper's hotwords: text first in the decoder's previous-text section
(prompts.PromptBuilder), which makes the model likelier to spell those words as given.
"""

from __future__ import annotations

from collections.abc import Iterable

from kettle.transcribe.errors import ConfigError

MAX_TERMS = 100  # Deepgram's own cap on keyterms per request
MAX_TERM_CHARS = 100
# A Deepgram keyword may carry an intensifier ("kettle:2"); Whisper has no boost, so the
# term is kept and the weight dropped.
_WEIGHT_SEPARATOR = ":"


def normalize(terms: Iterable[str], *, weighted: bool = False) -> tuple[str, ...]:
    """The terms stripped, empty ones dropped, duplicates (case-insensitive) kept once;
    ``weighted`` strips a trailing ``:number``. ConfigError past the limits."""
    out: dict[str, str] = {}
    for raw in terms:
        if not isinstance(raw, str):
            raise ConfigError(f"a keyterm must be a string, not {type(raw).__name__}")
        term = raw.strip()
        if weighted and _WEIGHT_SEPARATOR in term:
            head, _, weight = term.rpartition(_WEIGHT_SEPARATOR)
            if _is_number(weight):
                term = head.strip()
        if not term:
            continue
        if len(term) > MAX_TERM_CHARS:
            raise ConfigError(f"a keyterm is at most {MAX_TERM_CHARS} characters: {term[:40]!r}...")
        out.setdefault(term.casefold(), term)
    if len(out) > MAX_TERMS:
        raise ConfigError(f"at most {MAX_TERMS} keyterms, got {len(out)}")
    return tuple(out.values())


def hotwords(terms: Iterable[str]) -> str | None:
    """The decoder's hotwords text for ``terms`` (None for none): each term a sentence of its
    own. A comma list made tiny.en continue the list into the transcript ("Siobhan Siobhan
    ..."): 15 false terms in 40 files against 6, and 62 % recall against 78 %
    (benchmarks/RESULTS.md, "bench_keyterms")."""
    sentences = [t.rstrip(".").strip() for t in terms]
    joined = " ".join(f"{t}." for t in sentences if t)
    return joined or None


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
