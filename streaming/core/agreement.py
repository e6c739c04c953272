"""LocalAgreement-n: the stable prefix of an utterance's successive hypotheses.

A word becomes stable once ``agree`` successive hypotheses (2 by default; ``first`` for the
first stable words) agree on it (and on everything before it); stable words never change
afterwards. The last ``holdback`` words of a hypothesis never become stable: they lie at the
window's edge, where a greedy decode of a window that ends mid-word is least reliable, and a
stable mistake is forced into the final.
Words are compared as docs/protocol.md#partial defines them: lowercased, punctuation removed,
apostrophes inside words kept.
Every text this module hands out (a partial, the final) starts with the stable words, spliced
in if the model disagreed; ``splice_words`` times such a final's words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kettle.transcribe.types import Word
from kettle.transcribe.words import normalize_word as normalize_word  # re-exported


def split_words(text: str) -> list[str]:
    """Display words; a token with no letters or digits sticks to the word before it."""
    out: list[str] = []
    for token in text.split():
        if not normalize_word(token) and out:
            out[-1] = f"{out[-1]} {token}"
        else:
            out.append(token)
    # A leading punctuation-only token has nothing to stick to: fold it into the next word;
    # alone, it is no word at all.
    if out and not normalize_word(out[0]):
        if len(out) == 1:
            return []
        out[1] = f"{out[0]} {out[1]}"
        del out[0]
    return out


def normalized(words: list[str]) -> list[str]:
    return [normalize_word(w) for w in words]


def common_prefix_len(a: list[str], b: list[str]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


@dataclass(frozen=True)
class Hypothesis:
    text: str
    stable: str


class Agreement:
    """Agreement buffer for one utterance."""

    def __init__(self, holdback: int = 0, agree: int = 2, *, first: int | None = None) -> None:
        if agree < 2 or (first is not None and first < 2):
            raise ValueError("agreement needs at least two hypotheses")
        self._holdback = holdback
        self._agree = agree
        self._first = first or agree  # for the first stable words
        self._stable: list[str] = []  # display forms, fixed once stable
        self._stable_norm: list[str] = []
        # Normalized words of the last ``max(agree, first) - 1`` hypotheses, oldest first.
        self._previous: list[list[str]] = []

    @property
    def stable_text(self) -> str:
        return " ".join(self._stable)

    @property
    def stable_words(self) -> list[str]:
        return list(self._stable)

    @property
    def stable_count(self) -> int:
        return len(self._stable)

    def update(self, text: str, *, trusted: bool = True) -> Hypothesis:
        """Take a new hypothesis of the utterance so far; return it with its stable prefix.

        An untrusted hypothesis (the model doubted it heard speech) is shown but makes no
        word stable, and the next words need ``agree`` trusted hypotheses in a row: a stable
        word can never be taken back, even when the final finds no speech."""
        words = self.splice(split_words(text))
        norm = normalized(words)
        if not trusted:
            self._previous = []
            return Hypothesis(" ".join(words), self.stable_text)
        need = self._agree if self._stable else self._first
        if len(self._previous) >= need - 1:
            agreed = len(norm) - self._holdback
            for previous in self._previous[len(self._previous) - (need - 1) :]:
                agreed = min(
                    agreed,
                    common_prefix_len(previous, norm),
                    len(previous) - self._holdback,
                )
            # A text of punctuation only ("-") is one word with nothing to say; it must not
            # become stable, or the first real word (which it would stick to) could not follow.
            while agreed > len(self._stable) and not norm[agreed - 1]:
                agreed -= 1
            if agreed > len(self._stable):
                # Words up to `agreed` are the same in both; their display form is fixed now.
                self._stable.extend(words[len(self._stable) : agreed])
                self._stable_norm.extend(norm[len(self._stable_norm) : agreed])
        self._previous = [*self._previous, norm][-(max(self._agree, self._first) - 1) :]
        return Hypothesis(" ".join(words), self.stable_text)

    def finalize(self, text: str) -> str:
        """The final text: the model's, made to start with the stable words."""
        return " ".join(self.splice(split_words(text)))

    def splice_offset(self, words: list[str]) -> int:
        """Index in ``words`` where the text after the stable prefix continues."""
        n = len(self._stable_norm)
        norm = normalized(words)
        if norm[:n] == self._stable_norm:
            return n
        if n == 0:
            return 0
        # The model disagreed: continue after the last place where the last stable word
        # occurs near where it should, else after as many words as are stable.
        last = self._stable_norm[-1]
        for i in range(min(len(norm), n + 3) - 1, max(-1, n - 4), -1):
            if norm[i] == last:
                return i + 1
        return min(n, len(words))

    def splice(self, words: list[str]) -> list[str]:
        if not self._stable:
            return words
        return self._stable + words[self.splice_offset(words) :]


def splice_words(
    agreement: Agreement, model: Sequence[Word], start: float, end: float
) -> tuple[Word, ...]:
    """The words of a final whose text ``agreement.finalize`` made start with the stable
    words. ``model`` are the decoder's timed words (absolute seconds) and [start, end] the
    utterance. If the model said the stable words itself, its words are kept; else the forced
    words are timed evenly over the span before the model's continuation, with no claimed
    confidence."""
    stable = agreement.stable_words
    shown = [w.word.strip() for w in model]
    if not stable or normalized(shown[: len(stable)]) == normalized(stable):
        return tuple(model)
    tail = list(model[agreement.splice_offset(shown) :])
    hi = tail[0].start if tail else end
    step = max(hi - start, 0.0) / len(stable)
    forced = [
        Word(w, round(start + i * step, 3), round(start + (i + 1) * step, 3), 0.0)
        for i, w in enumerate(stable)
    ]
    return tuple(forced + tail)
