"""Tail windows (tail.py): where a long utterance's later decodes start, how their results are
made whole again, how stable words get their times, and when a tail final fell short."""

from __future__ import annotations

import numpy as np
import pytest
from kettle.streaming.core.events import Event, Final
from kettle.streaming.core.session import Session, SessionConfig
from kettle.streaming.core.tail import (
    TailConfig,
    choose_cut,
    fell_short,
    learn,
    outrun,
    restore,
    wants_times,
)
from kettle.streaming.core.vad import EnergyClassifier
from kettle.transcribe.types import DecodeKind, DecodeRequest, DecodeResult, Word

from tests.streaming.core.conftest import ALONE, play

SR = 16000
CFG = TailConfig(min_s=4.0, margin_s=0.2, keep_words=2, min_saved_s=2.0)


def timed(n: int, step: float = 0.5, start: float = 0.0) -> list[Word]:
    """``n`` words w0..w(n-1), one every ``step`` seconds from ``start``."""
    return [Word(f" w{i}", start + i * step, start + (i + 0.8) * step, 0.9) for i in range(n)]


def test_the_cut_leaves_min_s_after_the_cut_word_and_keeps_words_forced() -> None:
    words = timed(20)  # w_i starts at 0.5 i s
    cut = choose_cut(words, 20, 0, 10 * SR, CFG)
    assert cut is not None
    j = len(cut.lead)
    assert 10.0 - words[j].start >= CFG.min_s  # w12 starts at 6.0: 4 s to the end
    assert 10.0 - words[j + 1].start < CFG.min_s  # the latest such word
    assert cut.start == int((words[j].start - CFG.margin_s) * SR)
    assert cut.lead == tuple(words[:j])
    # With only 14 stable words, at least two stay forced: the cut is at w12 at the latest.
    fewer = choose_cut(words[:14], 14, 0, 20 * SR, CFG)
    assert fewer is not None and len(fewer.lead) == 12


def test_no_cut_for_a_short_window_untimed_words_or_too_little_saved() -> None:
    words = timed(20)
    assert choose_cut(words, 20, 0, int(5.5 * SR), CFG) is None  # saves under 2 s
    assert choose_cut([], 20, 0, 10 * SR, CFG) is None  # no times known
    assert choose_cut(words[:2], 20, 0, 10 * SR, CFG) is None  # only w0, w1 timed
    assert choose_cut(words, 2, 0, 10 * SR, CFG) is None  # every stable word stays forced
    # An utterance that starts later: the saving counts from its start.
    late = timed(20, start=3.0)
    assert choose_cut(late, 20, 3 * SR, int(8.5 * SR), CFG) is None


def test_restore_puts_the_lead_first_in_text_and_window_relative_words() -> None:
    lead = (Word(" Hello", 1.0, 1.4, 0.9), Word(" there,", 1.4, 1.9, 0.8))
    result = DecodeResult(
        "r",
        DecodeKind.FINAL,
        " my friend.",
        (Word(" my", 0.3, 0.5, 0.9), Word(" friend.", 0.5, 1.0, 0.9)),
    )
    whole = restore(result, lead, 2 * SR)
    assert whole.text == "Hello there, my friend."
    assert [(w.word, w.start) for w in whole.words] == [
        (" Hello", -1.0), (" there,", -0.6), (" my", 0.3), (" friend.", 0.5)
    ]  # fmt: skip
    assert restore(result, (), 2 * SR) is result
    failed = DecodeResult("r", DecodeKind.FINAL, "", error="boom")
    assert restore(failed, lead, 2 * SR) is failed
    untimed = restore(DecodeResult("r", DecodeKind.PARTIAL, "my"), lead, 0)
    assert untimed.text == "Hello there, my" and untimed.words == ()


def test_learn_times_the_stable_words_a_hypothesis_reads_and_stops_where_it_differs() -> None:
    words = [Word(" be", 0.0, 0.2, 1), Word(" cold", 0.2, 0.5, 1), Word(" -hearted", 0.5, 0.9, 1)]
    words += [Word(" and", 0.9, 1.1, 1), Word(" kind", 1.1, 1.5, 1)]
    got = learn([], ["be", "cold-hearted", "and"], words, SR)
    assert [(w.word, w.start, w.end) for w in got] == [
        (" be", 1.0, 1.2), (" cold-hearted", 1.2, 1.9), (" and", 1.9, 2.1)
    ]  # fmt: skip
    # A different word ends what is learned; what was known is kept if it was more.
    assert len(learn([], ["be", "cold-hearted", "or"], words, 0)) == 2
    assert learn(got, ["be", "cold"], words, 0) == got


@pytest.mark.parametrize(("heard", "short"), [(True, True), (False, False)])
def test_a_tail_final_fell_short_where_silero_hears_speech_after_its_last_word(
    heard: bool, short: bool
) -> None:
    asked: list[tuple[int, int]] = []

    def speech_in(a: int, b: int) -> bool:
        asked.append((a, b))
        return heard

    result = DecodeResult("r", DecodeKind.FINAL, "to do for", (Word(" for", 3.0, 3.2, 0.9),))
    lead = (Word(" in", 0.0, 0.2, 0.9),)
    assert fell_short(result, lead, 10 * SR, 14 * SR, speech_in) is short
    assert asked == [(10 * SR + int(3.35 * SR), 14 * SR)]
    # A whole window's final, or one without words, is never checked.
    assert not fell_short(result, (), 10 * SR, 14 * SR, speech_in)
    assert not fell_short(DecodeResult("r", DecodeKind.FINAL, ""), lead, 0, SR, speech_in)
    assert len(asked) == 1


def test_a_tail_final_fell_short_where_the_last_partial_read_on_after_its_last_words() -> None:
    assert outrun("in his power to do for", "prudently in his power to do for them. These are")
    assert not outrun("to do for them.", "in his power to do for them.")
    assert not outrun("to do for them.", "in his power to do")  # the partial was behind
    assert not outrun("something else", "in his power to do for them")  # no common end
    assert not outrun("", "words") and not outrun("words", "")
    result = DecodeResult("r", DecodeKind.FINAL, "to do for", (Word(" for", 3.0, 3.2, 0.9),))
    lead = (Word(" in", 0.0, 0.2, 0.9),)
    never = lambda a, b: False  # noqa: E731 (Silero hears nothing after "for")
    assert fell_short(result, lead, 0, 4 * SR, never, "in his power to do for them.")
    assert not fell_short(result, lead, 0, 4 * SR, never, "in his power to do for")
    assert not fell_short(result, (), 0, 4 * SR, never, "in his power to do for them.")


def test_partials_ask_for_word_times_a_second_before_a_cut_can_pay() -> None:
    assert not wants_times(int(4.9 * SR), CFG)
    assert wants_times(5 * SR, CFG)


# --- a session's long utterance -----------------------------------------------------------

SPEECH = (0.5, 12.5)  # seconds of voiced audio
WORD_S = 0.4
SCRIPT = [
    (f"w{i}", SPEECH[0] + i * WORD_S, SPEECH[0] + i * WORD_S + 0.3)
    for i in range(int((SPEECH[1] - SPEECH[0]) / WORD_S))
]
TAIL = SessionConfig(
    **{**ALONE.__dict__, "partial_end_check_s": None, "tail_window_s": 4.0, "word_timestamps": True}
)
WHOLE = SessionConfig(**{**TAIL.__dict__, "tail_window_s": None})


class ScriptDecoder:
    """A model that hears ``SCRIPT``'s words (absolute times) that end inside a request's
    window (its cache key names it), timed from the window's start, from its forced prefix
    on; ``drop_last_in_tail``: a tail window's final (one that starts after the speech)
    leaves out its last word, as tiny.en sometimes does."""

    def __init__(self, *, drop_last_in_tail: bool = False) -> None:
        self.drop_last_in_tail = drop_last_in_tail
        self.requests: list[DecodeRequest] = []

    def decode_batch(self, requests: list[DecodeRequest]) -> list[DecodeResult]:
        out = []
        for r in requests:
            self.requests.append(r)
            assert isinstance(r.cache_key, tuple)
            start, end = r.cache_key[2] / SR, r.cache_key[3] / SR
            heard = [(w, s - start, e - start) for w, s, e in SCRIPT if start < e <= end]
            if r.prefix:  # the text starts with the forced words, as a real decoder's does
                while heard and heard[0][0] != r.prefix.split()[0]:
                    heard.pop(0)
            if self.drop_last_in_tail and r.kind is DecodeKind.FINAL and start > SPEECH[0]:
                heard = heard[:-1]
            text = " ".join(w for w, _, _ in heard)
            words = tuple(Word(f" {w}", max(s, 0.0), e, 0.9) for w, s, e in heard)
            out.append(
                DecodeResult(r.request_id, r.kind, text, words if r.wants_words(text) else ())
            )
        return out


def long_utterance() -> np.ndarray:
    audio = np.zeros(int((SPEECH[1] + 1.5) * SR), np.float32)
    a, b = int(SPEECH[0] * SR), int(SPEECH[1] * SR)
    audio[a:b] = np.random.default_rng(0).normal(0, 0.3, b - a)
    return audio


def finals_of(events: list[Event]) -> list[Final]:
    return [e for e in events if isinstance(e, Final)]


def window(r: DecodeRequest) -> tuple[float, float]:
    """A request's window in stream seconds (its cache key names it)."""
    assert isinstance(r.cache_key, tuple)
    return r.cache_key[2] / SR, r.cache_key[3] / SR


def starts(decoder: ScriptDecoder, kind: DecodeKind) -> list[float]:
    return [window(r)[0] for r in decoder.requests if r.kind is kind]


def test_a_long_utterances_later_decodes_start_near_its_last_stable_words() -> None:
    decoder = ScriptDecoder()
    session = Session(
        TAIL, classifier=EnergyClassifier(), speech_probe=lambda a: np.zeros(len(a) // 512)
    )
    (final,) = finals_of(play(session, decoder, long_utterance()))
    assert final.text == " ".join(w for w, _, _ in SCRIPT)
    # Word times are the script's, in stream seconds, the lead's included.
    assert [round(w.start, 2) for w in final.words] == [round(s, 2) for _, s, _ in SCRIPT]
    tails = [r for r in decoder.requests if window(r)[0] > SPEECH[0] + 1]
    assert tails and any(r.kind is DecodeKind.FINAL for r in tails)
    for r in tails:
        start, end = window(r)
        assert end - start >= 4.0
        lead = [w for w, s, _ in SCRIPT if s < start]
        assert r.prompt is not None and r.prompt.endswith(" ".join(lead))
        assert r.prefix is not None and r.prefix.split()[0] == f"w{len(lead)}"
    # Partials of a long utterance ask for word times, so that stable words get theirs.
    long_partials = [
        r for r in decoder.requests if r.kind is DecodeKind.PARTIAL and window(r)[1] >= 6
    ]
    assert long_partials and all(r.word_timestamps for r in long_partials)


def test_without_tail_windows_every_decode_holds_the_whole_utterance() -> None:
    decoder = ScriptDecoder()
    (final,) = finals_of(
        play(Session(WHOLE, classifier=EnergyClassifier()), decoder, long_utterance())
    )
    assert final.text == " ".join(w for w, _, _ in SCRIPT)
    windows = starts(decoder, DecodeKind.PARTIAL) + starts(decoder, DecodeKind.FINAL)
    assert windows and all(abs(s - SPEECH[0]) <= 0.3 for s in windows)


@pytest.mark.parametrize("speech_after", [True, False])
def test_a_tail_final_that_fell_short_is_decoded_whole(speech_after: bool) -> None:
    probe = 0.9 if speech_after else 0.1
    decoder = ScriptDecoder(drop_last_in_tail=True)
    session = Session(
        TAIL, classifier=EnergyClassifier(), speech_probe=lambda a: np.full(len(a) // 512, probe)
    )
    (final,) = finals_of(play(session, decoder, long_utterance()))
    words = [w for w, _, _ in SCRIPT]
    finals = starts(decoder, DecodeKind.FINAL)
    if speech_after:  # Silero hears the last word: the final is asked again, whole
        assert final.text == " ".join(words)
        assert finals[-1] == pytest.approx(SPEECH[0], abs=0.3) and max(finals) > SPEECH[0] + 1
    else:  # nothing heard after the last word: the tail final stands
        assert final.text == " ".join(words[:-1])
        assert finals[-1] > SPEECH[0] + 1


def test_a_speculative_tail_final_that_fell_short_in_a_pause_speaks_for_that_pause_only() -> None:
    # A 0.3 s pause at 8 s: its speculative final is a tail window that drops its last word
    # and Silero hears speech after it, so it is asked again whole; speech then resumes, and
    # the utterance's later partials start near their stable words again.
    decoder = ScriptDecoder(drop_last_in_tail=True)
    session = Session(
        TAIL, classifier=EnergyClassifier(), speech_probe=lambda a: np.full(len(a) // 512, 0.9)
    )
    audio = long_utterance()
    audio[8 * SR : int(8.3 * SR)] = 0.0
    (final,) = finals_of(play(session, decoder, audio))
    assert final.text == " ".join(w for w, _, _ in SCRIPT)
    tail_start = SPEECH[0] + 1
    in_pause = [window(r) for r in decoder.requests if r.kind is DecodeKind.FINAL]
    assert [start > tail_start for start, end in in_pause if end < 9] == [True, False]
    partials = [r for r in decoder.requests if r.kind is DecodeKind.PARTIAL]
    later = [start for start, end in map(window, partials) if end > 10]
    assert later and all(start > tail_start for start in later)
