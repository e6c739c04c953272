"""Transcription rounds on one Wyoming connection, and the words each may send. No I/O.

A round is one ``transcribe``/``audio-start`` ... ``audio-stop``. Every round of a connection
feeds the same engine stream; ``audio-stop`` finalizes it (the open utterance ends at once,
as Deepgram's ``Finalize``), and the round is over when every utterance that had begun
before that finalize has its Final (or turned out to hold no words).

Clients add up ``transcript-chunk`` texts and can take none back, so a chunk carries only
words that will not change: the words a partial's stable prefix adds, and the rest of each
final. The round's ``transcript`` is exactly the chunks' concatenation: each chunk after
the first starts with the space that joins it to the words before.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from kettle.streaming.core.agreement import split_words


@dataclass
class Round:
    """One round's words and the utterances that make them (16 kHz starts)."""

    language: str | None = None  # what the client asked (None: detected)
    text: str = ""  # every chunk so far, concatenated
    detected: str | None = None  # the language of its last final
    open: set[int] = field(default_factory=set)  # utterances begun, not yet resolved
    sent: dict[int, int] = field(default_factory=dict)  # words sent, per utterance
    announced: bool = False  # its transcript-start is out
    stopped: bool = False  # audio-stop came: its finalize is on its way
    waiting: set[int] | None = None  # after the finalize: the utterances it waits for
    chunks: list[str] = field(default_factory=list)  # chunks not yet handed out

    @property
    def complete(self) -> bool:
        return self.waiting is not None and not self.waiting

    def add(self, utterance: int, words: list[str]) -> None:
        """Words of ``utterance`` beyond those already sent become a chunk."""
        new = words[self.sent.get(utterance, 0) :]
        if not new:
            return
        self.sent[utterance] = self.sent.get(utterance, 0) + len(new)
        chunk = (" " if self.text else "") + " ".join(new)
        self.text += chunk
        self.chunks.append(chunk)

    def resolve(self, utterance: int) -> None:
        self.open.discard(utterance)
        self.sent.pop(utterance, None)
        if self.waiting is not None:
            self.waiting.discard(utterance)

    def take_chunks(self) -> list[str]:
        chunks, self.chunks = self.chunks, []
        return chunks


class Rounds:
    """The rounds of one connection, oldest first: the oldest is the one whose events the
    client sees now; a later one (its audio sent before the older one's transcript came)
    keeps its chunks until it is the oldest."""

    def __init__(self) -> None:
        self._rounds: deque[Round] = deque()
        self._owner: dict[int, Round] = {}  # utterance start -> its round

    def __bool__(self) -> bool:
        return bool(self._rounds)

    @property
    def head(self) -> Round | None:
        return self._rounds[0] if self._rounds else None

    @property
    def current(self) -> Round | None:
        """The round taking audio (the newest, before its audio-stop)."""
        last = self._rounds[-1] if self._rounds else None
        return last if last is not None and not last.stopped else None

    def begin(self, language: str | None) -> Round:
        new = Round(language)
        self._rounds.append(new)
        return new

    def began(self, utterance: int) -> None:
        """The VAD opened an utterance: it belongs to the oldest round not yet finalized."""
        for r in self._rounds:
            if r.waiting is None:
                r.open.add(utterance)
                self._owner[utterance] = r
                return

    def finalized(self) -> None:
        """A finalize went through the stream: the oldest round waiting for one now knows
        which utterances it waits for."""
        for r in self._rounds:
            if r.stopped and r.waiting is None:
                r.waiting = set(r.open)
                return

    def stable(self, utterance: int, stable: str) -> None:
        owner = self._owner.get(utterance)
        if owner is not None:
            owner.add(utterance, split_words(stable))

    def final(self, utterance: int, text: str, language: str) -> None:
        owner = self._owner.pop(utterance, None)
        if owner is not None:
            owner.add(utterance, split_words(text))
            owner.detected = language or owner.detected
            owner.resolve(utterance)

    def nothing(self, utterance: int) -> None:
        """The utterance held no words."""
        owner = self._owner.pop(utterance, None)
        if owner is not None:
            owner.resolve(utterance)

    def pop_head(self) -> Round:
        head = self._rounds.popleft()
        for utterance in [u for u, r in self._owner.items() if r is head]:
            del self._owner[utterance]
        return head


__all__ = ["Round", "Rounds"]
