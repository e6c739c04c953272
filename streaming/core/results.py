"""What a session keeps of a decode result: its usable text and words, and a final's words in
stream time (pure)."""

from __future__ import annotations

from kettle.streaming.core.agreement import splice_words
from kettle.streaming.core.context import Spoken
from kettle.streaming.core.guard import context_echo, phrase_in
from kettle.streaming.core.planner import Plan
from kettle.streaming.core.utterances import Utterance
from kettle.transcribe.model.nonspeech import STREAM as NONSPEECH
from kettle.transcribe.model.repeats import repeat_cut, tail_echo
from kettle.transcribe.types import SAMPLE_RATE, DecodeResult, Word

# A speaker who says something again takes about as long as the first time: a decode that
# says only what came before, in much less audio or much more than it took, is the model
# reading its context or prompt again, not the speaker (issue 40: a 19-word final read again
# from 3 s of the next utterance; a 2.6 s final read again from 4.5 s that said other words).
SAID_AGAIN_RATIO = (0.75, 1.5)
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
    said it (``too_short``)."""
    count = context_echo(plan.context.finals, words) if plan.context.finals else 0
    if neighbour is None:
        return count
    tail = tail_echo(neighbour.text.split(), words)
    repeat = tail == len(words) and not too_short(plan, neighbour.end - neighbour.start)
    if not repeat or goes_on(plan, neighbour):
        count = max(count, tail)
    return count


def goes_on(plan: Plan, neighbour: Spoken) -> bool:
    """Whether ``neighbour`` was a client's finalize mid-speech and the utterance goes on from
    where it ended: the utterance's first audio may be the neighbour's last words again."""
    return not neighbour.sealed and neighbour.end == plan.utterance.start


def heard(plan: Plan) -> int:
    """Samples of its utterance's audio that ``plan``'s window heard."""
    utt = plan.utterance
    end = plan.heard_until if utt.end is None else min(utt.end, plan.heard_until)
    return end - utt.start


def too_short(plan: Plan, said: float) -> bool:
    """Whether ``plan``'s audio is too short to say again what took ``said`` samples."""
    samples = heard(plan)
    return samples < SAID_AGAIN_RATIO[0] * said and said - samples > SAID_AGAIN_SLACK


def too_long(plan: Plan, said: float) -> bool:
    """Whether ``plan``'s audio is far longer than saying again what took ``said`` samples
    (other words were in it)."""
    return heard(plan) > SAID_AGAIN_RATIO[1] * said + SAID_AGAIN_SLACK


def all_echo(result: DecodeResult, plan: Plan, neighbour: Spoken | None) -> bool:
    """Whether the result says nothing but what came before it, and not as a speaker who
    says it again would (``too_short``, ``too_long``): all of it cut by ``echo``, or a
    phrase of a context final or of the ``neighbour``. Then the decode read its context or
    prompt rather than the utterance (issue 40: speculative finals of an utterance opening
    after a turn read their context again, 14 times in 40 turns of a call). Not where the
    neighbour was a client's finalize mid-speech that the utterance goes on from: its first
    audio is that final's last words again."""
    if neighbour is not None and goes_on(plan, neighbour):
        return False
    tokens = result.text.split()
    kept = [tokens[i] for i in repeat_cut(tokens)]
    if not kept:
        return False
    if echo(kept, plan, neighbour) == len(kept):
        return True
    before = list(zip(plan.context.finals, plan.context.spans, strict=False))
    if neighbour is not None:
        before.append((neighbour.text, (neighbour.start, neighbour.end)))
    k = phrase_in([text for text, _ in before], kept)
    if k is None:
        return False
    text, (start, end) = before[k]
    said = (end - start) * len(kept) / len(text.split())
    return too_short(plan, said) or too_long(plan, said)


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
