"""Utterance bookkeeping of one stream: the open utterance, closed ones awaiting their
finals, and the numbering clients see.

Numbering: an utterance gets its number with its first non-empty partial or its final,
whichever comes first. Finals of closed utterances are always requested before any partial of
the next one (and at most one request of a session is in flight), so when an utterance takes
a number every earlier one is resolved and numbers come in order. If an utterance that showed
partials (and so holds a number) ends with an empty final and no stable words, its number is
released and the next utterance takes it: the client saw only partials for it, which the next
utterance's partials then replace, and finals stay 0, 1, 2, ... without gaps.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from kettle.streaming.core.agreement import Agreement
from kettle.streaming.core.speculation import Speculation
from kettle.streaming.core.voice import Voice
from kettle.transcribe.types import Word

ENDPOINTS_KEPT = 256  # end-decision positions kept for latency measurement (simulate)


@dataclass(frozen=True)
class UtteranceSettings:
    """What an utterance is decoded with, taken when the VAD opens it (from
    SessionConfig.utterance_settings): a change (Session.reconfigure) decodes the utterances
    opened after it; the open one and those awaiting their finals keep their own."""

    language: str | None
    languages: tuple[str, ...]
    context_language: str | None  # the language context is matched in; None: no context
    prompt: str  # the previous-text prompt it starts from ("" for none)
    prompt_from: int  # stream position the prompt was set at: earlier finals are not in it
    # Where the request it belongs to began (Session.finalize(new_request=True)): nothing
    # before it is its context or its prompt, as at the stream's start.
    context_from: int
    word_timestamps: bool


@dataclass
class Utterance:
    ordinal: int  # internal, counts every utterance the VAD opened
    start: int
    agreement: Agreement
    settings: UtteranceSettings
    end: int | None = None
    speech_end: int = 0  # the end of its last voiced frame, once closed
    # Where the final's window may end: past ``end`` when silence follows (up to the next
    # utterance's start); ``end`` itself after a cut or when nothing more will come.
    window_limit: int | None = None
    sealed: bool = True  # what follows ``end`` is silence or the next utterance (context.py)
    number: int | None = None
    last_partial_end: int = 0  # window end of the last partial requested
    last_partial_text: str = ""
    speculation: Speculation = field(default_factory=Speculation)
    decided_at: int | None = None  # stream position when the end was decided
    end_reason: str | None = None  # the segmenter's SpeechEnd reason
    # A decode in context went wrong: decode this one without context or earlier finals.
    alone: bool = False
    # A tail window's final fell short (tail.py): decode it whole, until speech resumes.
    whole: bool = False
    voice: Voice | None = None  # voice signature (voice.py), once enough audio came
    voice_final: bool = False  # the signature covers all it will (no need to compute again)
    voice_end: int = 0  # where the audio of the last signature ended
    # Times of the first stable words (absolute seconds), as far as a hypothesis with word
    # timestamps read them: where a tail window may start (tail.py).
    stable_timed: list[Word] = field(default_factory=list)


class UtteranceTracker:
    def __init__(self) -> None:
        self.open: Utterance | None = None
        self.closed: deque[Utterance] = deque()
        self._ordinals = 0
        self._next_number = 0
        self.finals = 0
        # final number -> position of the end decision, for the last ENDPOINTS_KEPT finals
        self.endpoints: dict[int, int] = {}

    def start(self, start: int, agreement: Agreement, settings: UtteranceSettings) -> Utterance:
        utt = Utterance(self._ordinals, start, agreement, settings, last_partial_end=start)
        self._ordinals += 1
        self.open = utt
        return utt

    def close(self, end: int, window_limit: int, decided_at: int) -> Utterance | None:
        utt, self.open = self.open, None
        if utt is None:
            return None
        utt.end, utt.window_limit, utt.decided_at = end, window_limit, decided_at
        self.closed.append(utt)
        return utt

    def next_start(self, start: int) -> None:
        """A new utterance starts: no closed one's window may reach into it."""
        for utt in self.closed:
            if utt.window_limit is not None and utt.window_limit > start:
                utt.window_limit = max(start, utt.end or start)

    def oldest_unresolved(self) -> Utterance | None:
        return self.closed[0] if self.closed else self.open

    def take(self, utt: Utterance) -> bool:
        """Remove ``utt`` from the head of the closed queue (False if it is not there)."""
        if self.closed and self.closed[0] is utt:
            self.closed.popleft()
            return True
        return False

    def number(self, utt: Utterance) -> int:
        if utt.number is None:
            utt.number = self._next_number
            self._next_number += 1
        return utt.number

    def published(self, utt: Utterance) -> int:
        number = self.number(utt)
        self.finals += 1
        if utt.decided_at is not None:
            self.endpoints[number] = utt.decided_at
            if len(self.endpoints) > ENDPOINTS_KEPT:  # bounded: only recent finals are asked
                del self.endpoints[next(iter(self.endpoints))]
        return number

    def release(self, utt: Utterance) -> None:
        """An utterance ended with nothing to say: free its number if no final used it."""
        if utt.number is not None and utt.number == self._next_number - 1:
            self._next_number -= 1
