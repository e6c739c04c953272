"""LocalAgreement-n: stable prefixes never change and every text starts with them."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from kettle.streaming.core.agreement import Agreement, normalize_word, normalized, split_words


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("Hello,", "hello"),
        ("don't", "don't"),
        ("'quoted'", "quoted"),
        ("rock'n'roll!", "rock'n'roll"),
        ("U.S.A.", "usa"),
        ("\u201cWell\u201d", "well"),
        ("it\u2019s", "it's"),
        ("--", ""),
    ],
)
def test_normalize_word(word: str, expected: str) -> None:
    assert normalize_word(word) == expected


def test_punctuation_only_tokens_stick_to_a_word() -> None:
    assert split_words("well - I mean ...") == ["well -", "I", "mean ..."]
    assert split_words("- hi there") == ["- hi", "there"]


def test_two_agreeing_hypotheses_make_words_stable() -> None:
    a = Agreement()
    assert a.update("The quick").stable == ""
    hyp = a.update("The quick brown")
    assert hyp.stable == "The quick" and hyp.text == "The quick brown"
    hyp = a.update("the quick brown fox")
    # Stable words keep their first display form; the comparison ignores case.
    assert hyp.stable == "The quick brown"
    assert hyp.text == "The quick brown fox"


def test_three_way_agreement_needs_every_one_of_the_last_three() -> None:
    a = Agreement(agree=3)
    assert a.update("the cat").stable == ""
    assert a.update("the cat sat").stable == ""  # two agree, three are needed
    assert a.update("the bat sat on").stable == "the"  # the oldest of the three said "cat"
    assert a.update("the bat sat on the").stable == "the"  # "cat" is still among the three
    assert a.update("the bat sat on the mat").stable == "the bat sat on"
    with pytest.raises(ValueError):
        Agreement(agree=1)


def test_the_first_stable_words_may_need_fewer_agreeing_hypotheses_than_the_rest() -> None:
    a = Agreement(agree=3, first=2)
    assert a.update("the cat").stable == ""
    assert a.update("the cat sat").stable == "the cat"  # two agree on the first words
    assert a.update("the cat sat on").stable == "the cat"  # "on" is new: three are needed
    assert a.update("the cat sat on the").stable == "the cat sat"  # three agree on "sat"
    with pytest.raises(ValueError):
        Agreement(agree=3, first=1)


def test_an_untrusted_hypothesis_stabilizes_nothing_and_breaks_the_run() -> None:
    a = Agreement(holdback=0, agree=3)
    a.update("yeah that is")
    assert a.update("yeah that is", trusted=False).stable == ""
    assert a.update("yeah that is").stable == ""  # two trusted in a row so far, not three
    a.update("yeah that is")
    assert a.update("yeah that is").stable == "yeah that is"


def test_disagreement_does_not_touch_stable_words() -> None:
    a = Agreement()
    a.update("I scream for")
    a.update("I scream for ice")
    hyp = a.update("Ice cream for ice cream")  # the model changed its mind about the start
    # Spliced after the stable words, the new text agrees with the last one on "ice".
    assert hyp.text == "I scream for ice cream"
    assert hyp.stable == "I scream for ice"
    assert a.finalize("Ice cream for ice cream.") == "I scream for ice cream."


def test_final_that_agrees_keeps_its_punctuation() -> None:
    a = Agreement()
    a.update("hello world how")
    a.update("hello world how are")
    assert a.finalize("Hello, world! How are you?") == "hello world how are you?"


def test_final_missing_the_stable_words_gets_them_spliced_in() -> None:
    a = Agreement()
    a.update("one two three")
    a.update("one two three four")
    assert a.finalize("") == "one two three"
    assert a.finalize("two three four five") == "one two three four five"


@settings(max_examples=60, deadline=None)
@example([["-"], ["-"], ["a", "a"]])  # a punctuation-only text must not become stable
@given(
    st.lists(
        st.lists(st.sampled_from(["a", "b", "c", "The", "the,", "don't", "-", "x."]), max_size=8),
        min_size=1,
        max_size=12,
    )
)
def test_stable_text_only_grows_and_prefixes_every_text(hyps: list[list[str]]) -> None:
    a = Agreement()
    previous: list[str] = []
    for words in hyps:
        hyp = a.update(" ".join(words))
        stable = normalized(split_words(hyp.stable))
        assert stable[: len(previous)] == previous
        assert normalized(split_words(hyp.text))[: len(stable)] == stable
        previous = stable
    final = normalized(split_words(a.finalize(" ".join(hyps[-1]))))
    assert final[: len(previous)] == previous
