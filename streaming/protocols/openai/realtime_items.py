"""OpenAI Realtime item ledger records: utterances, items and pending finalizes."""

from __future__ import annotations

from dataclasses import dataclass, field

from kettle.transcribe.types import Word


@dataclass(eq=False)
class Utterance:
    start: int
    stable: str = ""
    text: str | None = None  # the final's text once resolved ("" for no words)
    words: tuple[Word, ...] = ()  # the final's (with probabilities when word timestamps are on)
    language: str = ""
    logprobs: bool = False  # decoded with word probabilities (include asked when it opened)
    # kettle_revisions: a refinement's corrected text and words (None: none came yet), and
    # the item the utterance belongs to (set once it is known).
    revised: str | None = None
    revised_words: tuple[Word, ...] = ()
    item: Item | None = None

    @property
    def latest(self) -> str:
        """Its text with the latest correction (the final's where none came)."""
        return self.revised if self.revised is not None else self.text or ""


@dataclass(frozen=True)
class Finalizing:
    """Why the codec asked for a Finalize; handled at the session's Finalized marker."""

    purpose: str  # "commit" (manual), "vad_commit" or "clear"
    item: Item | None = None
    start_ms: float = 0.0  # vad_commit: where the buffer began when it was asked
    client_event: str | None = None


@dataclass(eq=False)
class Item:
    item_id: str
    utterances: list[Utterance] = field(default_factory=list)
    assigned: bool = True  # manual items learn their utterances at the Finalized marker
    committed: bool = False
    cleared: bool = False
    completed: bool = False
    emitted: str = ""
    seconds: float = 0.0
    words_sent: int = 0  # how many of settled_words() deltas' logprobs have carried
    logprobs: bool = False  # include asked for logprobs when it was made
    failed: bool = False  # a .failed event ended it (no correction follows)

    @property
    def wants_logprobs(self) -> bool:
        """Its events carry logprobs: its utterances (some of them) were decoded with word
        probabilities; an item without any goes by the settings it was made under."""
        if self.utterances:
            return any(u.logprobs for u in self.utterances)
        return self.logprobs

    def visible(self) -> str:
        """The text so far: finals in order, then the first open utterance's stable words."""
        parts = []
        for u in self.utterances:
            if u.text is None:
                if u.stable:
                    parts.append(u.stable)
                break
            if u.text:
                parts.append(u.text)
        return " ".join(parts)

    def settled_words(self) -> list[Word]:
        """The words of the finals visible() shows in full (the leading resolved ones)."""
        words: list[Word] = []
        for u in self.utterances:
            if u.text is None:
                break
            words.extend(u.words)
        return words

    @property
    def corrected(self) -> bool:
        return any(u.revised is not None for u in self.utterances)

    def latest(self) -> str:
        """The completed transcript with every correction so far (kettle_revisions)."""
        return " ".join(t for t in (u.latest for u in self.utterances) if t)

    def latest_words(self) -> list[Word]:
        words: list[Word] = []
        for u in self.utterances:
            words.extend(u.revised_words if u.revised is not None else u.words)
        return words

    def languages(self) -> list[str]:
        return [u.language for u in self.utterances if u.text]

    @property
    def resolved(self) -> bool:
        return self.assigned and all(u.text is not None for u in self.utterances)
