"""Context across a client's forced finals, and no run said twice by adjacent finals."""

from __future__ import annotations

from kettle.streaming.core.agreement import Agreement
from kettle.streaming.core.config import SessionConfig
from kettle.streaming.core.context import Context, ContextHistory, Spoken
from kettle.streaming.core.planner import Plan
from kettle.streaming.core.results import all_echo, usable
from kettle.streaming.core.utterances import UtteranceTracker
from kettle.transcribe.model.fake import FakeDecoder, scripted_audio
from kettle.transcribe.types import SAMPLE_RATE as SR
from kettle.transcribe.types import DecodeKind, DecodeRequest, DecodeResult

from tests.streaming.core.conftest import drive, window_key


def history(*spoken: Spoken) -> ContextHistory:
    h = ContextHistory(30 * SR)
    for s in spoken:
        h.add(s)
    return h


def test_a_forced_final_the_next_utterance_goes_on_from_is_context() -> None:
    forced = Spoken(1 * SR, 3 * SR, "And so my fellow Americans", "en", sealed=False)
    ctx = history(forced).context(3 * SR, 5 * SR, "en", 400)
    assert ctx.finals == ("And so my fellow Americans",) and ctx.start == 1 * SR


def test_no_context_reaches_across_a_forced_final_with_uncovered_audio_after_it() -> None:
    forced = Spoken(1 * SR, 3 * SR, "And so my fellow Americans", "en", sealed=False)
    ctx = history(forced).context(4 * SR, 6 * SR, "en", 400)
    assert ctx.finals == () and ctx.start == 4 * SR


def test_neighbour_is_the_final_that_ended_just_before() -> None:
    h = history(Spoken(1 * SR, 3 * SR, "a b c", "en"))
    assert h.neighbour(3 * SR + SR // 10, SR // 2) is not None
    assert h.neighbour(5 * SR, SR // 2) is None
    assert history().neighbour(SR, SR) is None


def plan(context: Context, end: int = 5 * SR) -> Plan:
    tracker = UtteranceTracker()
    utt = tracker.start(3 * SR, Agreement(0, 2), SessionConfig().utterance_settings())
    return Plan(utt, DecodeKind.FINAL, context.start, end, context, "")


def near(text: str, *, start: int = 1 * SR, sealed: bool = True) -> Spoken:
    """The final that ended just before ``plan``'s utterance (at 3 s)."""
    return Spoken(start, 3 * SR, text, "en", sealed)


def result(text: str) -> DecodeResult:
    return DecodeResult(request_id="r", kind=DecodeKind.FINAL, text=text, avg_logprob=-0.2)


def test_an_adjacent_finals_words_said_again_are_cut_even_from_its_start() -> None:
    ctx = Context(1 * SR, ("And so my fellow Americans.",), "")
    said = result(" And so my fellow Americans, ask not")
    assert usable(said, plan(ctx), near("And so my fellow Americans."))[0] == "ask not"
    # After a real pause a speaker who starts again as before keeps the words.
    assert usable(said, plan(ctx))[0] == "And so my fellow Americans, ask not"


def test_a_doubled_run_inside_one_decode_is_cut() -> None:
    said = result(" And so my fellow Americans. And so my fellow Americans")
    assert usable(said, plan(Context(3 * SR, (), "")))[0] == "And so my fellow Americans."


def test_a_decode_that_only_says_the_adjacent_final_again_is_kept() -> None:
    ctx = Context(1 * SR, ("ten of clubs",), "")
    assert usable(result(" ten of clubs"), plan(ctx), near("ten of clubs"))[0] == "ten of clubs"
    assert not all_echo(result(" ten of clubs"), plan(ctx), near("ten of clubs"))
    # Unless that final was forced mid-speech and this goes on from it: its audio, again.
    said = result(" You can call me Abby.")
    forced = Context(1 * SR, ("You can call me Abby.",), "")
    abby = near("You can call me Abby.", sealed=False)
    assert usable(said, plan(forced), abby)[0] == ""
    assert not all_echo(said, plan(forced), abby)  # nothing to decode again: it was said


SINTRA = (
    "To the north and within easy reach is the romantic and fascinating town of Sintra and"
    " which was made famous."
)


def test_a_long_final_said_again_whole_by_the_next_decode_is_cut() -> None:
    # A voice agent's call (issue 40): the model read its 19-word context again, then went on.
    new = "To foreigners after a glowing account"
    said = result(f" {SINTRA} {new}")
    first = near(SINTRA, start=0)
    for ctx in (Context(0, (SINTRA,), ""), Context(3 * SR, (), SINTRA)):  # forced, or prompt
        assert usable(said, plan(ctx, end=6 * SR), first)[0] == new


def test_a_decode_too_short_to_say_the_final_before_again_read_its_context() -> None:
    first = near(SINTRA, start=0)  # 3 s to say it
    ctx = Context(0, (SINTRA,), "")
    early = plan(ctx, end=3 * SR + SR)  # 1 s of the next utterance heard
    assert usable(result(f" {SINTRA}"), early, first)[0] == ""
    assert all_echo(result(f" {SINTRA}"), early, first)
    # As long as the first time: the speaker may have said it again.
    later = plan(ctx, end=6 * SR)
    assert usable(result(f" {SINTRA}"), later, first)[0] == SINTRA


def test_a_decode_that_says_only_a_phrase_of_its_context_is_asked_again_alone() -> None:
    # Speculative finals of an utterance that opened after a turn read their context again,
    # from much less audio than the phrase took (1.5 s) or much more (other words).
    said = ("He said hello.", "Your power is sufficient, I said.")
    ctx = Context(0, said, "", ((0, 1 * SR), (1 * SR, int(3.25 * SR))))
    power = result(" Your power is sufficient.")
    assert all_echo(power, plan(ctx, end=int(3.5 * SR)), None)
    assert all_echo(power, plan(ctx, end=8 * SR), None)
    assert not all_echo(power, plan(ctx, end=int(4.5 * SR)), None)  # a speaker's, again
    assert not all_echo(result(" Your power is great."), plan(ctx, end=int(3.5 * SR)), None)
    assert not all_echo(result(" I said."), plan(ctx, end=int(3.5 * SR)), None)  # too few


def test_an_earlier_utterances_prompt_holds_only_the_finals_before_it() -> None:
    # A refinement of final 1 is prompted with final 0, never with its own text or final 2's.
    h = history(
        Spoken(0, 2 * SR, "zero.", "en"),
        Spoken(3 * SR, 5 * SR, "one.", "en"),
        Spoken(6 * SR, 8 * SR, "two.", "en"),
    )
    ctx = h.context(3 * SR, 9 * SR, None, 400)
    assert ctx.prompt == "zero."
    taken = h.context(3 * SR, 9 * SR, "en", 400)
    assert taken.finals == ("zero.",) and taken.prompt == ""


def test_a_new_request_takes_no_final_before_it_as_context_prompt_or_neighbour() -> None:
    h = history(Spoken(0, 2 * SR, "zero.", "en"), Spoken(2 * SR, 3 * SR, "one.", "en"))
    assert h.context(3 * SR, 5 * SR, "en", 400).finals == ("zero.", "one.")
    ctx = h.context(3 * SR, 5 * SR, "en", 400, request_from=2 * SR)
    assert (ctx.finals, ctx.start, ctx.prompt) == (("one.",), 2 * SR, "")
    ctx = h.context(3 * SR, 5 * SR, None, 400, request_from=3 * SR)  # no context: prompt only
    assert (ctx.finals, ctx.start, ctx.prompt) == ((), 3 * SR, "")
    assert h.neighbour(3 * SR, SR // 2) is not None
    assert h.neighbour(3 * SR, SR // 2, since=3 * SR) is None


def test_an_utterance_whose_decode_read_the_final_before_again_is_decoded_alone() -> None:
    # The model reads its context again rather than the next utterance's first second of
    # audio: that decode is dropped and the utterance decoded without context or prompt.
    first = "one two three four five six seven eight"

    def text_for(r: DecodeRequest) -> str:
        if window_key(r)[1] == 0:
            return first
        if r.context:
            return r.context  # (after its context: the context once more)
        return first if r.prompt and first in r.prompt else "new words here"  # (its prompt too)

    audio = scripted_audio([("voice", 4.0), ("silence", 0.6), ("voice", 1.6), ("silence", 1.5)])
    run = drive(audio, SessionConfig(), decoder=FakeDecoder(text_for=text_for))
    assert [f.text for f in run.finals] == [first, "new words here"]
    assert not any(first in p.text for p in run.partials if p.utterance == 1)


def test_a_speaker_who_says_the_final_before_again_keeps_it() -> None:
    audio = scripted_audio([("voice", 1.6), ("silence", 0.6), ("voice", 1.6), ("silence", 1.5)])
    run = drive(audio, SessionConfig(), decoder=FakeDecoder(text_for=lambda r: "ten of clubs"))
    assert [f.text for f in run.finals] == ["ten of clubs", "ten of clubs"]
