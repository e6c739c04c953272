"""What a session keeps of a decode result: its usable text and words, and a final's words in
stream time (pure)."""

from __future__ import annotations

from kettle.streaming.core.agreement import splice_words
from kettle.streaming.core.context import Spoken
from kettle.streaming.core.guard import context_echo
from kettle.streaming.core.planner import Plan
from kettle.streaming.core.utterances import Utterance
from kettle.transcribe.model.nonspeech import STREAM as NONSPEECH
from kettle.transcribe.model.repeats import repeat_cut, tail_echo
from kettle.transcribe.types import SAMPLE_RATE, DecodeResult, Word

# A speaker who says the final before again takes about as long as the first time: a
# decode that only says it again in much less audio than that is the model reading its
# context or prompt again, not the speaker (issue 40: a 19-word final read again from 3 s).
SAID_AGAIN_RATIO = 0.75
SAID_AGAIN_SLACK = int(0.5 * SAMPLE_RATE)


def usable(
    result: DecodeResult, plan: Plan, neighbour: Spoken | None = None
) -> tuple[str, tuple[Word, ...]]:
    """The result's text and words, empty for silence, with repetition loops, doubled runs
    and an echo (``echo``) cut. ``neighbour``: the final that ended just before this
    utterance (publisher.ADJACENT), if any."""
    if NONSPEECH.drops(result.text, result.no_speech_prob, result.avg_logprob):
        return "", ()
    tokens = result.text.split()
    keep = repeat_cut(tokens)
    keep = keep[echo([tokens[i] for i in keep], plan, neighbour) :]
    if len(keep) == len(tokens):
        return result.text.strip(), result.words
    words = result.words
    if len(words) == len(tokens):
        words = tuple(words[i] for i in keep)
    return " ".join(tokens[i] for i in keep), words[: len(keep)]


def echo(words: list[str], plan: Plan, neighbour: Spoken | None) -> int:
    """How many leading ``words`` say again what came before the utterance: a phrase from
    inside a context final (guard.context_echo), or one that ends the ``neighbour``
    (tail_echo): no two adjacent finals say it, even from the neighbour's start (a client's
    finalize at a short pause, a cut). A decode that is all such a phrase is a speaker
    saying it again, kept, unless the neighbour was a client's finalize mid-speech that
    this utterance goes on from (its audio, again) or the utterance is too short to have
    said it (``said_again``)."""
    count = context_echo(plan.context.finals, words) if plan.context.finals else 0
    if neighbour is None:
        return count
    tail = tail_echo(neighbour.text.split(), words)
    if tail < len(words) or goes_on(plan, neighbour) or not said_again(plan, neighbour):
        count = max(count, tail)
    return count


def goes_on(plan: Plan, neighbour: Spoken) -> bool:
    """Whether ``neighbour`` was a client's finalize mid-speech and the utterance goes on from
    where it ended: the utterance's first audio may be the neighbour's last words again."""
    return not neighbour.sealed and neighbour.end == plan.utterance.start


def said_again(plan: Plan, neighbour: Spoken) -> bool:
    """Whether the audio ``plan`` heard of its utterance is long enough to say the
    ``neighbour`` again."""
    utt = plan.utterance
    end = plan.heard_until if utt.end is None else min(utt.end, plan.heard_until)
    heard, said = end - utt.start, neighbour.end - neighbour.start
    return heard >= SAID_AGAIN_RATIO * said or said - heard <= SAID_AGAIN_SLACK


def all_echo(result: DecodeResult, plan: Plan, neighbour: Spoken | None) -> bool:
    """Whether the result says nothing but what came before (``echo``), where that was not
    the audio again (a client's finalize mid-speech): the decode read its context, not the
    utterance."""
    if neighbour is not None and goes_on(plan, neighbour):
        return False
    tokens = result.text.split()
    kept = [tokens[i] for i in repeat_cut(tokens)]
    return bool(kept) and echo(kept, plan, neighbour) == len(kept)


def final_words(utt: Utterance, words: tuple[Word, ...], plan: Plan) -> tuple[Word, ...]:
    """The final's words in absolute stream seconds (the result's are window-relative)."""
    assert utt.end is not None
    offset = plan.start / SAMPLE_RATE
    first = utt.start / SAMPLE_RATE
    # Alignment may stretch the first new word back into the context before it: no word
    # of this utterance starts before the utterance does.
    model = [
        Word(
            w.word,
            round(max(w.start + offset, first), 3),
            round(max(w.end + offset, first), 3),
            w.probability,
        )
        for w in words
    ]
    return splice_words(utt.agreement, model, utt.start / SAMPLE_RATE, utt.end / SAMPLE_RATE)
