"""The refinement pass: each final decoded again once audio after it exists (pure).

A live final is decided before the speaker's next sentence exists; Whisper, trained on 30 s
windows, reads a sentence better when it hears what follows. So once the utterance after
final *n* has ended, or ``LOOKAHEAD_S`` of it have been heard, a refinement decodes a window
that holds *n* with the finals before it (forced as the decoder's prefix, like a live
final's context) and the audio after it, up to ``MAX_LOOKAHEAD_S`` and Whisper's 30 s. *n*'s
words are taken back by their times (those whose middle lies before the middle of the gap to
the next utterance), and if they differ from the final's a Revision follows.

Each final is refined once: the window already holds its left context and the next
utterance, so a second look would mostly hear the same; a client sees at most one change per
final, and the cost stays one decode per utterance.

No churn: a revision is sent only when its words differ from the final's (as PROTOCOL.md
compares words: case and punctuation aside), and never to a hypothesis the model is less sure
of: one that failed Whisper's fallback checks (repetitive, unlikely) at temperature 0, one
the non-speech policy would drop, one with a repetition loop, an empty one, or one whose
words' mean log probability is below the final's by more than ``CHURN_MARGIN``.

A final that waited ``STALE_S`` of audio without its refinement is skipped (the engine drops
refinements under load too, ``on_skipped``); this bounds the audio a stream keeps for it.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from kettle.streaming.core.agreement import normalized, split_words
from kettle.streaming.core.context import Context, ContextHistory
from kettle.streaming.core.events import Revision
from kettle.streaming.core.guard import loop_cut
from kettle.transcribe.nonspeech import STREAM as NONSPEECH
from kettle.transcribe.types import MAX_WINDOW_SAMPLES, SAMPLE_RATE, DecodeResult, Word

LOOKAHEAD_S = 2.0  # of the next utterance heard: enough to refine without waiting for its end
MAX_LOOKAHEAD_S = 10.0  # audio after the final that a refinement window holds at most
STALE_S = 20.0  # audio after a final past which its refinement is skipped
CHURN_MARGIN = 0.0  # mean log word probability a revision may give up against the final
_MIN_PROBABILITY = 1e-6


@dataclass
class Refinable:
    """A published final waiting for its refinement."""

    number: int
    start: int
    end: int
    text: str
    words: tuple[Word, ...]  # absolute stream seconds, from the final's own decode
    language: str


@dataclass(frozen=True)
class Following:
    """The utterance after a final: where it starts, and where it ended (None: still open)."""

    start: int
    end: int | None


@dataclass(frozen=True)
class RefinePlan:
    target: Refinable
    start: int  # window start (an earlier final's start, or the target's)
    end: int  # window end
    boundary: int  # words whose middle lies before this belong to the target
    context: Context


@dataclass
class RefineStats:
    """What became of the finals offered for refinement."""

    revised: int = 0  # a revision was sent
    unchanged: int = 0  # the refinement read the same words
    kept: int = 0  # it read others, but the model was less sure of them
    skipped: int = 0  # no refinement ran (load, failure, or stale)
    last: int = 0  # nothing followed it before the stream stopped


class Refiner:
    """The finals of one stream that wait for their refinement, oldest first."""

    def __init__(self, *, context_chars: int, stale_s: float = STALE_S) -> None:
        self._queue: deque[Refinable] = deque()
        self._context_chars = context_chars
        self._stale = int(stale_s * SAMPLE_RATE)
        self.stats = RefineStats()

    def __len__(self) -> int:
        return len(self._queue)

    def published(self, final: Refinable) -> None:
        self._queue.append(final)

    def earliest_needed(self) -> int | None:
        """The start of the oldest final still to refine (its window starts at or before it)."""
        return self._queue[0].start if self._queue else None

    def following(self, final: Refinable) -> Following | None:
        """The next final this refiner holds after ``final``, if any."""
        for later in self._queue:
            if later.start > final.start:
                return Following(later.start, later.end)
        return None

    def head(self) -> Refinable | None:
        return self._queue[0] if self._queue else None

    def plan(
        self,
        fed: int,
        following: Following | None,
        history: ContextHistory,
        *,
        stopping: bool,
        language: str | None,
    ) -> RefinePlan | None:
        """The next refinement to ask for, if one is due: for the oldest waiting final,
        ``following`` being the utterance after it (None: none has started)."""
        while self._queue and fed - self._queue[0].end > self._stale:
            self._queue.popleft()
            self.stats.skipped += 1
        if not self._queue:
            return None
        target = self._queue[0]
        if following is None or following.start >= fed:
            if stopping:
                self._queue.popleft()  # nothing follows it: nothing new to hear
                self.stats.last += 1
            return None
        closed = following.end is not None
        heard = fed - following.start
        if not (closed or stopping or heard >= LOOKAHEAD_S * SAMPLE_RATE):
            return None
        end = following.end if following.end is not None else fed
        end = min(end, fed, target.end + int(MAX_LOOKAHEAD_S * SAMPLE_RATE))
        end = min(end, target.start + MAX_WINDOW_SAMPLES)
        context = history.context(target.start, end, language, self._context_chars)
        gap_start, gap_end = target.end, max(target.end, following.start)
        return RefinePlan(target, context.start, end, (gap_start + gap_end) // 2, context)

    def skipped(self, target: Refinable) -> None:
        """Its refinement did not run (dropped under load, or failed)."""
        self._remove(target)
        self.stats.skipped += 1

    def decoded(self, plan: RefinePlan, result: DecodeResult) -> Revision | None:
        """The refinement's result: a Revision when it reads other words, sure enough."""
        target = plan.target
        self._remove(target)
        words = _target_words(plan, result)
        if words is None:
            self.stats.kept += 1
            return None
        text = " ".join(w.word.strip() for w in words)
        if normalized(split_words(text)) == normalized(split_words(target.text)):
            self.stats.unchanged += 1
            return None
        if target.words and mean_log_probability(words) < (
            mean_log_probability(target.words) - CHURN_MARGIN
        ):
            self.stats.kept += 1
            return None
        self.stats.revised += 1
        end = max(target.end, round(words[-1].end * SAMPLE_RATE))
        return Revision(target.number, target.start, end, text, words, result.language, target.text)

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
    words = []
    for w in result.words:
        start, end = max(w.start + offset, first), max(w.end + offset, first)
        if (start + end) / 2 >= boundary:
            break
        words.append(Word(w.word, round(start, 3), round(end, 3), w.probability))
    tokens = [w.word for w in words]
    if not words or len(loop_cut(tokens)) < len(tokens):
        return None
    return tuple(words)


def mean_log_probability(words: Sequence[Word]) -> float:
    """The words' mean log probability (the model's certainty of a hypothesis)."""
    return sum(math.log(max(w.probability, _MIN_PROBABILITY)) for w in words) / len(words)
