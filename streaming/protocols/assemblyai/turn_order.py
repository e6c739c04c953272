"""AssemblyAI's ``turn_order`` for kettle's utterances: one number per turn that holds words
(an utterance with none gives its number to the next one), and the ended turns a revision may
still correct (``kettle_revisions``). No I/O, no messages."""

from __future__ import annotations

from dataclasses import dataclass

from kettle.streaming.protocols.base import REVISION_HORIZON


@dataclass
class OpenTurn:
    order: int
    last_partial: str = ""  # plain text of the last partial, to compare with the final


@dataclass(frozen=True)
class EndedTurn:
    """An ended turn, kept for the revisions that may correct it (kettle_revisions)."""

    order: int
    confidence: float
    end: int  # the final's end sample


class TurnOrder:
    """The open turns by utterance start, and the ended ones by final's number."""

    def __init__(self) -> None:
        self._open: dict[int, OpenTurn] = {}
        self._next_order = 0
        self._ended: dict[int, EndedTurn] = {}  # final's number -> its turn (kettle_revisions)

    def open(self, start: int) -> OpenTurn:
        """The turn of the utterance at ``start``, numbered when first seen."""
        turn = self._open.get(start)
        if turn is None:
            turn = self._open[start] = OpenTurn(self._next_order)
            self._next_order += 1
        return turn

    def forget(self, start: int) -> None:
        """An utterance that held no words: its number goes to the next turn if unused."""
        turn = self._open.pop(start, None)
        if turn is not None and turn.order == self._next_order - 1:
            self._next_order -= 1

    def end(self, start: int) -> OpenTurn:
        """The utterance's final came with words: its turn (numbered now if no partial did)."""
        turn = self._open.pop(start, None) or OpenTurn(self._next_order)
        self._next_order = max(self._next_order, turn.order + 1)
        return turn

    def remember(self, utterance: int, ended: EndedTurn) -> None:
        """A turn a revision may still correct; those too far back to be refined are let go."""
        self._ended[utterance] = ended
        horizon = ended.end - REVISION_HORIZON
        for number in [n for n, e in self._ended.items() if e.end < horizon]:
            del self._ended[number]

    def ended(self, utterance: int) -> EndedTurn | None:
        return self._ended.get(utterance)


__all__ = ["EndedTurn", "OpenTurn", "TurnOrder"]
