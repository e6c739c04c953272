"""The refinement pass: the Refiner's rules alone, then a session with a fake model and no clock.

The fake model's refinement spells "alpha" and "juliet" as ICAO does ("alfa", "juliett"), so a
revision comes exactly for the finals that hold one of them (transcribe/model/fake.py).
"""

from __future__ import annotations

from dataclasses import replace

from kettle.streaming.core.context import ContextHistory, Spoken
from kettle.streaming.core.events import Done, Final, Revision
from kettle.streaming.core.refine import (
    LOOKAHEAD_S,
    PASSES,
    STALE_S,
    Following,
    Refinable,
    Refiner,
    join_words,
)
from kettle.streaming.core.session import SessionConfig
from kettle.transcribe.model.fake import FakeDecoder, scripted_audio
from kettle.transcribe.types import SAMPLE_RATE, DecodeKind, DecodeResult, Word

from tests.streaming.core.conftest import ALONE, drive

SR = SAMPLE_RATE
REFINED = SessionConfig(revisions=True)


def final(
    number: int = 0, start_s: float = 1.0, end_s: float = 3.0, text: str = "a b c"
) -> Refinable:
    words = tuple(
        Word(f" {w}", start_s + i * 0.5, start_s + (i + 1) * 0.5, 0.8)
        for i, w in enumerate(text.split())
    )
    return Refinable(number, int(start_s * SR), int(end_s * SR), text, words, "en")


def result(words: list[tuple[str, float, float, float]], **fields: object) -> DecodeResult:
    ws = tuple(Word(w, s, e, p) for w, s, e, p in words)
    base = DecodeResult("r", DecodeKind.FINAL, join_words(ws), ws, avg_logprob=-0.3)
    return replace(base, **fields)  # type: ignore[arg-type]


def planned(refiner: Refiner, fed_s: float = 8.0, next_start_s: float = 4.0) -> object:
    history = ContextHistory(30 * SR)
    plan = refiner.plan(
        int(fed_s * SR),
        Following(int(next_start_s * SR), int(6.0 * SR)),
        history,
        stopping=False,
        language="en",
    )
    assert plan is not None
    return plan


# --- the Refiner's rules ----------------------------------------------------------------------
def test_due_once_the_next_utterance_ended_or_enough_of_it_was_heard() -> None:
    refiner = Refiner(context_chars=250)
    refiner.published(final())
    history = ContextHistory(30 * SR)
    start = 4 * SR
    assert refiner.plan(5 * SR, None, history, stopping=False, language="en") is None
    heard = start + int(LOOKAHEAD_S * SR)
    still_open = Following(start, None)
    assert refiner.plan(heard - 1, still_open, history, stopping=False, language="en") is None
    plan = refiner.plan(heard, still_open, history, stopping=False, language="en")
    assert plan is not None and (plan.start, plan.end) == (1 * SR, heard)
    closed = Following(start, start + SR // 2)
    plan = refiner.plan(start + SR, closed, history, stopping=False, language="en")
    assert plan is not None and plan.end == start + SR // 2  # the window ends with it


def test_the_window_is_the_final_and_what_followed_with_earlier_text_as_prompt() -> None:
    refiner = Refiner(context_chars=250)
    refiner.published(final())
    history = ContextHistory(30 * SR, prompt="Meeting notes.")
    history.add(Spoken(0, SR // 2, "Hello there.", "en"))
    plan = refiner.plan(20 * SR, Following(4 * SR, 19 * SR), history, stopping=False, language="en")
    assert plan is not None
    assert plan.start == SR  # the final's own start: the earlier text is a prompt, not audio
    assert plan.end == 3 * SR + 10 * SR  # at most MAX_LOOKAHEAD_S after the final
    assert plan.prompt == "Meeting notes. Hello there."
    assert plan.boundary == (3 * SR + 4 * SR) // 2  # the middle of the gap


def test_a_revision_only_when_the_words_differ() -> None:
    refiner = Refiner(context_chars=250)
    refiner.published(final(text="a b c"))
    plan = planned(refiner)
    # Case and punctuation aside, the same words: no revision.
    same = result([(" A", 0.0, 0.5, 0.9), (" b,", 0.5, 1.0, 0.9), (" c.", 1.0, 1.5, 0.9)])
    assert refiner.decoded(plan, same) is None  # type: ignore[arg-type]
    assert refiner.stats.unchanged == 1
    assert len(refiner) == 1  # its second pass is still to come


def test_a_last_word_stretched_over_the_gap_still_belongs_to_the_final() -> None:
    refiner = Refiner(context_chars=250)
    refiner.published(final(text="a b c"))  # 1-3 s; the next utterance starts at 4 s
    plan = planned(refiner)
    # " c." starts inside the final (2.8 s) but alignment stretched it to 4.6 s.
    read = result([(" x", 0.0, 0.5, 0.9), (" b", 0.5, 1.0, 0.9), (" c.", 1.8, 3.6, 0.9),
                   (" next", 3.1, 3.4, 0.9)])  # fmt: skip
    revision = refiner.decoded(plan, read)  # type: ignore[arg-type]
    assert revision is not None and revision.text == "x b c."


def test_no_revision_to_a_reading_that_only_lost_the_last_words() -> None:
    refiner = Refiner(context_chars=250)
    refiner.published(final(text="on the phone"))
    plan = planned(refiner)
    cut = result([(" on", 0.0, 0.5, 0.99), (" the", 0.5, 1.0, 0.99), (" next", 3.1, 3.4, 0.9)])
    assert refiner.decoded(plan, cut) is None  # type: ignore[arg-type]
    assert refiner.stats.kept == 1


def test_a_revision_carries_the_final_number_and_absolute_word_times() -> None:
    refiner = Refiner(context_chars=250)
    refiner.published(final(number=4, text="a b c"))
    plan = planned(refiner)
    # Window-relative times (the window starts at the final's 1.0 s); the word after the
    # gap's middle (3.5 s) belongs to the next utterance.
    got = refiner.decoded(
        plan,  # type: ignore[arg-type]
        result([(" a", 0.0, 0.5, 0.9), (" bee", 0.5, 1.0, 0.9), (" next", 3.2, 3.6, 0.9)]),
    )
    assert isinstance(got, Revision)
    assert (got.utterance, got.text, got.replaced) == (4, "a bee", "a b c")
    assert [(w.word, w.start, w.end) for w in got.words] == [(" a", 1.0, 1.5), (" bee", 1.5, 2.0)]
    assert (got.start, got.end) == (SR, 3 * SR)
    assert refiner.stats.revised == 1


def test_whisper_words_without_a_space_belong_to_the_word_before() -> None:
    words = [Word(" platform", 0, 1, 1), Word(" 7", 1, 2, 1), Word(".5", 2, 3, 1)]
    assert join_words(words) == "platform 7.5"
    assert join_words([Word("alfa", 0, 1, 1), Word("bravo", 1, 2, 1)]) == "alfa bravo"


def test_never_to_a_hypothesis_the_model_is_less_sure_of() -> None:
    cases = [
        result([(" x", 0.0, 0.5, 0.5)]),  # less likely than the final's words (0.8)
        result([(" x", 0.0, 0.5, 0.99)], fallback="repetitive", next_round=1),
        result([(" x", 0.0, 0.5, 0.99)], no_speech_prob=0.95, avg_logprob=-1.5),
        result([(" x", 3.6, 4.0, 0.99)]),  # nothing of the final's own
        result([(" go", 0.0, 0.2, 0.99)] * 12),  # a repetition loop
    ]
    for case in cases:
        refiner = Refiner(context_chars=250)
        refiner.published(final())
        assert refiner.decoded(planned(refiner), case) is None  # type: ignore[arg-type]
        assert refiner.stats.kept == 1


def test_stale_finals_are_skipped_and_the_last_one_at_stop_has_nothing_to_hear() -> None:
    refiner = Refiner(context_chars=250)
    refiner.published(final(0))
    refiner.published(final(1, 4.0, 5.0))
    history = ContextHistory(30 * SR)
    late = 5 * SR + int(STALE_S * SR) + 1
    assert refiner.plan(late, None, history, stopping=True, language="en") is None
    assert (refiner.stats.skipped, refiner.stats.last, len(refiner)) == (2, 0, 0)
    refiner.published(final(2, 30.0, 31.0))
    assert refiner.plan(32 * SR, None, history, stopping=True, language="en") is None
    assert (refiner.stats.skipped, refiner.stats.last, len(refiner)) == (2, 1, 0)


# --- a session with the fake model --------------------------------------------------------------
TURNS = [("silence", 1.0), ("voice", 2.0), ("silence", 1.0), ("voice", 3.0), ("silence", 1.0)]
THREE = scripted_audio([*TURNS, ("voice", 1.5), ("silence", 0.5)])


def test_off_unless_asked() -> None:
    run = drive(THREE, SessionConfig())
    assert not any(r.refinement for r in run.requests)
    assert not any(isinstance(e, Revision) for e in run.events)


def test_each_final_but_the_last_is_refined_twice_and_revised_where_it_reads_otherwise() -> None:
    run = drive(THREE, REFINED)
    finals = run.finals
    revisions = [e for e in run.events if isinstance(e, Revision)]
    assert [f.text.split()[0] for f in finals] == ["alpha"] * 3
    # The last final has nothing after it: only the first two are refined.
    assert [r.utterance for r in revisions] == [0, 1]
    assert [r.text for r in revisions] == [f.text.replace("alpha", "alfa") for f in finals[:2]]
    # Two passes each; the second reads what the first revised to, and sends nothing.
    assert sum(r.refinement for r in run.requests) == 4
    # Each revision comes after its final, and all before done.
    order = [(type(e).__name__, getattr(e, "utterance", None)) for e in run.events]
    for r in revisions:
        assert order.index(("Final", r.utterance)) < order.index(("Revision", r.utterance))
    assert isinstance(run.events[-1], Done) and run.events[-1].utterances == 3


def test_revisions_change_neither_the_live_finals_nor_their_requests() -> None:
    plain = drive(THREE, replace(REFINED, revisions=False))
    refined = drive(THREE, REFINED)
    assert [f.text for f in refined.finals] == [f.text for f in plain.finals]
    live = [r for r in refined.requests if not r.refinement]
    assert [(r.kind, r.cache_key, r.context) for r in live] == [
        (r.kind, r.cache_key, r.context) for r in plain.requests
    ]


def test_revision_words_are_absolute_and_within_their_utterance() -> None:
    run = drive(THREE, replace(ALONE, revisions=True, word_timestamps=True))
    for revision in (e for e in run.events if isinstance(e, Revision)):
        final_ = next(f for f in run.finals if f.utterance == revision.utterance)
        assert revision.words and revision.words[0].start >= final_.start / SR
        assert revision.words[-1].end <= final_.end / SR + 1.0
        assert [w.start for w in revision.words] == [w.start for w in final_.words]


def test_a_refinement_the_engine_drops_is_skipped_and_the_stream_goes_on() -> None:
    from kettle.streaming.core.session import Session
    from kettle.streaming.core.vad import EnergyClassifier

    session = Session(REFINED, session_id="t", classifier=EnergyClassifier())
    decoder = FakeDecoder()
    events = []
    dropped = 0

    def answer() -> int:
        """Decode the live requests; drop every refinement, as the engine does under load."""
        count = 0
        while requests := session.poll_requests():
            for request in requests:
                if request.refinement:
                    session.on_dropped(request.request_id)
                    count += 1
                else:
                    session.on_result(decoder.decode_batch([request])[0])
        return count

    for pos in range(0, len(THREE), 320):
        session.feed_audio(THREE[pos : pos + 320])
        dropped += answer()
        events += session.poll_events()
    session.stop()
    dropped += answer()
    events += session.poll_events()
    assert dropped == 2 and session.refinements is not None
    assert session.refinements.skipped == 2
    assert not any(isinstance(e, Revision) for e in events)
    assert isinstance(events[-1], Done) and events[-1].utterances == 3
    assert [e.utterance for e in events if isinstance(e, Final)] == [0, 1, 2]


def test_at_stop_due_refinements_finish_before_done() -> None:
    # Stop right after the second utterance: its final and the first one's refinement are
    # both still to come, and done waits for them.
    audio = scripted_audio([("silence", 1.0), ("voice", 2.0), ("silence", 1.0), ("voice", 2.0)])
    run = drive(audio, REFINED)
    kinds = [type(e).__name__ for e in run.events if type(e).__name__ != "Partial"]
    assert kinds == ["Final", "Final", "Revision", "Done"] or kinds == [
        "Final",
        "Revision",
        "Final",
        "Done",
    ]


def test_the_second_pass_waits_for_more_audio_and_compares_with_the_first_revision() -> None:
    refiner = Refiner(context_chars=250)
    refiner.published(final(text="a b c"))
    history = ContextHistory(30 * SR)
    following = Following(4 * SR, 5 * SR)
    first = refiner.plan(5 * SR, following, history, stopping=False, language="en")
    assert first is not None and first.end == 5 * SR
    got = refiner.decoded(first, result([(" a", 0.0, 0.5, 0.9), (" bee", 0.5, 1.0, 0.9)]))
    assert got is not None and got.refinement == 1
    after = 3 * SR + int(PASSES[1].after_s * SR)
    assert refiner.plan(after - 1, following, history, stopping=False, language="en") is None
    second = refiner.plan(after, following, history, stopping=False, language="en")
    assert second is not None and second.end == after  # it holds what was heard since
    again = result([(" a", 0.0, 0.5, 0.9), (" bee", 0.5, 1.0, 0.9)])
    assert refiner.decoded(second, again) is None  # the same as the first revision
    assert (refiner.stats.revised, refiner.stats.unchanged, len(refiner)) == (1, 1, 0)


def test_at_stop_a_waiting_final_gets_one_more_refinement_with_all_that_followed() -> None:
    refiner = Refiner(context_chars=250)
    refiner.published(final(text="a b c"))
    history = ContextHistory(30 * SR)
    plan = refiner.plan(6 * SR, Following(4 * SR, 5 * SR), history, stopping=True, language="en")
    assert plan is not None and plan.last and plan.end == 6 * SR  # not just the next utterance
    refiner.decoded(plan, result([(" a", 0.0, 0.5, 0.9)]))
    assert len(refiner) == 0  # no second pass after stop
