"""Audio ingress of one connection: wire bytes -> float32 16 kHz samples -> the engine stream.

The stream is opened lazily, with the codec's settings, at the first audio (or at stop, so
that a session without audio still ends with the engine's `Done`). Arrival times of the audio
are logged so the runner can measure each partial's and final's lag.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kettle.kernels.pcm import PcmStreamDecoder
from kettle.streaming.protocols.base import AudioReceived, StreamSetup
from kettle.streaming.server.metrics import ArrivalLog

if TYPE_CHECKING:
    from kettle.streaming.engine.engine import Engine, Stream


class AudioIngress:
    def __init__(
        self,
        engine: Engine,
        setup: Callable[[], StreamSetup],
        on_audio_seconds: Callable[[float], None] | None = None,
    ) -> None:
        self._engine = engine
        self._setup = setup
        self._on_audio_seconds = on_audio_seconds
        self.stream: Stream | None = None
        self.pcm: PcmStreamDecoder | None = None
        self.arrivals: ArrivalLog | None = None

    @property
    def received(self) -> AudioReceived:
        if self.pcm is None:
            return AudioReceived()
        return AudioReceived(self.pcm.input_frames, self.pcm.sample_rate)

    def open(self) -> tuple[Stream, PcmStreamDecoder, ArrivalLog]:
        if self.stream is None or self.pcm is None or self.arrivals is None:
            setup = self._setup()
            audio = setup.audio
            self.pcm = PcmStreamDecoder(audio.encoding, audio.sample_rate, audio.channels)
            self.arrivals = ArrivalLog(audio.sample_rate)
            self.stream = self._engine.open_stream(setup.session)
        return self.stream, self.pcm, self.arrivals

    def feed(self, data: bytes, now: float) -> None:
        stream, pcm, arrivals = self.open()
        before = pcm.input_frames
        samples = pcm.feed(data)
        arrivals.record(pcm.input_frames, now)
        if pcm.input_frames > before and self._on_audio_seconds is not None:
            self._on_audio_seconds((pcm.input_frames - before) / pcm.sample_rate)
        if samples.size:
            stream.feed_audio(samples)

    def finalize(self) -> None:
        if self.stream is not None:
            self.stream.finalize()

    def stop(self, reason: str | None) -> tuple[int, int]:
        """No more audio: flush and stop the stream. Returns (leftover bytes, frame bytes):
        the end of the audio that was not a whole sample frame, dropped."""
        stream, pcm, _ = self.open()
        leftover = pcm.leftover_bytes
        tail = pcm.flush()
        if tail.size:
            stream.feed_audio(tail)
        stream.stop(reason)
        return leftover, pcm.frame_bytes

    def arrival_of(self, end_sample: int) -> float | None:
        return None if self.arrivals is None else self.arrivals.arrival_of(end_sample)

    def prune_before(self, end_sample: int) -> None:
        if self.arrivals is not None:
            self.arrivals.prune_before(end_sample)
