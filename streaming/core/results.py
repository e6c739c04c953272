"""What a session keeps of a decode result: its usable text and words, and a final's words in
stream time (pure)."""

from __future__ import annotations

from kettle.streaming.core.agreement import splice_words
from kettle.streaming.core.guard import context_echo
from kettle.streaming.core.planner import Plan
from kettle.streaming.core.utterances import Utterance
from kettle.transcribe.model.nonspeech import STREAM as NONSPEECH
from kettle.transcribe.model.repeats import repeat_cut, tail_echo
from kettle.transcribe.types import SAMPLE_RATE, DecodeResult, Word


def usable(
    result: DecodeResult, plan: Plan, *, adjacent: bool = False, forced: bool = False
) -> tuple[str, tuple[Word, ...]]:
    """The result's text and words, empty for silence, with repetition loops, doubled runs
    and an echo of the context (guard.py) cut. ``adjacent``: the context's last final ended
    just before this utterance (a client's finalize at a short pause, a cut), so a run that
    ends it is an echo even where it starts that final: no two adjacent finals say it
    (unless it is all this decode says: a speaker saying it again). ``forced``: that final
    was a client's finalize mid-speech and this utterance goes on from where it ended, so
    even a decode that only says its last words again is an echo of its audio."""
    if NONSPEECH.drops(result.text, result.no_speech_prob, result.avg_logprob):
        return "", ()
    tokens = result.text.split()
    keep = repeat_cut(tokens)
    if plan.context.finals:
        echo = context_echo(plan.context.finals, [tokens[i] for i in keep])
        rest = [tokens[i] for i in keep]
        tail = tail_echo(plan.context.finals[-1].split(), rest) if adjacent else 0
        if tail < len(rest) or forced:  # (all of it said again after a pause: a speaker's)
            echo = max(echo, tail)
        keep = keep[echo:]
    if len(keep) == len(tokens):
        return result.text.strip(), result.words
    words = result.words
    if len(words) == len(tokens):
        words = tuple(words[i] for i in keep)
    return " ".join(tokens[i] for i in keep), words[: len(keep)]


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
