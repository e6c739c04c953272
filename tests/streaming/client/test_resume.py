"""The client's bookkeeping for resuming a stream on a new session (pure)."""

from __future__ import annotations

import pytest
from kettle.streaming.client.resume import Timeline, backoff_s, retry_after_s


def test_first_session_passes_messages_through_and_commits_finals() -> None:
    tl = Timeline(16000)
    assert tl.begin_session() == 0
    final = {"type": "final", "utterance": 0, "start": 0.5, "end": 2.25, "text": "a"}
    assert tl.shift(final) is final
    assert tl.committed == 36000 and tl.finals == 1
    partial = {"type": "partial", "utterance": 1, "start": 3.0, "end": 3.5, "text": "b"}
    assert tl.shift(partial) is partial
    assert tl.committed == 36000  # partials commit nothing


def test_a_new_session_resends_from_the_last_final_and_continues_the_clock() -> None:
    tl = Timeline(16000)
    tl.begin_session()
    tl.shift({"type": "final", "utterance": 0, "start": 0.5, "end": 2.25, "text": "a"})
    tl.shift({"type": "partial", "utterance": 1, "start": 3.0, "end": 3.5, "text": "lost"})
    assert tl.begin_session() == 36000  # audio after 2.25 s is sent again
    words = [{"word": "b", "start": 0.75, "end": 1.0, "probability": 0.9}]
    raw = {"type": "final", "utterance": 0, "start": 0.75, "end": 1.5, "text": "b", "words": words}
    final = tl.shift(raw)
    assert final["utterance"] == 1  # numbered on, no gap
    assert (final["start"], final["end"]) == (3.0, 3.75)
    assert final["words"][0]["start"] == 3.0 and final["words"][0]["end"] == 3.25
    assert raw["start"] == 0.75 and words[0]["start"] == 0.75  # the server's copy is untouched
    assert tl.committed == 36000 + 24000
    done = tl.shift({"type": "done", "audio_seconds": 4.0, "utterances": 1})
    assert done == {"type": "done", "audio_seconds": 6.25, "utterances": 2}


def test_a_session_that_sent_no_final_resends_the_same_audio() -> None:
    tl = Timeline(16000)
    tl.begin_session()
    tl.shift({"type": "final", "utterance": 0, "start": 0.0, "end": 1.0, "text": "a"})
    assert tl.begin_session() == 16000
    tl.shift({"type": "partial", "utterance": 0, "start": 0.5, "end": 1.0, "text": "x"})
    assert tl.begin_session() == 16000
    final = tl.shift({"type": "final", "utterance": 0, "start": 0.5, "end": 1.0, "text": "x"})
    assert final["utterance"] == 1 and final["start"] == 1.5


def test_backoff_doubles_to_a_cap_with_bounded_jitter() -> None:
    assert backoff_s(0, lambda: 0.5) == 0.5
    assert backoff_s(3, lambda: 0.5) == 4.0
    assert backoff_s(20, lambda: 0.5) == 10.0
    assert backoff_s(0, lambda: 0.0) == pytest.approx(0.4)
    assert backoff_s(0, lambda: 1.0) == pytest.approx(0.6)


def test_retry_after() -> None:
    assert retry_after_s("3") == 3.0
    assert retry_after_s(" 1000 ") == 30.0
    assert retry_after_s(None) is None
    assert retry_after_s("soon") is None
    assert retry_after_s("-1") is None


def test_a_revision_is_shifted_like_its_final_and_commits_nothing() -> None:
    tl = Timeline(16000)
    tl.begin_session()
    tl.shift({"type": "final", "utterance": 0, "start": 0.0, "end": 1.0, "text": "a"})
    tl.begin_session()
    tl.shift({"type": "final", "utterance": 0, "start": 0.25, "end": 0.5, "text": "b"})
    words = [{"word": "c", "start": 0.25, "end": 0.75}]
    raw = {"type": "revision", "utterance": 0, "start": 0.25, "end": 0.75, "words": words}
    revision = tl.shift(raw)
    assert (revision["utterance"], revision["start"], revision["end"]) == (1, 1.25, 1.75)
    assert revision["words"][0]["end"] == 1.75 and raw["start"] == 0.25
    assert tl.committed == 24000 and tl.finals == 2  # a revision is no new final
    assert tl.revised_utterance(revision) == 1


def test_a_revision_reaches_only_a_final_of_its_own_session() -> None:
    tl = Timeline(16000)
    tl.begin_session()
    for n in range(2):
        tl.shift({"type": "final", "utterance": n, "start": n, "end": n + 0.5, "text": "a"})
    assert tl.revised_utterance({"type": "revision", "utterance": 1}) == 1
    assert tl.revised_utterance({"type": "revision", "utterance": 2}) is None  # no final yet
    tl.begin_session()
    tl.shift({"type": "final", "utterance": 0, "start": 0.0, "end": 0.5, "text": "b"})

    def revises(session_number: object) -> int | None:
        raw = {"type": "revision", "utterance": session_number, "start": 0.0, "end": 0.5}
        return tl.revised_utterance(tl.shift(raw))

    assert revises(0) == 2  # this session's final 0, not the first session's
    assert revises(1) is None  # the first session had a final 1; this one has none
    assert revises(-1) is None and revises(-2) is None  # earlier sessions' finals
    assert revises(True) is None and revises("0") is None and revises(None) is None
