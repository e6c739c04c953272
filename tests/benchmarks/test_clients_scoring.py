"""benchmarks/_clients.py's scoring rules: repeated-token loops and repeated runs of words,
each counted only where the reference does not say it so."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from _clients import JFK_TEXT, Run, repeated_runs, spans, token_loops, unanswered, wer


@pytest.mark.parametrize(
    ("finals", "loops"),
    [
        (["ask not", "s s s s s s"], ["s s s s s s"]),
        (["no no no, said he"], []),  # the reference says it so
        (["ask not what your country"], []),
    ],
)
def test_token_loops(finals: list[str], loops: list[str]) -> None:
    assert token_loops(finals, "No, no, no, said he. Ask not what your country") == loops


@pytest.mark.parametrize(
    ("finals", "runs"),
    [
        (
            ["And so my fellow Americans. And so my fellow Americans"],
            ["and so my fellow americans"],
        ),
        (["ask not what your country", "what your country can do"], ["what your country"]),
        (["ask not what your country", "can do for you"], []),
        (["ask not what", "what your country"], []),  # one word twice is no run of 3
        # The reference's own "what you can do" and "you ask what" do not count.
        (["can do for you, ask what you can do", "for your country"], []),
    ],
)
def test_repeated_runs(finals: list[str], runs: list[str]) -> None:
    assert repeated_runs(finals, JFK_TEXT) == runs


def test_wer_after_the_normalizer() -> None:
    assert wer(JFK_TEXT, JFK_TEXT.upper().replace(",", "")) == 0.0
    assert wer("ask not", "ask") == 0.5


def test_a_cut_is_unanswered_until_a_final_follows_its_start() -> None:
    run = Run("s", "x", events=[(0.1, "vad_start", ""), (1.0, "vad_stop", "")])
    assert unanswered(run)
    run.events.append((1.2, "final", "hello"))
    assert not unanswered(run)
    # LiveKit's Deepgram stream: the server's end of speech comes after its final.
    run.events += [(2.0, "speech_start", ""), (3.0, "final", "hi"), (3.0, "speech_end", "")]
    assert not unanswered(run)
    assert spans(run) == [(0.1, 1.0), (2.0, 3.0)]
