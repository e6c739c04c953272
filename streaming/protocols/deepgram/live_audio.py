"""The audio a Deepgram live connection received: its SHA-256 for ``Metadata``, and the
seconds it holds, the clock ``UtteranceEnd``, an early Finalize's answer and ``Metadata``'s
duration are read from. No I/O."""

from __future__ import annotations

import hashlib

from kettle.streaming.protocols.base import AudioReceived
from kettle.streaming.protocols.deepgram.wire import ListenParams


class ReceivedAudio:
    """Raw audio is counted as it arrives; a container's decoded audio is what the engine's
    events last reported (its bytes say nothing of its length)."""

    def __init__(self, params: ListenParams) -> None:
        self._params = params
        self._sha256 = hashlib.sha256()
        self.bytes = 0
        self.decoded = AudioReceived()  # decoded so far, as the last event said

    def add(self, data: bytes) -> None:
        self._sha256.update(data)
        self.bytes += len(data)

    @property
    def seconds(self) -> float:
        """Raw audio's whole sample frames at the input rate; a container's decoded audio."""
        p = self._params
        if p.encoding is None:
            return self.decoded.input_frames / self.decoded.sample_rate
        return self.bytes // p.frame_bytes / p.sample_rate

    def sha256(self) -> str:
        return self._sha256.hexdigest()


__all__ = ["ReceivedAudio"]
