"""Repetition loops and implausible decodes."""

from __future__ import annotations

from kettle.streaming.guard import implausible, loop_cut
from kettle.transcribe.types import DecodeKind, DecodeResult


def _kept(text: str) -> str:
    words = text.split()
    return " ".join(words[i] for i in loop_cut(words))


def test_a_loop_keeps_one_pass_and_what_follows_it() -> None:
    loop = "the first to be " * 9
    assert (
        _kept(f"The Norseman was {loop}the second.")
        == "The Norseman was the first to be the second."
    )
    assert _kept("go " * 12) == "go"
    assert _kept("a b, a b. A b a b") == "a b,"


def test_speech_that_repeats_a_little_is_kept() -> None:
    for text in ("no no no I said no", "very very good", "we will we will rock you", ""):
        assert _kept(text) == text


def test_implausible_decodes() -> None:
    def result(text: str, ratio: float = 1.2) -> DecodeResult:
        return DecodeResult(0, DecodeKind.FINAL, text, compression_ratio=ratio)

    assert not implausible(result("one two three four five six"), 1.0)
    assert implausible(result("word " * 40), 4.0)  # 10 words a second
    assert implausible(result("fine words", ratio=3.1), 4.0)
