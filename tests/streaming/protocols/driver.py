"""A codec carried out as the connection runner would, on real Sessions answered at once.

``Driver`` hands a codec client messages and carries out its actions in the runner's order
(server.runner.ConnectionRunner._apply): audio goes through the real ``AudioIngress`` (PCM
decoding, format switches, leftover bytes), each engine stream is a real ``Session`` whose
decodes a fake model answers at once, and the streams' events go back through the codec. No
socket, clock or thread: a property-based test can replay any sequence exactly.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from kettle.kernels.resample import resample
from kettle.streaming.core.config import SessionConfig
from kettle.streaming.core.events import Event, Final, Revision
from kettle.streaming.core.session import Session
from kettle.streaming.core.vad import EnergyClassifier
from kettle.streaming.protocols.base import (
    Action,
    AudioSetup,
    ChannelCodec,
    Close,
    Codec,
    FeedAudio,
    Finalize,
    Reconfigure,
    Send,
    Stop,
)
from kettle.streaming.server.ingress import AudioIngress
from kettle.transcribe.model.fake import FakeDecoder
from kettle.transcribe.types import SAMPLE_RATE, DecodeRequest

if TYPE_CHECKING:
    from kettle.streaming.engine.engine import Engine


class Allow:
    """A rate gate that lets every message through."""

    def check(self) -> str:
        return "allow"


class SessionStream:
    """What AudioIngress needs of an engine stream: a Session, its decodes run at once, or,
    while the driver lags (``Driver.lagging``), held until it catches up, as a busy engine
    answers them later: the stream's events then come between the client's later messages."""

    def __init__(
        self,
        config: SessionConfig,
        decoder: FakeDecoder,
        sink: Callable[..., None],
        lagging: Callable[[], bool] = lambda: False,
    ):
        self.session = Session(config, classifier=EnergyClassifier())
        self._decoder = decoder
        self._sink = sink
        self._lagging = lagging
        self.pending: list[DecodeRequest] = []

    def _settle(self) -> None:
        while True:
            for event in self.session.poll_events():
                self._sink(self, event)
            self.pending += self.session.poll_requests()
            if not self.pending or self._lagging():
                return
            requests, self.pending = self.pending, []
            for result in self._decoder.decode_batch(requests):
                self.session.on_result(result)

    def catch_up(self) -> None:
        """Answer the decodes held while the driver lagged (and what they lead to)."""
        self._settle()

    def feed_audio(self, samples: np.ndarray) -> None:
        self.session.feed_audio(samples)
        self._settle()

    def finalize(self, *, new_request: bool = False) -> None:
        self.session.finalize(new_request=new_request)
        self._settle()

    def set_keyterms(self, terms: tuple[str, ...]) -> None:
        self.session.set_keyterms(terms)
        self._settle()

    def set_endpoint_silence(self, ms: int) -> None:
        self.session.set_endpoint_silence(ms)
        self._settle()

    def reconfigure(self, config: SessionConfig) -> None:
        self.session.reconfigure(config)
        self._settle()

    def stop(self, reason: str | None = None) -> None:
        self.session.stop(reason)
        self._settle()


@dataclass
class Sent:
    """One message the codec sent: its JSON and whether the connection closes after it."""

    obj: dict[str, Any]
    closing: bool
    error_code: str | None


@dataclass
class Driver:
    codec: Codec
    decoder: FakeDecoder = field(default_factory=FakeDecoder)
    sent: list[Sent] = field(default_factory=list)
    closed: int | None = None  # the close code, once the connection is over
    stopped: bool = False
    finals: list[Final] = field(default_factory=list)  # the engine's, per stream in order
    revisions: list[Revision] = field(default_factory=list)
    lagging: bool = False  # decodes wait for catch_up(), as a busy engine's would

    def __post_init__(self) -> None:
        self.streams: list[SessionStream] = []
        self._queue: list[tuple[SessionStream, Event]] = []
        # The driver stands in for the engine: ingress only calls open_stream.
        self.ingress = AudioIngress(cast("Engine", self), self.codec.stream_setup)
        self._apply(self.codec.start())

    # -- what AudioIngress calls ---------------------------------------------------------------
    def open_stream(self, config: SessionConfig) -> SessionStream:
        stream = SessionStream(config, self.decoder, self._on_event, lambda: self.lagging)
        self.streams.append(stream)
        return stream

    def _on_event(self, stream: SessionStream, event: Event) -> None:
        self._queue.append((stream, event))

    # -- the client's side -------------------------------------------------------------------
    def text(self, obj: Any) -> None:
        if self.closed is None:
            text = obj if isinstance(obj, str) else json.dumps(obj)
            self._apply(self.codec.on_text(text, Allow()))

    def binary(self, data: bytes) -> None:
        if self.closed is None:
            self._apply(self.codec.on_binary(data))

    def catch_up(self) -> None:
        """The engine answers every decode held while it lagged, and lags no more."""
        self.lagging = False
        for stream in self.streams:
            stream.catch_up()
        self._pump()

    @property
    def audio(self) -> AudioSetup:
        """The wire format the next audio is read in."""
        if self.ingress._audio is not None:
            return self.ingress._audio
        return self.codec.stream_setup().audio

    def messages(self, kind_key: str = "type") -> list[str]:
        return [s.obj.get(kind_key, "") for s in self.sent]

    # -- the runner's side -------------------------------------------------------------------
    def _apply(self, actions: Sequence[Action]) -> None:
        for action in actions:
            if isinstance(action, Send):
                message = action.message
                if message.text:
                    self.sent.append(
                        Sent(json.loads(message.text), message.closing, action.error_code)
                    )
                if message.closing:
                    self.closed = message.close_code or (1011 if message.fatal else 1000)
            elif isinstance(action, FeedAudio):
                if not self.stopped:
                    self.ingress.feed(action.data, 0.0)
            elif isinstance(action, Finalize):
                if not self.stopped:
                    self.ingress.finalize(new_request=action.new_request)
            elif isinstance(action, Reconfigure):
                self.ingress.apply(action, stopped=self.stopped)
            elif isinstance(action, Stop):
                if not self.stopped:
                    self.stopped = True
                    leftover, frame_bytes, _ = self.ingress.stop(action.reason)
                    if leftover:
                        self._apply(self.codec.on_leftover(leftover, frame_bytes))
            elif isinstance(action, Close):
                self.closed = action.code
        self._pump()

    def _pump(self) -> None:
        while self._queue and self.closed is None:
            stream, event = self._queue.pop(0)
            if isinstance(event, Final):
                self.finals.append(event)
            elif isinstance(event, Revision):
                self.revisions.append(event)
            received = self.ingress.received
            if len(self.streams) > 1 and isinstance(self.codec, ChannelCodec):
                channel = self.streams.index(stream)
                self._apply(self.codec.on_channel_event(channel, event, received))
            else:
                self._apply(self.codec.on_event(event, received))
        self._queue.clear()


def encode(audio: np.ndarray, setup: AudioSetup) -> bytes:
    """16 kHz float samples as wire bytes in ``setup``'s raw format (every channel alike)."""
    if setup.sample_rate != SAMPLE_RATE:
        audio = resample(audio, SAMPLE_RATE, setup.sample_rate)
    clipped = np.clip(audio, -1.0, 1.0)
    if setup.encoding in ("pcm_s16le", "linear16"):
        samples = (clipped * 32767).astype("<i2")
    elif setup.encoding == "pcm_f32le":
        samples = clipped.astype("<f4")
    else:
        raise ValueError(f"no encoder for {setup.encoding}")
    return np.repeat(samples, setup.channels).tobytes()
