"""Repetition loops and implausible decodes."""

from __future__ import annotations

from kettle.streaming.core.guard import context_echo, implausible, loop_cut
from kettle.transcribe.model.nonspeech import STREAM
from kettle.transcribe.types import DecodeKind, DecodeResult

non_speech_phrase = STREAM.is_phrase
unsure_of_speech = STREAM.unsure


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


def split(text: str) -> list[str]:
    return text.split()


def test_a_decode_that_repeats_its_context_loses_the_echo() -> None:
    context = ["I'm Abigail Klafflin. You can call me Abby.", "You"]
    words = split("can call me Abby. He was not an old young man.")
    assert context_echo(context, words) == 4  # "can call me Abby" was just said
    assert context_echo(context[:1], split("call me Abby and")) == 3
    # Two words are not an echo; nor is a phrase from further back in the context.
    assert context_echo(context, split("me Abby later")) == 0
    assert context_echo(context, split("I'm Abigail Klafflin and")) == 0
    assert context_echo([], words) == 0 and context_echo(context, []) == 0


def test_a_final_said_again_from_its_start_is_speech_not_an_echo() -> None:
    assert context_echo(["thank you very much"], split("thank you very much")) == 0
    assert context_echo(["yes.", "one two three"], split("one two three four")) == 0


def test_whispers_phrases_for_non_speech_are_noise_when_the_model_is_unsure() -> None:
    assert non_speech_phrase("Thank you so much.", 0.3)
    assert non_speech_phrase(" Thanks for watching!", 0.25)
    assert non_speech_phrase("Beep Beep Beep Beep", 0.21)
    assert non_speech_phrase("Yeah, yeah.", 0.4)
    # Said with confidence, it is speech: someone thanked someone.
    assert not non_speech_phrase("Thank you so much.", 0.05)
    # Anything more than the phrase is speech, however unsure.
    assert not non_speech_phrase("Thank you so much for coming.", 0.45)
    assert not non_speech_phrase("Yeah, yeah, I know.", 0.45)


def test_a_decode_unsure_both_of_speech_and_of_its_words_is_noise() -> None:
    # What tiny.en said on reversed-speech babble: under the no-speech bar, words a guess.
    assert unsure_of_speech(0.47, -1.22)
    # Real speech: sure there is speech though unsure of the words, or the other way round.
    assert not unsure_of_speech(0.02, -0.98)
    assert not unsure_of_speech(0.40, -0.67)
    assert not unsure_of_speech(0.05, -1.5)
