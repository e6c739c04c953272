"""Helpers shared by the OpenAI Realtime codec tests: a harness that carries out the codec's
actions on a real Session over the fake model, and scripted audio as 24 kHz PCM."""

from __future__ import annotations

import base64
import json
from typing import Any

from kettle.kernels.pcm import PcmStreamDecoder
from kettle.kernels.resample import resample
from kettle.streaming.core.session import Session
from kettle.streaming.core.vad import EnergyClassifier
from kettle.streaming.protocols.base import (
    Action,
    AudioReceived,
    CodecContext,
    FeedAudio,
    Finalize,
    ModelInfo,
    Reconfigure,
    Send,
)
from kettle.streaming.protocols.openai.realtime import RealtimeCodec
from kettle.streaming.protocols.openai.rest import MODEL_ALIASES
from kettle.transcribe.model.fake import FakeDecoder, scripted_audio

from tests.conftest import pcm16

PREFIX = "conversation.item.input_audio_transcription."


class Allow:
    def check(self) -> str:
        return "allow"


class Harness:
    """Carries out the codec's actions on a real Session answered at once by a fake model."""

    def __init__(self, multilingual: bool = False) -> None:
        model = ModelInfo("tiny.en", multilingual, aliases=MODEL_ALIASES)
        self.codec = RealtimeCodec(CodecContext("sess1", model))
        self.reconfigured: list[Reconfigure] = []
        self.decoder = FakeDecoder()
        self.session: Session | None = None
        self.pcm: PcmStreamDecoder | None = None
        self.out: list[dict[str, Any]] = []
        self.closing: list[bool] = []
        self.apply(self.codec.start())

    def apply(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, Send):
                self.out.append(json.loads(action.message.text))
                self.closing.append(action.message.closing)
            elif isinstance(action, FeedAudio):
                if self.session is None:
                    setup = self.codec.stream_setup()
                    a = setup.audio
                    self.pcm = PcmStreamDecoder(a.encoding, a.sample_rate, a.channels)
                    self.session = Session(setup.session, classifier=EnergyClassifier())
                assert self.pcm is not None
                self.session.feed_audio(self.pcm.feed(action.data))
                self.settle()
            elif isinstance(action, Reconfigure):
                # As the runner does: the audio switches first (its tail before the settings).
                self.reconfigured.append(action)
                assert self.session is not None  # (no Reconfigure before the stream opens)
                if action.audio is not None:
                    assert self.pcm is not None
                    self.session.feed_audio(self.pcm.flush())
                    a = action.audio
                    self.pcm = PcmStreamDecoder(a.encoding, a.sample_rate, a.channels)
                if action.session is not None:
                    self.session.reconfigure(action.session)
                self.settle()
            elif isinstance(action, Finalize) and self.session is not None:
                self.session.finalize()
                self.settle()

    def settle(self) -> None:
        assert self.session is not None
        while True:
            for event in self.session.poll_events():
                self.apply(self.codec.on_event(event, AudioReceived()))
            requests = self.session.poll_requests()
            if not requests:
                return
            for result in self.decoder.decode_batch(requests):
                self.session.on_result(result)

    def send(self, **event: Any) -> None:
        self.apply(self.codec.on_text(json.dumps(event), Allow()))

    def append(self, pcm24k: bytes, piece: int = 4800) -> None:
        for i in range(0, len(pcm24k), piece):
            chunk = base64.b64encode(pcm24k[i : i + piece]).decode()
            self.send(type="input_audio_buffer.append", audio=chunk)

    def types(self) -> list[str]:
        return [e["type"] for e in self.out]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.out if e["type"] == kind]


def pcm24k(pattern: list[tuple[str, float]]) -> bytes:
    return pcm16(resample(scripted_audio(pattern), 16000, 24000))


TWO = pcm24k([("silence", 0.5), ("voice", 2.0), ("silence", 1.0), ("voice", 1.0),
              ("silence", 1.0)])  # fmt: skip
