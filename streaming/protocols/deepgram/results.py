"""The body of a live ``Results`` message (Deepgram's ``ListenV1Results``). No I/O."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kettle.streaming.core.events import samples_to_seconds
from kettle.streaming.protocols.deepgram.wire import ModelIdentity
from kettle.streaming.protocols.words import plain_transcript, spread_words, word_fields
from kettle.transcribe.types import Word


def results_body(
    start: int,
    end: int,
    text: str,
    words: Sequence[Word] | None,
    *,
    channel_index: list[int],
    formatted: bool,
    request_id: str,
    model: ModelIdentity,
    speech_final: bool = False,
    from_finalize: bool = False,
    speaker: int | None = None,
    speaker_confidence: float | None = None,
) -> dict[str, Any]:
    """A Results message over 16 kHz samples ``start``..``end``; ``words`` None means an
    interim result (its words timed evenly over the window, with no claimed confidence).
    ``speaker`` (with diarize, finals only): every word's, as the final is one speaker's."""
    final = words is not None
    begin, finish = samples_to_seconds(start), samples_to_seconds(end)
    shown = (
        [
            word_fields(w.word, w.start, w.end, w.probability, speaker, speaker_confidence)
            for w in words
            if w.word.strip()
        ]
        if words is not None
        else spread_words(text, begin, finish)
    )
    shown = [w for w in shown if w["word"]]
    confidence = (
        round(sum(w["confidence"] for w in shown) / len(shown), 4) if final and shown else 0.0
    )
    transcript = text.strip() if formatted else plain_transcript(text)
    return {
        "type": "Results",
        "channel_index": channel_index,
        "duration": round(finish - begin, 3),
        "start": begin,
        "is_final": final,
        "speech_final": speech_final,
        "from_finalize": from_finalize,
        "channel": {
            "alternatives": [{"transcript": transcript, "confidence": confidence, "words": shown}]
        },
        "metadata": {
            "request_id": request_id,
            "model_info": model.info(),
            "model_uuid": model.uuid,
        },
    }


__all__ = ["results_body"]
