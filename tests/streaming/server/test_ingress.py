"""The audio ingress switching raw PCM formats mid-stream (OpenAI Realtime's session.update):
the old decoder's tail reaches the stream first, the audio received counts on across the
switch, and a stream's settings are passed on."""

from __future__ import annotations

import numpy as np
import pytest
from kettle.streaming.core.session import SessionConfig
from kettle.streaming.protocols.base import AudioSetup, StreamSetup
from kettle.streaming.server.ingress import AudioIngress

from tests.conftest import mulaw, pcm16


class FakeStream:
    def __init__(self) -> None:
        self.samples: list[np.ndarray] = []
        self.configs: list[SessionConfig] = []
        self.stopped = False

    def feed_audio(self, samples: np.ndarray) -> None:
        self.samples.append(samples)

    def reconfigure(self, config: SessionConfig) -> None:
        self.configs.append(config)

    def stop(self, reason: str | None = None) -> None:
        self.stopped = True

    @property
    def fed(self) -> int:
        return sum(len(s) for s in self.samples)


class FakeEngine:
    def __init__(self) -> None:
        self.streams: list[FakeStream] = []

    def open_stream(self, config: SessionConfig) -> FakeStream:
        self.streams.append(FakeStream())
        return self.streams[-1]


PCM16 = AudioSetup("pcm_s16le", 24000, 1)
ULAW = AudioSetup("mulaw", 8000, 1)


def tone(seconds: float, rate: int) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)


def ingress(engine: FakeEngine) -> AudioIngress:
    return AudioIngress(engine, lambda: StreamSetup(PCM16, SessionConfig()))  # type: ignore[arg-type]


def test_a_switch_before_any_audio_does_nothing() -> None:
    engine = FakeEngine()
    audio = ingress(engine)
    audio.switch_audio(ULAW)
    audio.reconfigure(SessionConfig(language="fr"))
    assert not engine.streams and audio.pcm is None


def test_the_audio_after_a_switch_is_decoded_in_the_new_format() -> None:
    engine = FakeEngine()
    audio = ingress(engine)
    pcm = pcm16(tone(0.5, 24000))
    audio.feed(pcm + b"\x01", now=1.0)  # and half a sample, dropped at the switch
    audio.switch_audio(PCM16)  # the same format: nothing to do
    audio.switch_audio(ULAW)
    (stream,) = engine.streams
    assert stream.fed == 8000  # the resampler's tail came out before the switch
    audio.feed(mulaw(tone(0.5, 8000)), now=2.0)
    received = audio.received
    assert (received.sample_rate, received.input_frames, received.seconds) == (8000, 8000, 1.0)
    assert audio.arrival_of(4000) == 1.0 and audio.arrival_of(12000) == 2.0
    audio.stop(None)
    assert stream.fed == 16000 and stream.stopped
    tail = np.concatenate(stream.samples)[8000 + 400 : 16000 - 400]
    assert np.max(np.abs(tail)) == pytest.approx(0.3, abs=0.03)  # the tone, not noise


def test_settings_reach_the_open_streams() -> None:
    engine = FakeEngine()
    audio = ingress(engine)
    audio.feed(bytes(480), now=0.0)
    config = SessionConfig(language="fr")
    audio.reconfigure(config)
    assert engine.streams[0].configs == [config]


def test_only_raw_pcm_switches() -> None:
    engine = FakeEngine()
    audio = ingress(engine)
    audio.feed(bytes(480), now=0.0)
    with pytest.raises(ValueError):
        audio.switch_audio(AudioSetup("container"))
