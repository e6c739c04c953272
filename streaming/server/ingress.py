"""Audio ingress of one connection: wire bytes -> float32 16 kHz samples -> the engine
stream(s).

The streams are opened lazily, with the codec's settings, at the first audio (or at stop, so
that a session without audio still ends with the engine's `Done`): one stream, or one per
channel when the codec splits the channels. Raw audio is decoded by kernels.pcm, audio in a
container by transcribe.container_stream. Arrival times of the audio are logged so the
runner can measure each partial's and final's lag.

Raw PCM may change format mid-stream (`switch_audio`, OpenAI Realtime's session.update):
the old decoder's last samples go to the streams, a new decoder takes the audio after it,
and the audio received counts on in the new rate (the seconds before it carried over).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias

import numpy as np
from kettle.kernels.pcm import PcmStreamDecoder
from kettle.streaming.core.config import SessionConfig
from kettle.streaming.protocols.base import (
    CONTAINER,
    AudioReceived,
    AudioSetup,
    Reconfigure,
    StreamSetup,
)
from kettle.streaming.server.metrics import ArrivalLog
from kettle.transcribe.audio.container import ContainerDecodeError, ContainerStreamDecoder

if TYPE_CHECKING:
    from kettle.streaming.engine.engine import Engine, Stream

Decoder: TypeAlias = PcmStreamDecoder | ContainerStreamDecoder

__all__ = ["AudioIngress", "ContainerDecodeError"]


def make_decoder(audio: AudioSetup) -> Decoder:
    if audio.encoding == CONTAINER:
        return ContainerStreamDecoder(audio.channels if audio.split_channels else 1)
    return PcmStreamDecoder(audio.encoding, audio.sample_rate, audio.channels)


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
        self.streams: list[Stream] = []
        self.pcm: Decoder | None = None
        self.arrivals: ArrivalLog | None = None
        self._split = False
        self._audio: AudioSetup | None = None
        self._earlier_s = 0.0  # audio decoded by the decoders before a format switch

    @property
    def stream(self) -> Stream | None:
        """The first (on one channel, the only) stream."""
        return self.streams[0] if self.streams else None

    @property
    def received(self) -> AudioReceived:
        if self.pcm is None:
            return AudioReceived()
        rate = self.pcm.sample_rate
        return AudioReceived(self._frames_at(rate), rate)

    def _frames_at(self, rate: int) -> int:
        """The input frames received so far, counted at ``rate``."""
        assert self.pcm is not None
        if not self._earlier_s:
            return self.pcm.input_frames * rate // self.pcm.sample_rate
        return round((self._earlier_s + self.pcm.input_frames / self.pcm.sample_rate) * rate)

    def open(self) -> tuple[list[Stream], Decoder, ArrivalLog]:
        if not self.streams or self.pcm is None or self.arrivals is None:
            setup = self._setup()
            audio = setup.audio
            self._audio = audio
            self.pcm = make_decoder(audio)
            self._split = audio.streams > 1
            self.arrivals = ArrivalLog(self.pcm.sample_rate)
            self.streams = [self._engine.open_stream(setup.session) for _ in range(audio.streams)]
        return self.streams, self.pcm, self.arrivals

    def _decode(self, pcm: Decoder, data: bytes | None) -> list[np.ndarray]:
        """Samples per stream for `data` (None: the decoder's tail)."""
        if self._split:
            return pcm.flush_channels() if data is None else pcm.feed_channels(data)
        return [pcm.flush() if data is None else pcm.feed(data)]

    def feed(self, data: bytes, now: float) -> None:
        """ContainerDecodeError when the bytes cannot be decoded (the streams stay open)."""
        streams, pcm, arrivals = self.open()
        before = pcm.input_frames
        try:
            parts = self._decode(pcm, data)
        finally:
            arrivals.record(self._frames_at(arrivals.sample_rate), now)
            if pcm.input_frames > before and self._on_audio_seconds is not None:
                self._on_audio_seconds((pcm.input_frames - before) / pcm.sample_rate)
        for stream, samples in zip(streams, parts, strict=True):
            if samples.size:
                stream.feed_audio(samples)

    def finalize(self, *, new_request: bool = False) -> None:
        for stream in self.streams:
            stream.finalize(new_request=new_request)

    def switch_audio(self, audio: AudioSetup) -> None:
        """The audio fed from now on comes in ``audio``'s format (raw PCM, the same channel
        layout); nothing to do before the streams open (they open with the codec's setup).
        An incomplete sample frame the old format left is dropped."""
        if not self.streams or self.pcm is None or self._audio is None or audio == self._audio:
            return
        if CONTAINER in (audio.encoding, self._audio.encoding) or audio.streams > 1:
            raise ValueError("only raw PCM on one stream may switch format")
        old = self.pcm
        for stream, tail in zip(self.streams, self._decode(old, None), strict=True):
            if tail.size:
                stream.feed_audio(tail)
        self._earlier_s += old.input_frames / old.sample_rate
        old.close()
        self._audio, self.pcm = audio, make_decoder(audio)

    def apply(self, change: Reconfigure, *, stopped: bool) -> None:
        """A codec's Reconfigure, in the order its docstring gives: the wire format first
        (its old decoder's tail reaches the streams before the new settings; not after a
        stop, when no audio follows), then the stream's settings, keyterms and endpoint."""
        if change.audio is not None and not stopped:
            self.switch_audio(change.audio)
        if change.session is not None:
            self.reconfigure(change.session)
        if change.keyterms is not None:
            self.set_keyterms(change.keyterms)
        if change.endpoint_silence_ms is not None:
            self.set_endpoint_silence(change.endpoint_silence_ms)

    def reconfigure(self, config: SessionConfig) -> None:
        for stream in self.streams:
            stream.reconfigure(config)

    def set_keyterms(self, terms: tuple[str, ...]) -> None:
        for stream in self.streams:
            stream.set_keyterms(terms)

    def set_endpoint_silence(self, ms: int) -> None:
        for stream in self.streams:
            stream.set_endpoint_silence(ms)

    def stop(self, reason: str | None) -> tuple[int, int, str | None]:
        """No more audio: flush and stop the streams. Returns (leftover bytes, frame bytes,
        decode error): the end of the audio that was not a whole sample frame, dropped, and
        why the tail could not be decoded (None when it could)."""
        streams, pcm, _ = self.open()
        leftover = pcm.leftover_bytes
        error = None
        try:
            tails = self._decode(pcm, None)
        except ContainerDecodeError as exc:
            tails, error = [], str(exc)
        for stream, tail in zip(streams, tails, strict=False):
            if tail.size:
                stream.feed_audio(tail)
        for stream in streams:
            stream.stop(reason)
        return leftover, pcm.frame_bytes, error

    def close(self) -> None:
        """The connection is over: let the decoder go (a container's has a worker)."""
        if self.pcm is not None:
            self.pcm.close()

    @property
    def undecoded_samples(self) -> int:
        """The most audio any of the streams holds not yet transcribed."""
        return max((s.undecoded_samples for s in self.streams), default=0)

    def arrival_of(self, end_sample: int) -> float | None:
        return None if self.arrivals is None else self.arrivals.arrival_of(end_sample)

    def prune_before(self, end_sample: int) -> None:
        if self.arrivals is not None:
            self.arrivals.prune_before(end_sample)
