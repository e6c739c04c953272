"""Words as Deepgram's and AssemblyAI's unformatted messages show them."""

from __future__ import annotations

import pytest
from kettle.streaming.protocols.words import plain_transcript, plain_word, word_fields


@pytest.mark.parametrize(
    ("display", "plain"),
    [
        ("Cold-hearted,", "cold-hearted"),  # one word, not the non-word "coldhearted"
        ("twenty-five.", "twenty-five"),
        ("Quilter's", "quilter's"),
        ("'em,", "em"),
        ("--", ""),
        ("well -", "well"),
        ('"test"-run', "testrun"),  # a hyphen after a quote joins no two letters
    ],
)
def test_a_plain_word_keeps_only_inner_hyphens_and_apostrophes(display: str, plain: str) -> None:
    assert plain_word(display) == plain


def test_the_plain_transcript_and_its_words_agree() -> None:
    text = "Unless to be rather cold-hearted -- and ill-disposed."
    assert plain_transcript(text) == "unless to be rather cold-hearted and ill-disposed"
    assert word_fields("ill-disposed.", 0.0, 0.5, 0.9)["word"] == "ill-disposed"
