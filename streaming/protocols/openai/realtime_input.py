"""The input side of an OpenAI Realtime session, as the item ledger counts it: the audio
appended (input milliseconds, across format changes) with where the uncommitted buffer
begins, and the settings the engine stream was opened and reconfigured with (which an
utterance was decoded under). No I/O."""

from __future__ import annotations

from collections import deque

from kettle.streaming.protocols.openai.realtime_settings import RealtimeSettings


class InputBuffer:
    """Audio appended so far, and the uncommitted buffer's start (``boundary_ms``)."""

    def __init__(self, settings: RealtimeSettings) -> None:
        self._settings = settings  # the format the bytes since the last switch are in
        self._bytes = 0  # in the current format
        self._earlier_ms = 0.0  # audio appended in the formats before it
        self.boundary_ms = 0.0  # where the uncommitted buffer begins (input audio ms)

    @property
    def appended_ms(self) -> float:
        s = self._settings
        per_second = s.input_rate * (2 if s.format == "audio/pcm" else 1)
        return self._earlier_ms + self._bytes * 1000.0 / per_second

    @property
    def buffered_ms(self) -> float:
        """The uncommitted buffer's length."""
        return self.appended_ms - self.boundary_ms

    def append(self, size: int) -> None:
        self._bytes += size

    def switch_format(self, settings: RealtimeSettings) -> None:
        """The audio from now on is in ``settings``' format: what came so far stays counted."""
        self._earlier_ms, self._bytes = self.appended_ms, 0
        self._settings = settings


class Retunes:
    """Whether logprobs were asked when the stream opened (its setup is "retune" 0) and after
    its reconfigures, as (first retune, asked) at each change: an utterance opened after k
    reconfigures has retune k's (SpeechStarted.retunes)."""

    def __init__(self) -> None:
        self._logprobs_from: deque[tuple[int, bool]] = deque()
        self._retunes = -1

    def retuned(self, settings: RealtimeSettings) -> None:
        """The stream opens, or is reconfigured, with ``settings``."""
        self._retunes += 1
        changes = self._logprobs_from
        if not changes or changes[-1][1] != settings.logprobs:
            changes.append((self._retunes, settings.logprobs))

    def logprobs_of(self, retunes: int, default: bool) -> bool:
        """Whether an utterance opened after ``retunes`` reconfigures has logprobs (``default``
        before the stream opened). They come in order, so the changes before the one in force
        are no longer needed."""
        changes = self._logprobs_from
        while len(changes) > 1 and changes[1][0] <= retunes:
            changes.popleft()
        return changes[0][1] if changes else default


__all__ = ["InputBuffer", "Retunes"]
