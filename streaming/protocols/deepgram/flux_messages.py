"""Deepgram Flux's server messages, encoded: each message's ``sequence_id``, the outbox epoch
that lets a slow reader skip a stale ``Update``, and the ``TurnInfo`` body with its words.
The turn tracker (flux_turns.py) and the codec (flux.py) decide what is said; this says it.
No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kettle.streaming.core.backlog import FINAL, OTHER, PARTIAL
from kettle.streaming.core.events import samples_to_seconds
from kettle.streaming.protocols.base import OutMessage, Send, compact_json


@dataclass(frozen=True)
class TurnInfo:
    """What one ``TurnInfo`` message says of a turn (16 kHz samples for the window)."""

    event: str  # StartOfTurn, Update, EagerEndOfTurn, TurnResumed or EndOfTurn
    turn_index: int
    window_start: int
    window_end: int
    transcript: str
    words: list[dict[str, Any]]
    confidence: float
    trigger: str | None = None  # EndOfTurn's: model, timeout, manual or close

    @property
    def kind(self) -> str:
        """The outbox's kind: an Update may be skipped for a newer one, EndOfTurn is a final."""
        if self.event == "EndOfTurn":
            return FINAL
        return PARTIAL if self.event == "Update" else OTHER


class FluxWriter:
    """One connection's message encoder: every message goes through it, in the order made."""

    def __init__(self, request_id: str, *, detects_language: bool) -> None:
        self.request_id = request_id
        self._detects_language = detects_language  # TurnInfo then says "languages": []
        self._sequence = 0
        self._epoch = 0  # bumped by each message but Update: stale Updates replace only Updates

    def send(
        self,
        obj: dict[str, Any],
        error_code: str | None = None,
        *,
        kind: str = OTHER,
        end: int = 0,
    ) -> Send:
        """``obj`` with the request id and the next sequence id after its type."""
        full = {"type": obj["type"], "request_id": self.request_id, "sequence_id": self._sequence}
        full.update(obj)
        self._sequence += 1
        if kind != PARTIAL:
            self._epoch += 1
        return Send(OutMessage(kind, compact_json(full), self._epoch, end), error_code=error_code)

    def warning(self, code: str, description: str, error_code: str | None = None) -> Send:
        return self.send({"type": "Warning", "code": code, "description": description}, error_code)

    def error_text(self, code: str, description: str) -> str:
        """A fatal ``Error``'s text (Flux's has a sequence id, no request id)."""
        obj = {
            "type": "Error",
            "sequence_id": self._sequence,
            "code": code,
            "description": description,
        }
        self._sequence += 1
        return compact_json(obj)

    def turn_info(self, info: TurnInfo) -> Send:
        obj: dict[str, Any] = {
            "type": "TurnInfo",
            "event": info.event,
            "turn_index": info.turn_index,
            "audio_window_start": samples_to_seconds(info.window_start),
            "audio_window_end": samples_to_seconds(info.window_end),
            "transcript": info.transcript,
            "words": info.words,
            "end_of_turn_confidence": round(info.confidence, 3),
        }
        if info.trigger is not None:
            obj["trigger"] = info.trigger
        if self._detects_language:
            obj["languages"] = []
        return self.send(obj, kind=info.kind, end=info.window_end)


def flux_word(raw: str, start: float, end: float, conf: float) -> dict[str, Any]:
    """Flux's word: the punctuated, cased word as said, with its times."""
    return {
        "word": raw.strip(),
        "confidence": round(conf, 4),
        "start": round(start, 3),
        "end": round(end, 3),
    }


def spread_words(text: str, start: int, end: int) -> list[dict[str, Any]]:
    """A hypothesis's words timed evenly over ``start..end`` (16 kHz samples), confidence 0."""
    words = text.split()
    if not words:
        return []
    begin, finish = samples_to_seconds(start), samples_to_seconds(max(end, start))
    step = (finish - begin) / len(words)
    return [
        flux_word(w, begin + i * step, begin + (i + 1) * step, 0.0) for i, w in enumerate(words)
    ]


__all__ = ["FluxWriter", "TurnInfo", "flux_word", "spread_words"]
