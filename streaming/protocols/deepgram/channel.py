"""One channel's utterance bookkeeping in a Deepgram live stream: which utterances are open,
which ``Finalize`` waits for which, and when ``UtteranceEnd`` is due. No I/O, no messages:
the codec (deepgram.py) asks and renders.
"""

from __future__ import annotations

from collections import deque


class ChannelState:
    """The utterances of one channel's engine stream (16 kHz sample starts)."""

    def __init__(self) -> None:
        self.open: set[int] = set()  # starts of utterances begun and not yet resolved
        self.flushes: deque[set[int]] = deque()  # per Finalize: the utterances it waits for
        self.last_word_end: float | None = None  # armed UtteranceEnd: seconds
        self.done = False  # the stream's Done came

    def began(self, start: int) -> None:
        self.open.add(start)

    def finalize(self) -> bool:
        """A Finalize reached the stream: False when nothing was open (answer it now)."""
        if not self.open:
            return False
        self.flushes.append(set(self.open))
        return True

    def resolve(self, start: int) -> int:
        """An utterance got its Final or NoTranscript: how many Finalizes that completes."""
        self.open.discard(start)
        for waiting in self.flushes:
            waiting.discard(start)
        done = 0
        while self.flushes and not self.flushes[0]:
            self.flushes.popleft()
            done += 1
        return done

    def later_than(self, start: int) -> list[int]:
        """Open utterances that began after `start`."""
        return [s for s in self.open if s > start]

    def utterance_end_due(self, audio_seconds: float, utterance_end_ms: int | None) -> float | None:
        """The armed last word end once the audio has run ``utterance_end_ms`` past it (the
        UtteranceEnd is then sent, and disarmed)."""
        if self.last_word_end is None or utterance_end_ms is None:
            return None
        if audio_seconds - self.last_word_end < utterance_end_ms / 1000:
            return None
        last, self.last_word_end = self.last_word_end, None
        return last


__all__ = ["ChannelState"]
