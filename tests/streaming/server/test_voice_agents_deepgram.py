"""The voice-agent frameworks' Deepgram plugins, unchanged but for base URL and key, against
a real server with the fake model: LiveKit Agents' `deepgram.STT` (streaming with keyterm,
and `recognize()`), Pipecat's `DeepgramSTTService` in a minimal pipeline. What the text says
does not matter here (the fake model's words); that it arrives, and that the keyterms reach
the decoder, does."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import pytest
from kettle.transcribe.audio.read import load_audio
from kettle.transcribe.model.fake import FakeDecoder
from kettle.transcribe.types import DecodeRequest

from tests.conftest import pcm16

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
]

KEY = "agent-key"
GUARD = 60  # seconds: a deadlock guard only
SPEECH = load_audio(Path(__file__).resolve().parents[2] / "data" / "jfk.flac")
TEXT = "Hello from kettle."
FRAME = 320  # samples: 20 ms at 16 kHz, as agents send audio


def said(request: DecodeRequest) -> str:
    return TEXT


@pytest.fixture
def decoder() -> FakeDecoder:
    return FakeDecoder(text_for=said, keep_requests=1000)


@pytest.fixture
def server_settings() -> dict[str, Any]:
    return {"api_keys": (KEY,)}


@pytest.fixture
def load_model(decoder: FakeDecoder) -> Callable[[], FakeDecoder]:
    return lambda: decoder


def with_pause(audio: np.ndarray, seconds: float = 2.0) -> np.ndarray:
    """The speech, then silence long enough for an endpoint."""
    return np.concatenate([audio, np.zeros(int(seconds * 16000), dtype=np.float32)])


async def test_livekit_stream_with_keyterm_and_recognize(
    make_server: Callable[..., Any], decoder: FakeDecoder
) -> None:
    from livekit import rtc
    from livekit.agents import stt as agents_stt
    from livekit.plugins import deepgram

    server = await make_server()
    async with aiohttp.ClientSession() as http:
        stt = deepgram.STT(
            api_key=KEY,
            base_url=f"{server.url}/v1/listen",
            http_session=http,
            keyterm=["Kettle", "Ray Dalio"],
            interim_results=True,
        )
        stream = stt.stream()
        pcm = pcm16(with_pause(SPEECH[: 6 * 16000]))
        for i in range(0, len(pcm), 2 * FRAME):
            chunk = pcm[i : i + 2 * FRAME]
            stream.push_frame(rtc.AudioFrame(chunk, 16000, 1, len(chunk) // 2))
        stream.end_input()
        events = []
        async with asyncio.timeout(GUARD):
            async for event in stream:
                events.append(event)
        await stream.aclose()
        finals = [e for e in events if e.type == agents_stt.SpeechEventType.FINAL_TRANSCRIPT]
        assert finals and all(TEXT in e.alternatives[0].text for e in finals)
        assert agents_stt.SpeechEventType.START_OF_SPEECH in {e.type for e in events}
        assert {r.hotwords for r in decoder.requests_seen} == {"Kettle. Ray Dalio."}
        # recognize(): the plugin's prerecorded POST of a WAV buffer.
        samples = pcm16(SPEECH[: 4 * 16000])
        frame = rtc.AudioFrame(samples, 16000, 1, len(samples) // 2)
        answer = await asyncio.wait_for(stt.recognize(buffer=[frame]), GUARD)
        assert answer.type == agents_stt.SpeechEventType.FINAL_TRANSCRIPT
        assert TEXT in answer.alternatives[0].text


async def test_pipecat_deepgram_stt_service_in_a_pipeline(
    make_server: Callable[..., Any], decoder: FakeDecoder
) -> None:
    from pipecat.frames.frames import EndFrame, Frame, InputAudioRawFrame, TranscriptionFrame
    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.pipeline.runner import PipelineRunner
    from pipecat.pipeline.task import PipelineParams, PipelineTask
    from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
    from pipecat.services.deepgram.stt import DeepgramSTTService

    server = await make_server()
    texts: list[str] = []
    heard = asyncio.Event()

    class Transcripts(FrameProcessor):
        async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
            await super().process_frame(frame, direction)
            if isinstance(frame, TranscriptionFrame):
                texts.append(frame.text)
                heard.set()
            await self.push_frame(frame, direction)

    stt = DeepgramSTTService(
        api_key=KEY,
        base_url=server.url,
        settings=DeepgramSTTService.Settings(keyterm=["Kettle"]),
    )
    task = PipelineTask(
        Pipeline([stt, Transcripts()]),
        params=PipelineParams(audio_in_sample_rate=16000),
    )
    runner = PipelineRunner(handle_sigint=False)
    await runner.add_workers(task)  # (Pipecat 1.3+: workers first, then run())
    running = asyncio.create_task(runner.run())
    pcm = pcm16(with_pause(SPEECH[: 6 * 16000]))
    frames = [
        InputAudioRawFrame(audio=pcm[i : i + 2 * FRAME], sample_rate=16000, num_channels=1)
        for i in range(0, len(pcm), 2 * FRAME)
    ]
    await task.queue_frames(frames)
    await asyncio.wait_for(heard.wait(), GUARD)
    await task.queue_frame(EndFrame())
    await asyncio.wait_for(running, GUARD)
    assert texts and all(TEXT in t for t in texts)
    assert {r.hotwords for r in decoder.requests_seen} == {"Kettle."}
