"""Pieces: an open utterance's words fixed at its internal pauses, so later decodes cover
only what follows them (pure).

A long utterance costs more with every word: each decode forces its stable words one token
at a time at beam width (CTranslate2 steps through a forced prefix as through generated
text), so a 12 s turn's partials took 0.5 s each and its final as long again after the
speech ended. At a pause the session already decodes a speculative final (speculation.py);
when speech comes back after it, that final's words are kept as a piece: they become stable,
and from then on a decode's window starts at the last piece's start with only that piece's
text forced (like an earlier final's, context.py), the pieces before it and the stream's
context as the previous-text prompt. The final is the pieces' words, then the tail's.

A piece is kept only when the pause was long enough to decode across (``MIN_PAUSE``) and
the speculative window heard none of the speech that came back.
"""

from __future__ import annotations

from dataclasses import dataclass

from kettle.streaming.core.context import PROMPT_CHARS, Context
from kettle.transcribe.types import SAMPLE_RATE, Word

MIN_PAUSE = int(0.12 * SAMPLE_RATE)  # a shorter gap between words is no place to cut
MAX_FORCED = int(3.0 * SAMPLE_RATE)  # EXPERIMENT: a longer last piece prompts instead
LEAD = int(0.25 * SAMPLE_RATE)  # a window from a piece's end hears the next words' onset


@dataclass(frozen=True)
class Piece:
    """Words of an open utterance, fixed: its audio runs from ``start`` to ``end`` (a point
    in the pause after them, where the next piece starts)."""

    start: int
    end: int
    text: str
    words: tuple[Word, ...] = ()  # in stream seconds, when the final is timed


@dataclass(frozen=True)
class Candidate:
    """A speculative final's reading, kept in case speech comes back (then its new words
    make a piece)."""

    start: int  # where its own words' audio begins (the last piece's end, or the utterance's)
    speech_end: int  # the end of its last voiced frame
    heard_until: int  # the end of the audio its window heard (the rest was filled)
    text: str  # the utterance's words so far, as its final would read them
    words: tuple[Word, ...]  # its own words (after the pieces before it), in stream seconds


def cut(candidate: Candidate, resumed_at: int) -> int | None:
    """Where the piece made of ``candidate`` ends, speech having come back at ``resumed_at``;
    None when no piece may be made: the pause was too short, or the window heard some of
    the speech that came back."""
    if resumed_at - candidate.speech_end < MIN_PAUSE or candidate.heard_until > resumed_at:
        return None
    return max(candidate.speech_end, resumed_at - LEAD)


def context(pieces: tuple[Piece, ...], base: Context, chars: int) -> Context:
    """The context of a decode in an utterance with ``pieces``: the last piece forced (if its
    text fits ``chars``; else none, and the window starts at its end), everything before it
    the prompt. ``base``: the utterance's own context from the stream's history."""
    last = pieces[-1]
    earlier = [base.prompt, base.text, *(p.text for p in pieces[:-1])]
    forced: tuple[str, ...] = ()
    if len(last.text) <= chars and last.end - last.start <= MAX_FORCED:
        start, forced = last.start, (last.text,)
    else:
        start = last.end
        earlier.append(last.text)
    prompt = " ".join(t for t in earlier if t).strip()
    return Context(start, forced, prompt[-PROMPT_CHARS:])
