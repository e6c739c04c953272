"""The refinement pass: each final decoded again once audio after it exists (pure).

A live final is decided before the speaker's next sentence exists; Whisper, trained on 30 s
windows, reads a sentence better when it hears what follows. So each final is decoded twice
more (``PASSES``): once the utterance after it has ended (or ``LOOKAHEAD_S`` of it have been
heard), on a window from its start through that utterance (at most 10 s after it); and once
8 s of audio have followed it, on a window through all of them (at most 15 s, and Whisper's
30 s). The stream's earlier finals are Whisper's previous-text prompt. The final's words are
taken back by their times (those whose middle lies before the middle of the gap to the next
utterance), and if they differ from the final's (or from the first pass's revision) a
Revision follows. At stop every waiting final with audio after it gets one more refinement,
the second pass's, at once; the last one, with none after it, is left as it is.

Two passes, not one: the first comes soon after the final (3.2 s of audio after its end, at
the median, on the benchmark's conversations), the second hears more of what follows, which
is what fixed the sentences the first could not (set m: one pass at the next utterance's end
read 13.5 % WER, one 8 s later 12.4 %, both 11.8 %; live finals 15.2 %). A third would mostly
hear the same, and each costs a decode; a client sees at most two changes per final.

The earlier text enters as a prompt, not forced as the decoder's prefix the way a live
final's context is: forced, the window also held the earlier finals' audio and a revision
made the transcript worse as often as better (set m: 17.4 % WER against 15.7 % live; as a
prompt 13.5 %, RESULTS.md "Rejected experiments").

No churn: a revision is sent only when its words differ from the current text (as docs/protocol.md
compares words: case and punctuation aside), and never to a hypothesis the model is less sure
of: one that failed Whisper's fallback checks (repetitive, unlikely) at temperature 0, one
the non-speech policy would drop, one with a repetition loop, an empty one, one that only
drops the current text's last words (cut at the window's edge), or one whose words' mean log
probability is below the current text's by more than ``CHURN_MARGIN``.

A final that waited ``STALE_S`` of audio without its refinement is skipped (the engine drops
refinements under load too); this bounds the audio a stream keeps for it.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from kettle.streaming.core.agreement import normalized, split_words
from kettle.streaming.core.context import PROMPT_CHARS, ContextHistory
from kettle.streaming.core.events import Revision
from kettle.streaming.core.guard import loop_cut
from kettle.transcribe.model.nonspeech import STREAM as NONSPEECH
from kettle.transcribe.types import MAX_WINDOW_SAMPLES, SAMPLE_RATE, DecodeResult, Word

logger = logging.getLogger(__name__)

LOOKAHEAD_S = 2.0  # of the next utterance heard: enough to refine without waiting for its end
STALE_S = 20.0  # audio after a final past which its refinement is skipped
CHURN_MARGIN = 0.0  # mean log word probability a revision may give up against the final
_MIN_PROBABILITY = 1e-6
TOKEN_MARGIN = 12  # tokens a refinement may decode past the final's own (about 3 per word)
_KEPT_FINALS = 16  # recent finals' spans, for what follows a final still waiting


@dataclass(frozen=True)
class Pass:
    """One refinement of each final: due once ``after_s`` of audio followed the final's end
    (and the next utterance ended, or ``LOOKAHEAD_S`` of it were heard); its window holds at
    most ``lookahead_s`` after the final."""

    after_s: float
    lookahead_s: float


# The first pass comes as soon as the next utterance ended, the second once 8 s followed
# (RESULTS.md, "bench_accuracy_refine").
PASSES = (Pass(0.0, 10.0), Pass(8.0, 15.0))


@dataclass
class Refinable:
    """A published final waiting for its refinements."""

    number: int
    start: int
    end: int
    text: str  # the final's text, or its latest revision's
    words: tuple[Word, ...]  # absolute stream seconds, from the decode of ``text``
    language: str
    passes: int = 0  # refinements done


@dataclass(frozen=True)
class Following:
    """The utterance after a final: where it starts, and where it ended (None: still open)."""

    start: int
    end: int | None


@dataclass(frozen=True)
class RefinePlan:
    target: Refinable
    start: int  # window start: the target's own
    end: int  # window end
    boundary: int  # words whose middle lies before this belong to the target
    prompt: str  # the stream's earlier text, Whisper's previous-text prompt
    # New tokens the decoder may generate: the final's words and a few of what follows. The
    # encoder hears the whole window; the decoder need not write out the lookahead.
    max_tokens: int
    last: bool = False  # the final's last refinement, whatever passes remain (at stop)


@dataclass
class RefineStats:
    """What became of the refinements, one count per pass of each final."""

    revised: int = 0  # a revision was sent
    unchanged: int = 0  # the refinement read the same words
    kept: int = 0  # it read others, but the model was less sure of them
    skipped: int = 0  # no refinement ran (load, failure, or stale)
    last: int = 0  # nothing followed it before the stream stopped


class Refiner:
    """The finals of one stream that wait for a refinement, oldest first."""

    def __init__(
        self,
        *,
        context_chars: int,
        passes: tuple[Pass, ...] = PASSES,
        stale_s: float = STALE_S,
    ) -> None:
        self._queue: deque[Refinable] = deque()
        self._finals: deque[Following] = deque(maxlen=_KEPT_FINALS)  # recent finals' spans
        self._context_chars = context_chars
        self._passes = passes
        self._stale = int(stale_s * SAMPLE_RATE)
        self.stats = RefineStats()

    def __len__(self) -> int:
        return len(self._queue)

    def published(self, final: Refinable) -> None:
        self._queue.append(final)
        self._finals.append(Following(final.start, final.end))

    def earliest_needed(self) -> int | None:
        """The start of the oldest final still to refine (its window starts there)."""
        return min((f.start for f in self._queue), default=None)

    def plan(
        self,
        fed: int,
        beyond: Following | None,
        history: ContextHistory,
        *,
        stopping: bool,
        language: str | None,
    ) -> RefinePlan | None:
        """The next refinement to ask for, if one is due, oldest final first. ``beyond`` is
        the utterance after the last final (closed or open; None: none has started)."""
        for target in list(self._queue):
            if fed - target.end > self._stale:
                self._queue.remove(target)
                self.stats.skipped += 1
                continue
            following = self._following(target, beyond)
            if following is None or following.start >= fed:
                if stopping:
                    self._queue.remove(target)  # nothing follows it: nothing new to hear
                    self.stats.last += 1
                continue
            plan = self._plan(target, following, fed, history, stopping, language)
            if plan is not None:
                return plan
        return None

    def _plan(
        self,
        target: Refinable,
        following: Following,
        fed: int,
        history: ContextHistory,
        stopping: bool,
        language: str | None,
    ) -> RefinePlan | None:
        # At stop each final gets one more refinement at most, the widest: done comes soon.
        step = self._passes[-1] if stopping else self._passes[target.passes]
        heard = following.end is not None or fed - following.start >= LOOKAHEAD_S * SAMPLE_RATE
        waited = fed - target.end >= step.after_s * SAMPLE_RATE
        if not stopping and not (heard and waited):
            return None
        end = fed if following.end is None or step.after_s > 0 else following.end
        end = min(end, fed, target.end + int(step.lookahead_s * SAMPLE_RATE))
        end = min(end, target.start + MAX_WINDOW_SAMPLES)
        context = history.context(target.start, end, language, self._context_chars)
        prompt = f"{context.prompt} {context.text}".strip()[-PROMPT_CHARS:]
        gap_start, gap_end = target.end, max(target.end, following.start)
        boundary = (gap_start + gap_end) // 2
        budget = len(target.text) // 3 + TOKEN_MARGIN
        return RefinePlan(target, target.start, end, boundary, prompt, budget, last=stopping)

    def _following(self, final: Refinable, beyond: Following | None) -> Following | None:
        for later in self._finals:
            if later.start > final.start:
                return later
        return beyond

    def skipped(self, target: Refinable) -> None:
        """Its refinement did not run (dropped under load, or failed)."""
        self._remove(target)
        self.stats.skipped += 1

    def decoded(self, plan: RefinePlan, result: DecodeResult) -> Revision | None:
        """The refinement's result: a Revision when it reads other words, sure enough."""
        target = plan.target
        target.passes += 1
        if target.passes >= len(self._passes) or plan.last:
            self._remove(target)
        words = _target_words(plan, result)
        if words is None:
            self.stats.kept += 1
            return None
        text = join_words(words)
        new, current = normalized(split_words(text)), normalized(split_words(target.text))
        if new == current:
            self.stats.unchanged += 1
            return None
        if len(new) < len(current) and current[: len(new)] == new:
            self.stats.kept += 1  # the same words, its last ones lost at the window's edge
            return None
        logger.debug(
            "refinement of final %d: %r -> %r, mean log p %.3f -> %.3f",
            target.number,
            target.text,
            text,
            mean_log_probability(target.words) if target.words else math.nan,
            mean_log_probability(words),
        )
        if target.words and mean_log_probability(words) < (
            mean_log_probability(target.words) - CHURN_MARGIN
        ):
            self.stats.kept += 1
            return None
        self.stats.revised += 1
        end = max(target.end, round(words[-1].end * SAMPLE_RATE))
        replaced, target.text, target.words = target.text, text, words
        return Revision(
            target.number, target.start, end, text, words, result.language, replaced, target.passes
        )

    def _remove(self, target: Refinable) -> None:
        if target in self._queue:
            self._queue.remove(target)


def _target_words(plan: RefinePlan, result: DecodeResult) -> tuple[Word, ...] | None:
    """The target's words of a refinement, in absolute stream seconds; None when the
    hypothesis is not one to revise to (see the module docstring)."""
    if result.error is not None or result.fallback is not None or result.next_round is not None:
        return None
    if NONSPEECH.drops(result.text, result.no_speech_prob, result.avg_logprob):
        return None
    offset = plan.start / SAMPLE_RATE
    first, boundary = plan.target.start / SAMPLE_RATE, plan.boundary / SAMPLE_RATE
    final_end = plan.target.end / SAMPLE_RATE
    words = []
    # Cut at the token budget before the next utterance began, the last word may be cut.
    reached = len(result.tokens) < plan.max_tokens
    for w in result.words:
        start, end = max(w.start + offset, first), max(w.end + offset, first)
        # A sentence's last word that alignment stretched over the gap still starts inside
        # the final ("...on the phone." read as "...on the" lost it).
        if (start + end) / 2 >= boundary and start >= final_end:
            reached = True
            break
        end = min(end, boundary)  # a word stretched over the gap ends where the next begins
        words.append(Word(w.word, round(start, 3), round(end, 3), w.probability))
    tokens = [w.word for w in words]
    if not reached or not words or len(loop_cut(tokens)) < len(tokens):
        return None
    return tuple(words)


def join_words(words: Sequence[Word]) -> str:
    """The words' text. Whisper's words carry their leading space, and a piece without one
    (".5" after "7") belongs to the word before; words without any space are joined by one."""
    if words and words[0].word[:1].isspace():
        return "".join(w.word for w in words).strip()
    return " ".join(w.word.strip() for w in words)


def mean_log_probability(words: Sequence[Word]) -> float:
    """The words' mean log probability (the model's certainty of a hypothesis)."""
    return sum(math.log(max(w.probability, _MIN_PROBABILITY)) for w in words) / len(words)
