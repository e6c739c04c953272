"""A stream's context history: the audio span and text of its recent finals.

A final's encoder pays for 30 s whatever the window holds, so a decode uses that room: its
window starts at an earlier final's start and the text already final for that span is forced
as the decoder's prefix (``DecodeRequest.context``); only the new words come back. (A
partial's encoder runs on at least 5 s, ``SessionConfig.partial_encode_s``: there the
context costs encoder time once the window is longer.) This module keeps
the finals that may still serve as context and answers, for a window, where it starts and
which text goes with it. Pure: positions are sample counts on the stream's clock.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from kettle.streaming.core.voice import Voice, change
from kettle.transcribe.types import MAX_WINDOW_SAMPLES

# Context text per request, bounded so that Whisper's 224 generated tokens (forced ones
# included) leave room for the new words (the adapter refuses more than 600 characters).
CONTEXT_CHARS = 400
PROMPT_CHARS = 200


@dataclass(frozen=True)
class Spoken:
    """One final of the stream."""

    start: int
    end: int
    text: str
    language: str
    # The audio after it, up to the next utterance, is silence (an endpoint or a pause) or
    # the next utterance itself (a cut). Not so after a finalize mid-speech: speech no final
    # covers may follow, so no context reaches back across it, unless the next utterance
    # starts where it ended (the speech went on): then no audio lies uncovered, and a short
    # fragment after it ("not" after "ask") is read in context, not alone ("Knock.").
    sealed: bool = True
    # Its voice signature (voice.py), None if unknown: context stops at a change of voice.
    voice: Voice | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Context:
    """Where a window starts and what is known of it before the utterance."""

    start: int  # window start: an earlier final's start, or the utterance's own
    finals: tuple[str, ...]  # the finals over [start, utterance start), oldest first
    prompt: str  # older text, before ``start`` (Whisper's previous-text prompt)
    spans: tuple[tuple[int, int], ...] = ()  # each final's (start, end), as ``finals``

    @property
    def text(self) -> str:
        """The finals' text, forced as the decoder's prefix; "" for none."""
        return " ".join(self.finals)


class ContextHistory:
    """Finals that may still lie inside a 30 s window, oldest first."""

    def __init__(self, max_span: int, *, max_chars: int = CONTEXT_CHARS, prompt: str = "") -> None:
        self._max_span = max_span  # samples of context before an utterance; 0: none
        self._max_chars = max_chars
        self._spoken: deque[Spoken] = deque()
        self._prompt = prompt.strip()  # the stream's initial prompt
        # Finals no window can reach any more (the last PROMPT_CHARS of them, at least).
        self._forgotten: deque[Spoken] = deque()
        self._forgotten_chars = 0

    def __len__(self) -> int:
        return len(self._spoken)

    def add(self, spoken: Spoken) -> None:
        self._spoken.append(spoken)

    def context(
        self,
        utterance_start: int,
        window_end: int,
        language: str | None,
        max_chars: int,
        voice: Voice | None = None,
        max_voice_change: float | None = None,
        max_window: int = MAX_WINDOW_SAMPLES,
        *,
        prompt: str | None = None,
        since: int = 0,
        request_from: int = 0,
    ) -> Context:
        """The context of a window that ends at ``window_end`` for an utterance starting at
        ``utterance_start``: the latest run of whole finals that fits ``max_window`` (30 s), the
        configured span and ``max_chars``, all in ``language`` (None: no context) and, when
        both signatures are known, each no more than ``max_voice_change`` (voice.change)
        from the voice after it, ``voice`` being the utterance's. Its prompt is ``prompt``
        (None: the stream's initial one) and the older finals that start at ``since`` or
        later: a prompt set mid-stream conditions what follows as the first one conditioned
        the stream's start. Finals that start before ``request_from`` (where the utterance's
        request began) are neither its context nor its prompt."""
        start, texts, spans, chars = utterance_start, [], [], 0
        max_chars = min(max_chars, self._max_chars)
        taken = 0
        if language is not None:
            for s in reversed(self._spoken):
                if s.end > utterance_start:
                    continue  # not before this utterance (never happens in stream order)
                if (
                    s.start < request_from
                    or (not s.sealed and start > s.end)
                    or s.language != language
                    or utterance_start - s.start > self._max_span
                    or window_end - s.start > max_window
                    or chars + len(s.text) + 1 > max_chars
                    or _other_voice(voice, s.voice, max_voice_change)
                ):
                    break
                # Each final is compared with the one after it (the calibrated case: one
                # voice's utterances drift apart over a conversation, neighbours do not).
                voice = s.voice
                start, chars = s.start, chars + len(s.text) + 1
                if s.text:  # (a final read as nothing lends its audio, not its text)
                    texts.append(s.text)
                    spans.append((s.start, s.end))
                taken += 1
        # Only finals before the utterance are its prompt: a refinement's own final, and
        # those after it, would prompt the model with the very text it is to judge.
        before = [s for s in self._spoken if s.end <= utterance_start]
        untaken = before[: len(before) - taken]
        since = max(since, request_from)
        older = [s.text for s in (*self._forgotten, *untaken) if s.start >= since and s.text]
        first = self._prompt if prompt is None else prompt.strip()
        text = " ".join([first, *older]).strip()[-PROMPT_CHARS:]
        return Context(start, tuple(reversed(texts)), text, tuple(reversed(spans)))

    def neighbour(self, utterance_start: int, within: int, *, since: int = 0) -> Spoken | None:
        """The stream's last final before an utterance if it ended at most ``within`` samples
        before it (and started at ``since`` or later: the utterance's request)."""
        for s in reversed(self._spoken):
            if s.end <= utterance_start:
                return s if utterance_start - s.end <= within and s.start >= since else None
        return None

    def forget_before(self, earliest_start: int) -> None:
        """Drop finals no future window can hold: every later utterance starts at or after
        ``earliest_start``, and a window is at most 30 s (and the span) long."""
        reach = min(self._max_span, MAX_WINDOW_SAMPLES)
        while self._spoken and self._spoken[0].start < earliest_start - reach:
            old = self._spoken.popleft()
            self._forgotten.append(old)
            self._forgotten_chars += len(old.text) + 1
            # Only a prompt's last PROMPT_CHARS count: older finals than that never will.
            while self._forgotten_chars - len(self._forgotten[0].text) - 1 >= PROMPT_CHARS:
                self._forgotten_chars -= len(self._forgotten.popleft().text) + 1

    def earliest_needed(self) -> int | None:
        """The earliest sample a future window may start at, if any final may serve."""
        return self._spoken[0].start if self._spoken else None


def _other_voice(a: Voice | None, b: Voice | None, limit: float | None) -> bool:
    if a is None or b is None or limit is None:
        return False
    return change(a, b) > limit
