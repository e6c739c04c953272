"""AssemblyAI's ``Turn`` messages, made from kettle's partials, finals and revisions: the
speech-model family's shape (Universal-3 Pro's formatted turns, Universal-Streaming's plain
ones and the formatted one after them), the words, the speaker and language fields, and the
``end_of_turn_confidence`` kettle can give (live.py's docstring says how). No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kettle.streaming.core.agreement import split_words
from kettle.streaming.core.events import Final, Partial, Revision
from kettle.streaming.protocols.assemblyai.wire import StreamParams
from kettle.streaming.protocols.words import plain_transcript, plain_word, spread_words
from kettle.transcribe.types import SAMPLE_RATE, Word

_TERMINAL = (".", "?", "!", "。", "？", "！")
_CLOSERS = "\"')]}»” "


def ends_sentence(text: str) -> bool:
    return text.rstrip(_CLOSERS).endswith(_TERMINAL)


def turn_confidence(reason: str | None, text: str, agrees: bool) -> float:
    """An end-of-turn Turn's end_of_turn_confidence (see live.py's docstring)."""
    if reason in ("finalize", "stop"):
        return 1.0
    evidence = 0.25 * ends_sentence(text) + 0.25 * agrees
    return evidence + (0.0 if reason == "max_length" else 0.5)


def partial_confidence(text: str, settled: bool) -> float:
    return round(0.3 * ends_sentence(text) + 0.05 * settled, 2)


def speaker_label(speaker: int | None) -> str | None:
    """AssemblyAI's speaker letters: 0 -> "A", 1 -> "B", ... (kettle caps at 16)."""
    return None if speaker is None else chr(ord("A") + speaker)


def partial_turn(params: StreamParams, order: int, event: Partial) -> dict[str, Any]:
    """The open turn's ``Turn`` at a partial (``event.text`` holds words): its words timed
    evenly with confidence 0, ``word_is_final`` for the stable prefix."""
    display = split_words(event.text)
    stable = min(len(split_words(event.stable)), len(display))
    u3 = params.u3
    spread = spread_words(event.text, event.start / SAMPLE_RATE, event.end / SAMPLE_RATE)
    words = [
        _word(w["punctuated_word"] if u3 else w["word"], w["start"], w["end"], 0.0, i < stable)
        for i, w in enumerate(spread)
    ]
    words = [w for w in words if w["text"]]
    if u3:
        transcript = event.text.strip()
    else:  # Universal-Streaming: the transcript holds the finalized words only
        transcript = " ".join(w["text"] for w in words if w["word_is_final"])
    return turn_body(
        order,
        formatted=False,
        end=False,
        transcript=transcript,
        confidence=partial_confidence(event.text, stable == len(display)),
        words=words,
        extra=_speaker_fields(params, None),
    )


def end_of_turn(
    params: StreamParams, order: int, confidence: float, event: Final | Revision
) -> list[dict[str, Any]]:
    """The end-of-turn Turn bodies of a final's (or its revision's) text: the
    unformatted one then, with format_turns, the formatted one; on u3 one formatted."""
    timed = _final_words(event.words) or [
        (w["punctuated_word"], w["start"], w["end"], 0.0)
        for w in spread_words(event.text, event.start / SAMPLE_RATE, event.end / SAMPLE_RATE)
    ]
    label = speaker_label(event.speaker)
    word_speaker = {"speaker": label} if params.speaker_labels and label else {}
    formatted_words = [_word(t, s, e, p, True) | word_speaker for t, s, e, p in timed]
    language = {"language_code": event.language} if params.language_detection else {}
    language |= _speaker_fields(params, label)
    if params.u3:
        bodies = [(True, event.text.strip(), formatted_words, event.text.strip())]
    else:
        plain = plain_transcript(event.text)
        plain_words = [_word(plain_word(t), s, e, p, True) | word_speaker for t, s, e, p in timed]
        plain_words = [w for w in plain_words if w["text"]]
        bodies = [(False, plain, plain_words, plain)]
        if params.format_turns:
            bodies.append((True, event.text.strip(), formatted_words, ""))
    return [
        turn_body(
            order,
            formatted=formatted,
            end=True,
            transcript=transcript,
            confidence=confidence,
            words=words,
            utterance=utterance,
            extra=language,
        )
        for formatted, transcript, words, utterance in bodies
    ]


def turn_body(
    order: int,
    *,
    formatted: bool,
    end: bool,
    transcript: str,
    confidence: float,
    words: Sequence[Mapping[str, Any]],
    utterance: str = "",
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "turn_order": order,
        "turn_is_formatted": formatted,
        "end_of_turn": end,
        "transcript": transcript,
        "end_of_turn_confidence": confidence,
        "words": list(words),
        "utterance": utterance,
        **(extra or {}),
        "type": "Turn",
    }


def _speaker_fields(params: StreamParams, label: str | None) -> dict[str, Any]:
    """``speaker_label`` with speaker_labels on: null while a turn is open (its speaker
    is decided with its final), as AssemblyAI sends it when unsure."""
    return {"speaker_label": label} if params.speaker_labels else {}


def _word(text: str, start: float, end: float, confidence: float, final: bool) -> dict[str, Any]:
    return {
        "start": round(start * 1000),
        "end": round(end * 1000),
        "text": text.strip(),
        "confidence": round(confidence, 4),
        "word_is_final": final,
    }


def _final_words(words: Sequence[Word]) -> list[tuple[str, float, float, float]]:
    return [(w.word.strip(), w.start, w.end, w.probability) for w in words if w.word.strip()]


__all__ = [
    "end_of_turn",
    "partial_confidence",
    "partial_turn",
    "speaker_label",
    "turn_body",
    "turn_confidence",
]
