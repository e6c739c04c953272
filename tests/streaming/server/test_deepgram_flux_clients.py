"""Deepgram Flux (``/v2/listen``) against the clients that speak it, unchanged but for their
base URL and key: LiveKit Agents' ``deepgram.STTv2`` (its STT stream API, with an aiohttp
session), Pipecat's ``DeepgramFluxSTTService`` (in a minimal pipeline) and the deepgram
SDK's ``listen.v2``. The fake model serves where text need not be real; one test reads a real
clip with tiny.en.

Audio is paced at twice real time: the end-of-turn decisions run on the audio clock, but the
speculative final that makes an EagerEndOfTurn must come back while the pause is still on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import pytest
from kettle.streaming.engine.engine import EngineConfig
from kettle.streaming.server.server import KettleServer
from kettle.transcribe.audio.read import load_audio
from kettle.transcribe.model.fake import FakeDecoder, scripted_audio

from tests.conftest import pcm16
from tests.streaming.conftest import MakeServer

pytestmark = pytest.mark.filterwarnings("ignore:'audioop' is deprecated:DeprecationWarning")

KEY = "flux-test-key"
GUARD = 60  # seconds: a deadlock guard, never a timing assertion
CHUNK_S = 0.1
PACE = 0.5  # wall seconds per second of audio
DATA = Path(__file__).resolve().parents[2] / "data"


def two_turns() -> bytes:
    """Two phrases, each followed by more silence than any end of turn waits for."""
    return pcm16(
        scripted_audio(
            [("silence", 0.3), ("voice", 1.6), ("silence", 2.0), ("voice", 1.1), ("silence", 2.0)]
        )
    )


def chunks(data: bytes) -> list[bytes]:
    step = int(16000 * CHUNK_S) * 2
    return [data[i : i + step] for i in range(0, len(data), step)]


@pytest.fixture
def server_settings() -> dict[str, Any]:
    return {"api_keys": (KEY,)}


@pytest.fixture
async def fake_server(make_server: MakeServer) -> KettleServer:
    return await make_server(FakeDecoder(seconds_per_word=0.4), engine=EngineConfig())


def flux_url(server: KettleServer) -> str:
    return server.url.replace("http", "ws", 1) + "/v2/listen"


# -- LiveKit ------------------------------------------------------------------------------------


async def livekit_events(url: str, audio: bytes, **options: Any) -> list[Any]:
    """The SpeechEvents of one LiveKit STTv2 stream fed ``audio`` in real-time-ish frames."""
    from livekit import rtc
    from livekit.plugins import deepgram

    async with aiohttp.ClientSession() as http:
        stt = deepgram.STTv2(api_key=KEY, base_url=url, http_session=http, **options)
        stream = stt.stream()
        events: list[Any] = []

        async def read() -> None:
            async for event in stream:
                events.append(event)

        reader = asyncio.create_task(read())
        for piece in chunks(audio):
            samples = len(piece) // 2
            stream.push_frame(rtc.AudioFrame(piece, 16000, 1, samples))
            await asyncio.sleep(CHUNK_S * PACE)
        stream.end_input()
        await asyncio.wait_for(reader, GUARD)
        await stream.aclose()
        return events


async def test_livekit_stt_v2_turns_and_eager_ends(fake_server: KettleServer) -> None:
    from livekit.agents import stt

    # eot 0.9: the eager end (at 320 ms of silence) comes well before the end (1040 ms).
    events = await livekit_events(
        flux_url(fake_server), two_turns(), eager_eot_threshold=0.4, eot_threshold=0.9
    )
    kinds = [e.type for e in events]
    finals = [e for e in events if e.type == stt.SpeechEventType.FINAL_TRANSCRIPT]
    assert kinds.count(stt.SpeechEventType.START_OF_SPEECH) == 2
    assert kinds.count(stt.SpeechEventType.END_OF_SPEECH) == 2
    assert len(finals) == 2
    # The fake model reads voiced audio as NATO words; every final has them, with times.
    for final in finals:
        text = final.alternatives[0].text
        assert text.split() and text.split()[0] == "alpha"
        assert final.alternatives[0].words
    assert stt.SpeechEventType.INTERIM_TRANSCRIPT in kinds
    preflights = [e for e in events if e.type == stt.SpeechEventType.PREFLIGHT_TRANSCRIPT]
    assert preflights, "eager_eot_threshold=0.4 gives an EagerEndOfTurn at each pause"
    assert all(p.alternatives[0].text for p in preflights)


async def test_livekit_stt_v2_rejects_bad_threshold_with_400(fake_server: KettleServer) -> None:
    async with aiohttp.ClientSession() as http:
        url = (
            flux_url(fake_server)
            + "?model=flux-general-en&encoding=linear16&sample_rate=16000&eot_threshold=2"
        )
        with pytest.raises(aiohttp.WSServerHandshakeError) as info:
            await http.ws_connect(url, headers={"Authorization": f"Token {KEY}"})
        assert info.value.status == 400
        async with http.get(
            url.replace("ws", "http", 1), headers={"Authorization": f"Token {KEY}"}
        ) as response:
            body = await response.json(content_type=None)
        assert "eot_threshold" in body["err_msg"]


# -- Pipecat ------------------------------------------------------------------------------------


async def pipecat_transcripts(url: str, audio: bytes, turns: int) -> tuple[list[str], list[str]]:
    """(final transcripts, event names) of a pipeline [DeepgramFluxSTTService, collector]
    fed ``audio``; it ends once ``turns`` finals came."""
    from pipecat.frames.frames import (
        EndFrame,
        Frame,
        InputAudioRawFrame,
        InterimTranscriptionFrame,
        TranscriptionFrame,
    )
    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.pipeline.worker import PipelineParams, PipelineWorker
    from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
    from pipecat.services.deepgram.flux.stt import DeepgramFluxSTTService
    from pipecat.workers.runner import WorkerRunner

    finals: list[str] = []
    seen: list[str] = []
    enough = asyncio.Event()

    class Collect(FrameProcessor):
        async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
            await super().process_frame(frame, direction)
            if isinstance(frame, TranscriptionFrame):
                finals.append(frame.text)
                if len(finals) >= turns:
                    enough.set()
            elif isinstance(frame, InterimTranscriptionFrame):
                seen.append("interim")
            await self.push_frame(frame, direction)

    service = DeepgramFluxSTTService(api_key=KEY, url=url, sample_rate=16000)

    @service.event_handler("on_start_of_turn")
    async def on_start(_: Any, transcript: str) -> None:
        seen.append("start")

    @service.event_handler("on_end_of_turn")
    async def on_end(_: Any, transcript: str) -> None:
        seen.append("end")

    worker = PipelineWorker(
        Pipeline([service, Collect()]),
        params=PipelineParams(audio_in_sample_rate=16000),
        idle_timeout_secs=None,
    )

    async def feed() -> None:
        for piece in chunks(audio):
            frame = InputAudioRawFrame(audio=piece, sample_rate=16000, num_channels=1)
            await worker.queue_frame(frame)
            await asyncio.sleep(CHUNK_S * PACE)
        await asyncio.wait_for(enough.wait(), GUARD)
        await worker.queue_frame(EndFrame())

    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    await asyncio.wait_for(asyncio.gather(runner.run(), feed()), GUARD)
    return finals, seen


async def test_pipecat_flux_service_in_a_pipeline(fake_server: KettleServer) -> None:
    finals, seen = await pipecat_transcripts(flux_url(fake_server), two_turns(), turns=2)
    assert len(finals) == 2
    assert all(f.split()[0] == "alpha" for f in finals)
    assert seen.count("start") == 2 and seen.count("end") == 2
    assert "interim" in seen


# -- the real model -----------------------------------------------------------------------------


@pytest.fixture
async def tiny_server(make_server: MakeServer, tiny_decoder: Any) -> KettleServer:
    return await make_server(tiny_decoder)


@pytest.mark.slow
async def test_livekit_stt_v2_real_speech(
    tiny_server: KettleServer, wer_fn: Callable[[list[str], list[str]], float]
) -> None:
    from livekit.agents import stt

    audio = load_audio(DATA / "jfk.flac")
    data = pcm16(np.concatenate([audio, np.zeros(32000, dtype=np.float32)]))
    events = await livekit_events(flux_url(tiny_server), data, eager_eot_threshold=0.5)
    finals = [e for e in events if e.type == stt.SpeechEventType.FINAL_TRANSCRIPT]
    text = " ".join(f.alternatives[0].text for f in finals)
    reference = (
        "And so my fellow Americans, ask not what your country can do for you, "
        "ask what you can do for your country."
    )
    assert finals and wer_fn([reference], [text]) < 0.25


# -- the deepgram SDK ---------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
async def test_deepgram_sdk_listen_v2_force_end_turn_configure_and_close(
    fake_server: KettleServer,
) -> None:
    from deepgram import AsyncDeepgramClient
    from deepgram.environment import DeepgramClientEnvironment

    ws = fake_server.url.replace("http", "ws", 1)
    environment = DeepgramClientEnvironment(
        base=fake_server.url, production=ws, agent=ws, agent_rest=fake_server.url
    )
    client = AsyncDeepgramClient(api_key=KEY, environment=environment)
    seen: list[Any] = []
    started, configured = asyncio.Event(), asyncio.Event()
    async with client.listen.v2.connect(
        model="flux-general-en", encoding="linear16", sample_rate="16000", keyterm="Kettle"
    ) as socket:

        async def read() -> None:
            async for message in socket:  # ends cleanly only on a normal close
                seen.append(message)
                if getattr(message, "event", None) == "StartOfTurn":
                    started.set()
                if getattr(message, "type", None) == "ConfigureSuccess":
                    configured.set()

        reader = asyncio.create_task(read())
        voice = pcm16(scripted_audio([("silence", 0.3), ("voice", 2.0)]))
        for piece in chunks(voice):
            await socket.send_media(piece)
        await asyncio.wait_for(started.wait(), GUARD)
        await socket.send_configure({"type": "Configure", "thresholds": {"eot_threshold": 0.9}})
        await asyncio.wait_for(configured.wait(), GUARD)
        await socket.send_force_end_turn()
        await socket.send_close_stream()
        await asyncio.wait_for(reader, GUARD)
    types = [m.type for m in seen]
    assert types[0] == "Connected" and "ConfigureSuccess" in types
    ends = [m for m in seen if getattr(m, "event", None) == "EndOfTurn"]
    assert len(ends) == 1 and ends[0].trigger == "manual"
    assert ends[0].transcript.split()[0] == "alpha" and ends[0].words
    assert [m.sequence_id for m in seen] == sorted(m.sequence_id for m in seen)
