"""The official Deepgram SDK, unchanged but for its base URL, against a real `KettleServer`
with the embedded tiny.en model (slow tests).

The live tests drive the stream by what the server says, not by the wall clock: each step
waits (with a generous deadlock guard) for the message it needs, and no assertion is about
time. Audio goes as fast as the socket takes it, except in the KeepAlive test, whose idle
timeout is a wall-clock rule.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from deepgram import AsyncDeepgramClient, DeepgramClient
from deepgram.core.api_error import ApiError
from kettle.streaming.engine.degrade import DegradeConfig
from kettle.streaming.engine.engine import EngineConfig
from kettle.streaming.engine.scheduling.scheduler import SchedulerConfig
from kettle.streaming.protocols.deepgram.live import NET_0001
from kettle.transcribe.audio.read import load_audio
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosedError

from tests.conftest import pcm16, readme_python_blocks
from tests.streaming.protocols.deepgram.conftest import (
    JFK_REFERENCE,
    environment,
    finals_text,
    is_results,
)

pytestmark = [
    pytest.mark.slow,
    # The SDK's async client is built on websockets' legacy API.
    pytest.mark.filterwarnings("ignore::DeprecationWarning:deepgram"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning:websockets"),
]

ROOT = Path(__file__).resolve().parents[4]
DATA = ROOT / "tests" / "data"
KEY = "dg-test-key"
GUARD = 120  # seconds: a deadlock guard, never a timing assertion
PIECE = 3200  # bytes: 100 ms of 16 kHz linear16
# Where the Finalize test cuts the first utterance, mid-speech ("And so my fellow| Americans").
FINALIZE_AT = 16 * PIECE
# An engine that sheds no partials: no degradation, no cost-based cadence, no partial
# dropped for having waited (each of these reads the wall clock, so a loaded machine would
# decide whether the first utterance gets an interim result before the cut).
EVERY_PARTIAL = EngineConfig(
    scheduler=SchedulerConfig(partial_max_wait_s=float(GUARD)),
    adaptive_cadence=False,
    degrade=DegradeConfig(enabled=False),
)


@pytest.fixture(scope="module")
def pcm() -> bytes:
    return pcm16(load_audio(DATA / "jfk.flac"))


@pytest.fixture
def server_settings() -> dict[str, Any]:
    return {"api_keys": (KEY,)}


@pytest.fixture
def load_model(tiny_decoder: Any) -> Callable[[], Any]:
    return lambda: tiny_decoder


async def send_audio(socket: Any, data: bytes) -> None:
    for i in range(0, len(data), PIECE):
        await socket.send_media(data[i : i + PIECE])


async def test_live_interim_results_finalize_and_close_stream(
    make_server: Callable[..., Any], pcm: bytes, wer_fn: Any
) -> None:
    server = await make_server(engine=EVERY_PARTIAL)
    client = AsyncDeepgramClient(api_key=KEY, environment=environment(server.url))
    seen: list[Any] = []
    first_interim, finalized = asyncio.Event(), asyncio.Event()
    async with client.listen.v1.connect(
        model="nova-3",
        encoding="linear16",
        sample_rate=16000,
        interim_results=True,
        punctuate=True,
        vad_events=True,
    ) as socket:

        async def read() -> None:
            async for message in socket:  # ends cleanly only on a normal close
                seen.append(message)
                if is_results(message) and not message.is_final:
                    first_interim.set()
                if is_results(message) and message.from_finalize:
                    finalized.set()

        reader = asyncio.create_task(read())
        # The audio up to the cut, then nothing until the first interim result has come: the
        # Finalize cuts at the same point of the speech however loaded the machine is (the
        # finals, and so their words, depend on where it cuts).
        await send_audio(socket, pcm[:FINALIZE_AT])
        await asyncio.wait_for(first_interim.wait(), GUARD)
        interim = next(m for m in seen if is_results(m) and not m.is_final)
        assert interim.channel.alternatives[0].transcript
        assert interim.speech_final is False and interim.from_finalize is False
        assert interim.metadata.model_info.name == "tiny.en"
        # Finalize ends the utterance now: its final is the answer.
        await socket.send_finalize()
        await asyncio.wait_for(finalized.wait(), GUARD)
        answer = next(m for m in seen if is_results(m) and m.from_finalize)
        assert answer.is_final is True and answer.speech_final is False
        # The rest, then CloseStream: the remaining finals, Metadata, close 1000.
        await send_audio(socket, pcm[FINALIZE_AT:])
        await socket.send_close_stream()
        await asyncio.wait_for(reader, GUARD)
    kinds = [m.type for m in seen]
    assert kinds[-1] == "Metadata" and kinds.count("Metadata") == 1
    assert "SpeechStarted" in kinds
    metadata = seen[-1]
    assert metadata.duration == pytest.approx(len(pcm) / 32000, abs=0.001)
    assert metadata.channels == 1 and metadata.request_id == answer.metadata.request_id
    finals = [m for m in seen if is_results(m) and m.is_final]
    assert all(f.start + f.duration <= metadata.duration + 0.001 for f in finals)
    # The pause after "... can do for you" is an endpoint the VAD heard: speech_final.
    assert any(f.speech_final for f in finals)
    assert all(w.punctuated_word for f in finals for w in f.channel.alternatives[0].words)
    assert wer_fn([JFK_REFERENCE], [finals_text(seen)]) <= 0.15


async def test_keepalive_holds_the_stream_over_15_s_of_silence(
    make_server: Callable[..., Any], pcm: bytes, wer_fn: Any
) -> None:
    server = await make_server(deepgram_audio_timeout_s=5.0)  # Deepgram's is 10 s
    client = AsyncDeepgramClient(api_key=KEY, environment=environment(server.url))
    seen: list[Any] = []
    async with client.listen.v1.connect(
        model="nova-3", encoding="linear16", sample_rate=16000, punctuate=True
    ) as socket:
        half = len(pcm) // 2 // PIECE * PIECE
        await send_audio(socket, pcm[:half])
        for _ in range(15):  # 15 s with no audio: only KeepAlive, well inside the 5 s timeout
            await asyncio.sleep(1.0)
            await socket.send_keep_alive()
        await send_audio(socket, pcm[half:])
        await socket.send_close_stream()
        async for message in socket:
            seen.append(message)
    assert seen[-1].type == "Metadata"
    assert seen[-1].duration == pytest.approx(len(pcm) / 32000, abs=0.001)
    assert wer_fn([JFK_REFERENCE], [finals_text(seen)]) <= 0.15
    # Without KeepAlive the same silence ends the stream: what was said still comes, then
    # Metadata, then 1011 with the reason Deepgram's audio timeout gives (NET-0001).
    seen = []
    with pytest.raises(ConnectionClosedError) as closed:
        async with client.listen.v1.connect(
            model="nova-3", encoding="linear16", sample_rate=16000
        ) as socket:
            await send_audio(socket, pcm[:half])
            async for message in socket:
                seen.append(message)
    assert closed.value.rcvd is not None
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1011, NET_0001)
    assert seen[-1].type == "Metadata" and finals_text(seen)


async def test_handshake_auth_and_parameters(make_server: Callable[..., Any]) -> None:
    server = await make_server()
    env = environment(server.url)
    with pytest.raises(ApiError) as refused:
        async with AsyncDeepgramClient(api_key="wrong", environment=env).listen.v1.connect(
            model="nova-3", encoding="linear16", sample_rate=16000
        ):
            pass
    assert refused.value.status_code == 401
    with pytest.raises(ApiError) as refused:
        async with AsyncDeepgramClient(api_key=KEY, environment=env).listen.v1.connect(
            model="nova-3", encoding="opus"
        ):
            pass
    assert refused.value.status_code == 400
    with pytest.raises(ApiError) as refused:  # raw audio needs its rate, as at Deepgram
        async with AsyncDeepgramClient(api_key=KEY, environment=env).listen.v1.connect(
            model="nova-3", encoding="linear16"
        ):
            pass
    assert refused.value.status_code == 400
    # A browser's way: the subprotocol pair ("token", KEY); "token" is echoed, never the key.
    url = server.url.replace("http", "ws", 1) + "/v1/listen?encoding=linear16&sample_rate=16000"
    async with connect(url, subprotocols=["token", KEY]) as ws:  # type: ignore[list-item]
        assert ws.subprotocol == "token"
        await ws.send(json.dumps({"type": "Finalize"}))  # no audio yet: answered at once
        answer = json.loads(await asyncio.wait_for(ws.recv(), GUARD))
        assert answer["type"] == "Results" and answer["from_finalize"] is True
        await ws.send(json.dumps({"type": "CloseStream"}))
        last = json.loads(await asyncio.wait_for(ws.recv(), GUARD))
        assert last["type"] == "Metadata" and last["duration"] == 0
    assert ws.close_code == 1000


def run_sync_sdk(url: str, pcm: bytes) -> list[str]:
    """The synchronous client, as most Deepgram code uses it (run in a worker thread)."""
    import threading

    client = DeepgramClient(api_key=KEY, environment=environment(url))
    finals: list[str] = []
    with client.listen.v1.connect(
        model="nova-3", encoding="linear16", sample_rate=16000, smart_format=True
    ) as socket:

        def send() -> None:
            for i in range(0, len(pcm), PIECE):
                socket.send_media(pcm[i : i + PIECE])
            socket.send_close_stream()

        threading.Thread(target=send).start()
        for message in socket:
            if message.type == "Results" and message.is_final:
                finals.append(message.channel.alternatives[0].transcript)
    return finals


async def test_sync_client(make_server: Callable[..., Any], pcm: bytes, wer_fn: Any) -> None:
    server = await make_server()
    finals = await asyncio.to_thread(run_sync_sdk, server.url, pcm)
    assert wer_fn([JFK_REFERENCE], [" ".join(finals)]) <= 0.15


async def test_transcribe_file(make_server: Callable[..., Any], wer_fn: Any) -> None:
    server = await make_server()
    client = AsyncDeepgramClient(api_key=KEY, environment=environment(server.url))
    response: Any = await client.listen.v1.media.transcribe_file(
        request=(DATA / "jfk.flac").read_bytes(), model="nova-3", punctuate=True
    )
    assert response.metadata.duration == pytest.approx(11.0, abs=0.01)
    assert response.metadata.model_info[response.metadata.models[0]]["name"] == "tiny.en"
    alternative = response.results.channels[0].alternatives[0]
    assert wer_fn([JFK_REFERENCE], [alternative.transcript]) <= 0.15
    words = alternative.words
    assert words and all(0 <= w.start <= w.end <= 11.0 for w in words)
    assert [w.start for w in words] == sorted(w.start for w in words)
    with pytest.raises(ApiError) as refused:
        await client.listen.v1.media.transcribe_file(request=b"not audio", model="nova-3")
    assert refused.value.status_code == 400


def readme_snippet(heading: str) -> str:
    """The first python block under `heading` in README.md, exactly as it stands there."""
    blocks = readme_python_blocks(heading)
    assert blocks, f"no python block under {heading!r} in README.md"
    return blocks[0]


async def test_readme_snippet_from_the_deepgram_sdk(
    make_server: Callable[..., Any],
    pcm: bytes,
    wer_fn: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = await make_server()
    shutil.copy(DATA / "jfk.flac", tmp_path / "speech.flac")
    (tmp_path / "speech.pcm").write_bytes(pcm)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KETTLE_URL", server.url)
    monkeypatch.setenv("KETTLE_KEY", KEY)
    code = compile(readme_snippet("### From the Deepgram SDK"), "README.md", "exec")
    await asyncio.to_thread(exec, code, {"__name__": "readme"})
    prerecorded, *live = capsys.readouterr().out.splitlines()
    assert wer_fn([JFK_REFERENCE], [prerecorded]) <= 0.15
    assert wer_fn([JFK_REFERENCE], [" ".join(live)]) <= 0.15
