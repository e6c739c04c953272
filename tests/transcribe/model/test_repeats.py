"""Loops and doubled runs are cut on every decode; speech that repeats short words is kept."""

from __future__ import annotations

from kettle.transcribe.model.adapter import without_repeats
from kettle.transcribe.model.decoding import Hypothesis, Thresholds, too_repetitive
from kettle.transcribe.model.repeats import repeat_cut, repeats, run_cut, tail_echo
from kettle.transcribe.types import Word


def words(text: str) -> list[str]:
    return text.split()


def kept(text: str) -> str:
    words = text.split()
    return " ".join(words[i] for i in repeat_cut(words))


def test_a_short_clips_letter_loop_keeps_one_pass() -> None:
    assert kept("s s s s s s s s s s s") == "s"
    assert repeats(words("s s s s s s s s s s s"))


def test_one_word_said_four_times_or_more_is_a_loop() -> None:
    assert kept("Knock. Knock. Knock. Knock. Knock.") == "Knock."
    assert kept("no no no") == "no no no"


def test_a_doubled_run_keeps_its_first_copy() -> None:
    text = "And so my fellow Americans. And so my fellow Americans, ask not"
    assert kept(text) == "And so my fellow Americans. ask not"


def test_a_long_sentence_said_twice_keeps_its_first_copy() -> None:
    sentence = "To the north and in easy reach is the romantic town of Sintra and which was made"
    assert kept(f"{sentence}. {sentence}, famous") == f"{sentence}. famous"
    assert tail_echo(words(f"Seen. {sentence}."), words(f"{sentence} famous")) == 17


def test_speech_that_repeats_short_words_is_kept() -> None:
    for text in ("no no no", "New York New York", "I think I think so", "very very good"):
        assert kept(text) == text
        assert not repeats(text.split())


def test_a_run_said_twice_apart_is_kept() -> None:
    text = "ask what you can do and then ask what you can do"
    assert run_cut(text.split()) == list(range(len(text.split())))


def test_tail_echo_finds_the_run_that_ends_the_previous_text() -> None:
    assert tail_echo(words("And so my fellow Americans."), words("fellow Americans, ask")) == 0
    assert tail_echo(words("so my fellow Americans."), words("so my fellow Americans ask")) == 4
    assert tail_echo(words("ask not"), words("ask not what")) == 0  # under three words


def hypothesis(text: str, ratio: float = 1.2) -> Hypothesis:
    return Hypothesis((1, 2), text, -0.3, 0.01, ratio, 0.0)


def test_a_loop_gzip_cannot_see_asks_for_the_next_temperature() -> None:
    th = Thresholds(no_speech=0.6, log_prob=-1.0, compression_ratio=2.4)
    assert too_repetitive(hypothesis("s s s s s s s s s s s"), th)
    assert not too_repetitive(hypothesis("ask not what your country can do"), th)
    assert too_repetitive(hypothesis("fine", ratio=3.0), th)


def test_a_results_words_lose_the_same_repeats_as_its_text() -> None:
    text = " So my fellow Americans so my fellow Americans ask"
    words = tuple(Word(f" {w}", i * 0.3, i * 0.3 + 0.25, 0.9) for i, w in enumerate(text.split()))
    cut, cut_words = without_repeats(text, words)
    assert cut == " So my fellow Americans ask"
    assert [w.word.strip() for w in cut_words] == cut.split()
    assert without_repeats(" ask not", words[:2]) == (" ask not", words[:2])


def test_a_loop_inside_one_spaced_token_is_cut_by_its_words() -> None:
    # A 0.36 s fragment posted alone came back "Y-Y-Y-Y-Y", one token to a split on spaces;
    # its aligned words ("Y", "-Y", ...) show the loop, and the text follows them.
    words = tuple(
        Word(w, i * 0.05, i * 0.05 + 0.04, 0.5) for i, w in enumerate([" Y"] + ["-Y"] * 4)
    )
    # (" Y" keeps its space when compared, so the "-Y" run is the loop: one "-Y" stays.)
    assert without_repeats(" Y-Y-Y-Y-Y", words) == (" Y-Y", words[:2])
    assert without_repeats(" Y-Y-Y-Y-Y", ()) == (" Y-Y-Y-Y-Y", ())  # no words: nothing seen
