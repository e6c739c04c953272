"""A session's live decode results turned into events (pure): a partial's text through the
agreement into a Partial; a final's (or a speculative final's, once the endpoint confirms it)
into a Final and the stream's history; an empty one into nothing (its audio is the next
utterance's context when it was cut mid-speech); a failure into an Error.

Finals come out in the order their utterances closed, numbered without gaps
(``utterances.py`` says how).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kettle.streaming.core.context import ContextHistory, Spoken
from kettle.streaming.core.events import Error, Event, Final, NoTranscript, Partial
from kettle.streaming.core.guard import implausible
from kettle.streaming.core.live_requests import Pending
from kettle.streaming.core.planner import Plan, PlannerConfig, plan_final
from kettle.streaming.core.refine import Refinable
from kettle.streaming.core.refine_lane import RefineLane
from kettle.streaming.core.results import all_echo, final_words, usable
from kettle.streaming.core.speakers import Speakers
from kettle.streaming.core.tail import fell_short, learn, restore
from kettle.streaming.core.utterances import Utterance, UtteranceTracker
from kettle.transcribe.model.nonspeech import STREAM as NONSPEECH
from kettle.transcribe.types import SAMPLE_RATE, DecodeKind, DecodeResult, Word

logger = logging.getLogger(__name__)

# A final that ended this close before an utterance (a client's finalize at a short pause, a
# cut) is its neighbour: the utterance's text never starts by saying its last words again.
# A speaker who repeats a phrase after a real pause keeps it.
ADJACENT = int(0.5 * SAMPLE_RATE)


class Publisher:
    def __init__(
        self,
        session_id: str,
        utts: UtteranceTracker,
        history: ContextHistory,
        speakers: Speakers,
        refine: RefineLane | None,
        emit: Callable[[Event], None],
        *,
        vad_events: bool,
        revisions: bool,
        stable_max_no_speech: float | None = None,
        speech_in: Callable[[int, int], bool] | None = None,
    ) -> None:
        self._session_id = session_id
        self._utts = utts
        self._history = history
        self._speakers = speakers
        self._refine = refine
        self._emit = emit
        # Fields no reconfigure changes: they are read once.
        self._vad_events = vad_events
        self._revisions = revisions
        self._stable_bar = stable_max_no_speech
        # Whether Silero hears speech between two stream positions (a tail final's check).
        self._speech_in = speech_in
        # The plan of each open or unresolved utterance's accepted speculative final, by ordinal.
        self._speculated: dict[int, Plan] = {}

    def resolve_ready(self, planner: PlannerConfig) -> None:
        """Close the utterances at the head of the queue that need no decode."""
        while self._utts.closed:
            utt = self._utts.closed[0]
            assert utt.end is not None
            ready = utt.speculation.ready(utt.end, utt.speech_end)
            if ready is not None:
                self._utts.take(utt)
                # Its words are timed from the speculative window's start (a tail window's
                # may differ from the final's).
                plan = self._speculated.get(utt.ordinal) or plan_final(utt, self._history, planner)
                self._emit_final(utt, ready, plan)
            elif utt.end <= utt.start:
                self._utts.take(utt)
                self._resolve_empty(utt)
            else:
                return

    def partial(self, pending: Pending, result: DecodeResult) -> bool:
        """Show a partial's result; False if it was of no use (its utterance closed, or it
        looked hallucinated)."""
        utt = pending.utterance
        if utt is not self._utts.open:
            return False  # the utterance closed meanwhile; its final supersedes this
        result = restore(result, pending.plan.lead, pending.plan.start)
        if self._rejected(pending.plan, result):
            return False
        self._show(utt, pending.plan, result)
        return True

    def final(self, pending: Pending, result: DecodeResult, *, partials: bool) -> None:
        """A final's result, or a speculative final's (shown as a partial with ``partials``
        while the utterance is open)."""
        utt, plan = pending.utterance, pending.plan
        if self._fell_short(pending, result):
            return  # the planner asks again, for the whole utterance
        result = restore(result, plan.lead, plan.start)
        if self._rejected(plan, result):
            return  # the planner asks again, without context
        if plan.speculative:
            if not utt.speculation.accept(plan.end, result):
                return  # speech resumed: discarded
            self._speculated[utt.ordinal] = plan
            if utt.end is None:
                if partials:
                    # Show the whole utterance's text now: the final will start with it.
                    self._show(utt, plan, result, speculative=True)
                return
            if utt.speculation.ready(utt.end, utt.speech_end) is None:
                return  # the utterance ended elsewhere: the real final is asked for
        if self._utts.take(utt):
            self._emit_final(utt, result, plan)

    def _fell_short(self, pending: Pending, result: DecodeResult) -> bool:
        """A tail window's final that fell short (tail.fell_short): the utterance is decoded
        whole from now on, and the final asked for again."""
        utt, plan = pending.utterance, pending.plan
        if self._speech_in is None:
            return False
        if plan.speculative and not utt.speculation.is_for(plan.end):
            return False  # voided (speech resumed): ``final`` discards it
        start, end, partial = plan.start, plan.heard_until, utt.last_partial_text
        if not fell_short(result, plan.lead, start, end, self._speech_in, partial):
            return False
        utt.whole = True
        self._ask_again(plan, "a tail window's final fell short; decoding it whole")
        return True

    def failure(self, pending: Pending, message: str) -> None:
        """A live request failed for good."""
        utt = pending.utterance
        if pending.kind is DecodeKind.PARTIAL:
            return
        if pending.plan.speculative and utt.end is None:
            utt.speculation.fail()  # no second try in this pause; the endpoint asks again
            return
        if pending.plan.speculative:
            utt.speculation.invalidate()
        if not self._utts.take(utt):
            return
        assert utt.end is not None
        span = f"{utt.start / SAMPLE_RATE:.3f}-{utt.end / SAMPLE_RATE:.3f} s"
        name = f"utterance {utt.number} ({span})" if utt.number is not None else f"audio {span}"
        self._emit(Error("internal", f"could not transcribe {name}: {message}"))
        if utt.number is not None and utt.last_partial_text:
            # The client already saw this number: close it with the best text we have, so
            # finals keep their numbering without gaps.
            self._publish(utt, utt.last_partial_text, (), "en")
        else:
            self._resolve_empty(utt)

    def _rejected(self, plan: Plan, result: DecodeResult) -> bool:
        """A decode in context that reads as a hallucination, or one that says only what came
        before it (results.all_echo): the utterance is decoded alone, without context or
        earlier finals in its prompt, from now on (the result is dropped, and a final asked
        for again)."""
        utt = plan.utterance
        if utt.alone:
            return False
        if all_echo(result, plan, self._neighbour(utt)):
            why = "a decode only said the text before it again; decoding alone"
        elif plan.context.text and implausible(result, (plan.end - utt.start) / SAMPLE_RATE):
            why = "a decode in context looked hallucinated; decoding alone"
        else:
            return False
        utt.alone = True
        self._ask_again(plan, why)
        return True

    def _ask_again(self, plan: Plan, why: str) -> None:
        """Drop ``plan``'s result: the planner asks for the utterance's decode again."""
        logger.info("%s: %s", self._session_id, why)
        if plan.speculative:
            plan.utterance.speculation.invalidate()

    def _show(
        self, utt: Utterance, plan: Plan, result: DecodeResult, *, speculative: bool = False
    ) -> None:
        """A new hypothesis of the open utterance: agreement, then a Partial if not empty.
        One the model doubts is speech shows its words but makes none stable: a stable word
        is forced into the final, and on babble the final found no speech."""
        text = usable(result, plan, self._neighbour(utt))[0]
        if not text and not utt.agreement.stable_text:
            return
        trusted = NONSPEECH.sure_of_speech(result.no_speech_prob, self._stable_bar)
        hyp = utt.agreement.update(text, trusted=trusted)
        if not hyp.text:
            return
        if result.words and trusted:
            stable = utt.agreement.stable_words
            utt.stable_timed = learn(utt.stable_timed, stable, result.words, plan.start)
        number = self._utts.number(utt)
        utt.last_partial_text = hyp.text
        self._emit(Partial(number, utt.start, plan.heard_until, hyp.text, hyp.stable, speculative))

    def _neighbour(self, utt: Utterance) -> Spoken | None:
        """The final that ended just before ``utt`` (ADJACENT), if any."""
        return self._history.neighbour(utt.start, ADJACENT, since=utt.settings.context_from)

    def _emit_final(self, utt: Utterance, result: DecodeResult, plan: Plan) -> None:
        kept, model_words = usable(result, plan, self._neighbour(utt))
        text = utt.agreement.finalize(kept)
        if not text:
            self._resolve_empty(utt)
            return
        timed = utt.settings.word_timestamps or self._revisions
        words = final_words(utt, model_words, plan) if timed else ()
        self._publish(utt, text, words, result.language or "en")

    def _publish(self, utt: Utterance, text: str, words: tuple[Word, ...], language: str) -> None:
        assert utt.end is not None
        self._speculated.pop(utt.ordinal, None)
        number = self._utts.published(utt)
        self._speakers.published(number, utt)
        self._history.add(Spoken(utt.start, utt.end, text, language, utt.sealed, utt.voice))
        self._emit(Final(number, utt.start, utt.end, text, words, language, utt.end_reason))
        if self._refine is not None:
            self._refine.published(Refinable(number, utt.start, utt.end, text, words, language))

    def _resolve_empty(self, utt: Utterance) -> None:
        self._speculated.pop(utt.ordinal, None)
        language = utt.settings.context_language
        if utt.end is not None and utt.end > utt.start and language:
            # Read as nothing: cut mid-speech (a finalize every 100 ms), or a short word the
            # model doubts alone ("Eight." before a 0.2 s pause). Its audio is the next
            # utterance's context, with no text, so its words come back there, in context.
            self._history.add(Spoken(utt.start, utt.end, "", language, utt.sealed, utt.voice))
        if self._vad_events:
            self._emit(NoTranscript(utt.start))
        self._utts.release(utt)
