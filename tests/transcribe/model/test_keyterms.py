"""Keyterms as every API's terms become one normalized tuple, and the decoder's hotwords."""

from __future__ import annotations

import numpy as np
import pytest
from kettle.transcribe.errors import ConfigError
from kettle.transcribe.model import keyterms
from kettle.transcribe.model.prompts import MAX_HOTWORD_TOKENS, PromptBuilder
from kettle.transcribe.types import DecodeKind, DecodeRequest


def test_normalize_strips_dedupes_and_drops_empty_terms() -> None:
    assert keyterms.normalize([" Kettle ", "", "kettle", "Ilya Sutskever"]) == (
        "Kettle",
        "Ilya Sutskever",
    )


def test_weighted_terms_lose_their_intensifier_only() -> None:
    terms = keyterms.normalize(["snuffleupagus:5", "ratio:-1.5", "12:30", "a:b"], weighted=True)
    # "12:30" is a term whose tail is a number: its head "12" is what Deepgram would read.
    assert terms == ("snuffleupagus", "ratio", "12", "a:b")


@pytest.mark.parametrize(
    "terms",
    [["x" * (keyterms.MAX_TERM_CHARS + 1)], [f"t{i}" for i in range(keyterms.MAX_TERMS + 1)], [3]],
)
def test_limits_are_config_errors(terms: list[object]) -> None:
    with pytest.raises(ConfigError):
        keyterms.normalize(terms)  # type: ignore[arg-type]


def test_hotwords_join_the_terms() -> None:
    assert keyterms.hotwords(("Kettle", "CTranslate2", "Acme Inc.")) == (
        "Kettle. CTranslate2. Acme Inc."
    )
    assert keyterms.hotwords(()) is None


class _WordTokenizer:
    """One token per word, numbered by first sight: enough to read the prompt's layout."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}

    def encode(self, text: str) -> list[int]:
        return [self.vocab.setdefault(w, len(self.vocab)) for w in text.split()]

    def words(self, tokens: list[int]) -> list[str]:
        names = {v: k for k, v in self.vocab.items()}
        return [names[t] for t in tokens]


def _request(prompt: str | None, hotwords: str | None) -> DecodeRequest:
    audio = np.zeros(1600, np.float32)
    return DecodeRequest(audio, DecodeKind.FINAL, prompt=prompt, hotwords=hotwords)


def test_previous_section_without_hotwords_is_the_bucketed_prompt() -> None:
    tok = _WordTokenizer()
    prompt = " ".join(f"p{i}" for i in range(20))
    tokens = PromptBuilder.previous(_request(prompt, None), tok)
    assert tok.words(tokens) == [f"p{i}" for i in range(4, 20)]  # the last 16 (a bucket)
    assert PromptBuilder.previous(_request("a b c", None), tok) == tok.encode("a b c")


def test_hotwords_come_first_whole_and_the_prompt_fills_the_bucket() -> None:
    tok = _WordTokenizer()
    prompt = " ".join(f"p{i}" for i in range(40))
    tokens = PromptBuilder.previous(_request(prompt, "Kettle. Ilya."), tok)
    assert len(tokens) == 32
    assert tok.words(tokens[:2]) == ["Kettle.", "Ilya."]
    assert tok.words(tokens[2:]) == [f"p{i}" for i in range(10, 40)]  # the most recent


def test_hotwords_alone_are_kept_and_capped() -> None:
    tok = _WordTokenizer()
    many = " ".join(f"h{i}" for i in range(MAX_HOTWORD_TOKENS + 10))
    assert len(PromptBuilder.previous(_request(None, many), tok)) == MAX_HOTWORD_TOKENS
    assert tok.words(PromptBuilder.previous(_request(None, "Kettle"), tok)) == ["Kettle"]
