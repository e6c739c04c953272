"""End-of-turn confidence for Deepgram Flux, from what kettle knows at a pause. No I/O.

Flux's model scores "no more speech is coming in this turn". Kettle has no such model; it has
three cues, each measured where it is known:

- the silence since the last voiced frame (the VAD's), against ``HORIZON_MS``: with no other
  cue, a pause that long is taken as a certain end;
- whether the text ends with closing punctuation (``.``, ``?``, ``!``; not ``...``, which
  Whisper writes for speech that trails off): Whisper's punctuation is its guess that the
  sentence ended;
- whether the speculative final (decoded at the pause, with the whole utterance) reads as the
  last partial did: the hypothesis has settled, so little is left unsaid.

The cues set a prior; the silence raises it linearly to 1 over ``HORIZON_MS``::

    prior = PRIOR + CLOSING (text ends a sentence) + AGREES (speculation = last partial)
    confidence = prior + (1 - prior) * min(1, silence_ms / HORIZON_MS)

So with the default ``eot_threshold`` 0.7 a turn ends after 800 ms of silence with no cue,
480 ms when the text ends a sentence, and at ``MIN_END_SILENCE_MS`` (300 ms: the final's own
tail, so the speculative final is the final) when it also agrees; 0.5 gives 533 / 300 / 300
ms, 0.9 gives 1067 / 960 / 857 ms. During speech the confidence is ``SPEAKING``.
"""

from __future__ import annotations

from kettle.streaming.core.agreement import normalize_word, split_words
from kettle.streaming.core.config import SessionConfig

HORIZON_MS = 1200
PRIOR = 0.1
CLOSING = 0.4
AGREES = 0.15
SPEAKING = 0.01
# No end of turn on confidence before the final's tail of silence has been heard: the
# speculative final's window then is the final's, so the final needs no second decode.
MIN_END_SILENCE_MS = SessionConfig.final_tail_ms
_CLOSERS = (".", "?", "!", '."', '?"', '!"')


def ends_sentence(text: str) -> bool:
    """The text ends with closing punctuation (an ellipsis trails off: not closing)."""
    tail = text.rstrip()
    return tail.endswith(_CLOSERS) and not tail.endswith("..")


def same_words(a: str, b: str) -> bool:
    """The two texts read the same words (case and punctuation aside)."""

    def words(text: str) -> list[str]:
        return [w for w in (normalize_word(x) for x in split_words(text)) if w]

    return words(a) == words(b)


def confidence(silence_ms: float, *, closing: bool, agrees: bool) -> float:
    """End-of-turn confidence after ``silence_ms`` of silence, given the cues."""
    prior = PRIOR + (CLOSING if closing else 0.0) + (AGREES if agrees else 0.0)
    ramp = min(1.0, max(0.0, silence_ms) / HORIZON_MS)
    return round(prior + (1.0 - prior) * ramp, 3)


def endpoint_silence_ms(eot_timeout_ms: int) -> int:
    """The VAD endpoint a Flux stream opens with: the timeout, Flux's backstop (the VAD
    takes at most 10 s; a longer timeout is kept by the turn, across utterances)."""
    return max(MIN_END_SILENCE_MS, min(eot_timeout_ms, 10_000))


__all__ = [
    "HORIZON_MS",
    "MIN_END_SILENCE_MS",
    "confidence",
    "endpoint_silence_ms",
    "ends_sentence",
    "same_words",
]
