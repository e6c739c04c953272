"""AssemblyAI's v3 clients, unchanged but for their base URL and key, against a real
`KettleServer` on 127.0.0.1: LiveKit Agents' ``assemblyai.STT`` through its stream API
(with an aiohttp session) and Pipecat's ``AssemblyAISTTService`` in a minimal pipeline,
with the fake model; the handshake's refusals and an error close over a plain WebSocket;
and LiveKit with the real tiny.en model (slow).

Steps wait for what the server says (with a deadlock guard); nothing asserts on time.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kettle.streaming.server.server import KettleServer
from kettle.transcribe.audio.read import load_audio
from kettle.transcribe.model.fake import WORDS, FakeDecoder, scripted_audio
from livekit import rtc
from livekit.agents import stt as lk_stt
from livekit.plugins import assemblyai as lk_assemblyai
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.conftest import pcm16

KEY = "aai-test-key"
GUARD = 120  # seconds: a deadlock guard, never a timing assertion
CHUNK = 1600  # samples: 100 ms at 16 kHz
DATA = Path(__file__).resolve().parents[2] / "data"
JFK_REFERENCE = (
    "And so my fellow Americans, ask not what your country can do for you, "
    "ask what you can do for your country."
)
TWO_PHRASES = [("silence", 0.3), ("voice", 1.5), ("silence", 1.2), ("voice", 1.5), ("silence", 1.2)]


def chunks(data: bytes, size: int = 2 * CHUNK) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def fake_words(text: str) -> list[str]:
    return [w.strip(".,?!").lower() for w in text.split()]


@pytest.fixture
def server_settings() -> dict[str, Any]:
    return {"api_keys": (KEY,)}


def ws_base(server: KettleServer) -> str:
    return server.url.replace("http://", "ws://")


# -- LiveKit -------------------------------------------------------------------------------


async def livekit_events(
    server: KettleServer, audio: bytes, **options: Any
) -> list[lk_stt.SpeechEvent]:
    """Stream ``audio`` through LiveKit's plugin (``stream()``, push_frame, end_input) and
    return every event it yields until the stream ends."""
    async with aiohttp.ClientSession() as http:
        plugin = lk_assemblyai.STT(
            api_key=KEY, base_url=ws_base(server), http_session=http, **options
        )
        stream = plugin.stream()
        for piece in chunks(audio):
            stream.push_frame(rtc.AudioFrame(piece, 16000, 1, len(piece) // 2))
        stream.end_input()

        async def collect() -> list[lk_stt.SpeechEvent]:
            return [event async for event in stream]

        try:
            return await asyncio.wait_for(collect(), GUARD)
        finally:
            await stream.aclose()


async def test_livekit_stream_turns(make_server: Callable[..., Any]) -> None:
    server = await make_server()
    events = await livekit_events(
        server, pcm16(scripted_audio(TWO_PHRASES)), keyterms_prompt=["Kettle"]
    )
    kinds = [e.type for e in events]
    finals = [e for e in events if e.type == lk_stt.SpeechEventType.FINAL_TRANSCRIPT]
    assert len(finals) == 2, kinds
    for event in finals:
        text = event.alternatives[0].text
        assert text and set(fake_words(text)) <= set(WORDS)
        assert event.alternatives[0].words  # timed words, in seconds on LiveKit's side
        metadata = event.alternatives[0].metadata or {}
        assert 0.5 <= metadata["end_of_turn_confidence"] <= 1  # ended at a pause the VAD heard
    assert kinds.count(lk_stt.SpeechEventType.START_OF_SPEECH) == 2
    assert kinds.count(lk_stt.SpeechEventType.END_OF_SPEECH) == 2
    assert lk_stt.SpeechEventType.INTERIM_TRANSCRIPT in kinds
    # The u3 family's single end of turn also fills `utterance`: a preflight per turn.
    assert kinds.count(lk_stt.SpeechEventType.PREFLIGHT_TRANSCRIPT) == 2


async def test_livekit_format_turns_on_the_english_model(make_server: Callable[..., Any]) -> None:
    server = await make_server()
    events = await livekit_events(
        server,
        pcm16(scripted_audio(TWO_PHRASES)),
        model="universal-streaming-english",
        format_turns=True,
    )
    finals = [e for e in events if e.type == lk_stt.SpeechEventType.FINAL_TRANSCRIPT]
    # One final per turn: the plugin skips the unformatted end of turn for the formatted one.
    assert len(finals) == 2
    assert all(f.alternatives[0].text for f in finals)


# -- Pipecat -------------------------------------------------------------------------------


async def test_pipecat_pipeline(make_server: Callable[..., Any]) -> None:
    from pipecat.frames.frames import (
        InputAudioRawFrame,
        InterimTranscriptionFrame,
        TranscriptionFrame,
        VADUserStoppedSpeakingFrame,
    )
    from pipecat.services.assemblyai.stt import AssemblyAISTTService
    from pipecat.tests.utils import run_test

    server = await make_server()
    service = AssemblyAISTTService(
        api_key=KEY,
        api_endpoint_base_url=ws_base(server) + "/v3/ws",
        settings=AssemblyAISTTService.Settings(keyterms_prompt=["Kettle"]),
    )
    first = pcm16(scripted_audio([("silence", 0.3), ("voice", 1.5)]))
    rest = pcm16(scripted_audio([("silence", 1.2), ("voice", 1.5), ("silence", 1.2)]))
    frames: list[Any] = [InputAudioRawFrame(p, 16000, 1) for p in chunks(first)]
    # Pipecat's VAD saying the user stopped: the service sends ForceEndpoint, in order.
    frames.append(VADUserStoppedSpeakingFrame())
    frames += [InputAudioRawFrame(p, 16000, 1) for p in chunks(rest)]
    down, _ = await asyncio.wait_for(run_test(service, frames_to_send=frames), GUARD)
    finals = [f for f in down if isinstance(f, TranscriptionFrame)]
    assert len(finals) == 2, [type(f).__name__ for f in down]
    for frame in finals:
        assert frame.text and set(fake_words(frame.text)) <= set(WORDS)
    turns: list[Any] = [f.result for f in finals]  # (the Turn message of each frame)
    assert all(t is not None for t in turns)
    # The first turn was ended by ForceEndpoint: certain; the second by the VAD's pause.
    assert turns[0].end_of_turn_confidence == 1.0
    assert 0.5 <= turns[1].end_of_turn_confidence <= 1
    assert all(t.turn_is_formatted for t in turns)
    # (Audio goes faster than real time here, so a turn may end before any partial.)
    interims: list[Any] = [f.result for f in down if isinstance(f, InterimTranscriptionFrame)]
    assert all(not t.end_of_turn for t in interims)


# -- the handshake and errors over a plain WebSocket ---------------------------------------


async def test_refusals_and_error_close(make_server: Callable[..., Any]) -> None:
    server = await make_server()
    url = ws_base(server) + "/v3/ws"
    with pytest.raises(InvalidStatus) as refused:
        await connect(url + "?sample_rate=16000", additional_headers={"Authorization": "wrong"})
    assert refused.value.response.status_code == 401
    assert "error" in json.loads(refused.value.response.body or b"{}")
    with pytest.raises(InvalidStatus) as refused:
        await connect(url + "?encoding=opus", additional_headers={"Authorization": KEY})
    assert refused.value.response.status_code == 400
    assert json.loads(refused.value.response.body or b"{}")["error"].startswith("encoding")
    # The key as ?token= (a browser's way), then a message that is not JSON.
    async with connect(url + f"?token={KEY}") as ws:
        begin = json.loads(await asyncio.wait_for(ws.recv(), GUARD))
        assert begin["type"] == "Begin" and isinstance(begin["expires_at"], int)
        await ws.send(pcm16(scripted_audio([("voice", 0.5)])))
        await ws.send("not json")
        # The turns of the audio before it still come, then the error.
        error = json.loads(await asyncio.wait_for(ws.recv(), GUARD))
        while error["type"] in ("SpeechStarted", "Turn"):
            error = json.loads(await asyncio.wait_for(ws.recv(), GUARD))
        assert error == {"type": "Error", "error_code": 3006, "error": "Invalid JSON: not json"}
        with pytest.raises(ConnectionClosed):
            await asyncio.wait_for(ws.recv(), GUARD)
    assert ws.close_code == 3006
    async with aiohttp.ClientSession() as http, http.get(server.url + "/v1/info") as response:
        info = await response.json()
    assert info["protocols"]["assemblyai"]["path"] == "/v3/ws"


async def test_a_client_mistake_gets_the_documented_error_and_is_counted(
    make_server: Callable[..., Any],
) -> None:
    # Issue 38: keyterms_prompt as a string (the API types it as a list of strings).
    server = await make_server()
    url = ws_base(server) + "/v3/ws"
    with pytest.raises(InvalidStatus) as refused:
        await connect(url + "?keyterms_prompt=%5B1%5D", additional_headers={"Authorization": KEY})
    assert refused.value.response.status_code == 400
    error = json.loads(refused.value.response.body or b"{}")["error"]
    assert error.startswith("keyterms_prompt must be a list of strings")
    assert server.metrics.value("kettle_sessions_rejected_total", {"reason": "bad_query"}) == 1
    async with connect(url + "?sample_rate=16000", additional_headers={"Authorization": KEY}) as ws:
        await ws.recv()  # Begin
        await ws.send(json.dumps({"type": "UpdateConfiguration", "keyterms_prompt": "kettle"}))
        error = json.loads(await asyncio.wait_for(ws.recv(), GUARD))
        assert error["error_code"] == 3006
        assert error["error"].startswith("Invalid Message: keyterms_prompt must be a list")
        with pytest.raises(ConnectionClosed):
            await asyncio.wait_for(ws.recv(), GUARD)
    assert ws.close_code == 3006
    assert server.metrics.value("kettle_errors_total", {"code": "bad_message"}) == 1


async def test_terminate_ends_with_termination(make_server: Callable[..., Any]) -> None:
    server = await make_server()
    url = ws_base(server) + "/v3/ws?speech_model=u3-rt-pro"
    async with connect(url, additional_headers={"Authorization": KEY}) as ws:
        await ws.recv()  # Begin
        for piece in chunks(pcm16(scripted_audio([("voice", 1.5)]))):
            await ws.send(piece)
        await ws.send(json.dumps({"type": "Terminate"}))
        messages = [json.loads(m) async for m in ws]
    assert ws.close_code == 1000
    assert messages[-1]["type"] == "Termination"
    assert messages[-1]["audio_duration_seconds"] == 2  # 1.5 s, in AssemblyAI's integers
    (eot,) = [m for m in messages if m["type"] == "Turn" and m["end_of_turn"]]
    assert eot["end_of_turn_confidence"] == 1.0  # ended by Terminate


async def test_update_configuration_keyterms_reach_the_decoder(
    make_server: Callable[..., Any],
) -> None:
    decoder = FakeDecoder()
    server = await make_server(decoder)
    query = "?speech_model=u3-rt-pro&keyterms_prompt=" + '["Kettle"]'
    async with connect(
        ws_base(server) + "/v3/ws" + query, additional_headers={"Authorization": KEY}
    ) as ws:
        await ws.recv()  # Begin
        for piece in chunks(pcm16(scripted_audio([("voice", 1.5), ("silence", 1.2)]))):
            await ws.send(piece)
        while True:  # the first turn's end: every decode of it is done
            turn = json.loads(await asyncio.wait_for(ws.recv(), GUARD))
            if turn["type"] == "Turn" and turn["end_of_turn"]:
                break
        before = len(decoder.requests_seen)
        update = {"type": "UpdateConfiguration", "keyterms_prompt": ["Whisper"]}
        await ws.send(json.dumps(update))
        for piece in chunks(pcm16(scripted_audio([("voice", 1.5)]))):
            await ws.send(piece)
        await ws.send(json.dumps({"type": "Terminate"}))
        messages = [json.loads(m) async for m in ws]
    assert messages[-1]["type"] == "Termination"
    hotwords = [r.hotwords or "" for r in decoder.requests_seen]
    assert hotwords[:before] and all("Kettle" in h for h in hotwords[:before])
    assert hotwords[before:] and all(
        "Whisper" in h and "Kettle" not in h for h in hotwords[before:]
    )


# -- the real model ------------------------------------------------------------------------


@pytest.mark.slow
async def test_livekit_tiny_en(
    make_server: Callable[..., Any], tiny_decoder: Any, wer_fn: Callable[..., float]
) -> None:
    server = await make_server(tiny_decoder)
    audio = pcm16(load_audio(DATA / "jfk.flac"))
    events = await livekit_events(server, audio, model="universal-3-6-pro")
    finals = [e for e in events if e.type == lk_stt.SpeechEventType.FINAL_TRANSCRIPT]
    text = " ".join(f.alternatives[0].text for f in finals)
    assert wer_fn([JFK_REFERENCE], [text]) < 0.2, text
