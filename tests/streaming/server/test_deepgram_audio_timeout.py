"""Deepgram's audio timeout (NET-0001) and frame limit, through the connection runner with a
scripted peer and the fake model, then on a real server with the official SDK.

The timeout is tested on an injected clock (the peer moves it as it sends) or with a small
configured timeout and event waits: no assertion is about wall-clock time.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from kettle.streaming.client.client import to_s16le
from kettle.streaming.engine.engine import Engine
from kettle.streaming.protocols.assemblyai import live as assemblyai
from kettle.streaming.protocols.base import CodecContext, Limits, ModelInfo
from kettle.streaming.protocols.deepgram import flux as deepgram_flux
from kettle.streaming.protocols.deepgram import live as deepgram
from kettle.streaming.protocols.deepgram.live import FRAME_TOO_BIG, NET_0001, DeepgramLiveCodec
from kettle.streaming.protocols.deepgram.wire import parse_listen_query
from kettle.streaming.protocols.kettle_v1 import live as kettle_v1
from kettle.streaming.protocols.openai import realtime_route as openai_realtime
from kettle.streaming.server.runner import ConnectionRunner
from kettle.streaming.server.server import KettleServer, ServerConfig
from kettle.transcribe.model.fake import FakeDecoder, scripted_audio
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.streaming.conftest import StartServer
from tests.streaming.server.test_runner import Script

GUARD = 60  # seconds: a deadlock guard only
KEY = "dg-key"
RAW = "encoding=linear16&sample_rate=16000"
SPEECH = to_s16le(
    scripted_audio([("silence", 0.3), ("voice", 1.5), ("silence", 0.8), ("voice", 1.2)])
)
PIECE = 3200  # 100 ms
KEEPALIVE = json.dumps({"type": "KeepAlive"})
CLOSE_STREAM = json.dumps({"type": "CloseStream"})


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class ClockedScript(Script):
    """A peer that sends each message `step` seconds after the last, on the clock: the
    runner reads each message at the time the peer sent it, however busy the machine is."""

    def __init__(self, incoming: list[str | bytes], clock: Clock, step: float) -> None:
        super().__init__(incoming)
        self.clock, self.step = clock, step

    async def receive(self) -> str | bytes | None:
        if self.incoming:
            self.clock.now += self.step
        return await super().receive()


def dg_codec(query: str = RAW, limit: int = 1 << 20) -> DeepgramLiveCodec:
    context = CodecContext("s", ModelInfo("fake", False), Limits(max_frame_bytes=limit))
    params = parse_listen_query(query, multilingual=False, model_name="fake")
    return DeepgramLiveCodec(context, params, created="2026-12-01T08:00:00.000Z")


async def run(
    peer: Script,
    engine: Engine,
    timeout_s: float,
    codec: DeepgramLiveCodec | None = None,
    **kw: Any,
) -> None:
    limits = Limits(idle_timeout_s=timeout_s)  # the server gives Deepgram's here
    runner = ConnectionRunner(
        peer, codec or dg_codec(), engine, connection_id="s", limits=limits, **kw
    )
    await asyncio.wait_for(runner.run(), GUARD)


def finals(sent: list[dict[str, Any]]) -> list[str]:
    return [
        m["channel"]["alternatives"][0]["transcript"]
        for m in sent
        if m["type"] == "Results" and m["is_final"]
    ]


def pieces(audio: bytes) -> list[str | bytes]:
    return [audio[i : i + PIECE] for i in range(0, len(audio), PIECE)]


async def test_a_silent_socket_gets_metadata_and_1011_net_0001() -> None:
    peer = Script([])  # connects, then sends nothing at all
    async with Engine(FakeDecoder()) as engine:
        await run(peer, engine, timeout_s=0.3)
        assert engine.streams_open == 0
    assert [m["type"] for m in peer.sent] == ["Metadata"]
    assert peer.sent[0]["duration"] == 0
    assert peer.closed_with == (1011, NET_0001)


async def test_keepalive_holds_the_socket_open_past_the_timeout() -> None:
    clock = Clock()
    # 20 KeepAlives 0.6 s apart: 12 s of no audio, against a 1 s timeout.
    peer = ClockedScript([*[KEEPALIVE] * 20, CLOSE_STREAM], clock, step=0.6)
    async with Engine(FakeDecoder()) as engine:
        await run(peer, engine, timeout_s=1.0, clock=clock)
    assert [m["type"] for m in peer.sent] == ["Metadata"]
    assert peer.closed_with == (1000, "")
    # KeepAlives further apart than the timeout do not hold it.
    clock = Clock()
    peer = ClockedScript([*[KEEPALIVE] * 20, CLOSE_STREAM], clock, step=1.2)
    async with Engine(FakeDecoder()) as engine:
        await run(peer, engine, timeout_s=1.0, clock=clock)
    assert [m["type"] for m in peer.sent] == ["Metadata"]
    assert peer.closed_with == (1011, NET_0001)
    # Any text message resets it, as Deepgram's close reason says ("or a text message").
    clock = Clock()
    peer = ClockedScript([*['{"type": "Dance"}'] * 5, CLOSE_STREAM], clock, step=0.6)
    async with Engine(FakeDecoder()) as engine:
        await run(peer, engine, timeout_s=1.0, clock=clock)
    assert peer.closed_with == (1000, "")


async def test_the_timeout_runs_from_the_last_message_the_audio_included() -> None:
    clock = Clock()
    # Audio 0.6 s apart, then KeepAlives: never 1 s without a message.
    peer = ClockedScript([*pieces(SPEECH), *[KEEPALIVE] * 5, CLOSE_STREAM], clock, step=0.6)
    async with Engine(FakeDecoder()) as engine:
        await run(peer, engine, timeout_s=1.0, clock=clock)
    assert peer.closed_with == (1000, "")
    assert len(finals(peer.sent)) == 2


async def test_audio_then_silence_gets_every_final_then_metadata_then_1011() -> None:
    said = Script([*pieces(SPEECH), CLOSE_STREAM])
    async with Engine(FakeDecoder()) as engine:
        await run(said, engine, timeout_s=GUARD)
    assert said.closed_with == (1000, "")
    silent = Script(pieces(SPEECH))  # the audio, then nothing: the timeout ends it
    async with Engine(FakeDecoder()) as engine:
        await run(silent, engine, timeout_s=0.3)
        assert engine.streams_open == 0
    # Nothing that was said is lost: the same finals as a CloseStream gets, then Metadata.
    assert finals(silent.sent) == finals(said.sent) and len(finals(said.sent)) == 2
    assert silent.sent[-1]["type"] == "Metadata"
    assert silent.sent[-1]["duration"] == said.sent[-1]["duration"]
    assert silent.closed_with == (1011, NET_0001)


async def test_an_audio_message_over_the_limit_ends_with_its_finals_and_1009() -> None:
    first = SPEECH[: len(SPEECH) // 2]
    peer = Script([first, bytes(64_001), SPEECH, CLOSE_STREAM])
    async with Engine(FakeDecoder()) as engine:
        await run(peer, engine, timeout_s=GUARD, codec=dg_codec(limit=64_000))
        assert engine.streams_open == 0
    kinds = [m["type"] for m in peer.sent]
    assert kinds[0] == "Error" and peer.sent[0]["variant"] == "DataError"
    assert "64001 bytes is over the limit of 64000" in peer.sent[0]["description"]
    assert kinds[-1] == "Metadata" and finals(peer.sent)  # what came before: transcribed
    # Nothing after it was taken: the stream ended at the refused message.
    assert peer.sent[-1]["duration"] == round(len(first) / 2 / 16000, 3)
    assert peer.closed_with == (1009, FRAME_TOO_BIG)


def test_only_deepgrams_live_socket_gets_the_audio_timeout() -> None:
    config = ServerConfig(port=0, idle_timeout_s=60.0, deepgram_audio_timeout_s=7.5)
    limits = config.limits()
    assert deepgram.ROUTE.connection_limits(limits).idle_timeout_s == 7.5
    # kettle's own protocol, OpenAI, AssemblyAI and Flux (which documents no such timeout)
    # keep the server's idle timeout.
    for route in (kettle_v1.ROUTE, openai_realtime.ROUTE, assemblyai.ROUTE, deepgram_flux.ROUTE):
        assert route.connection_limits(limits).idle_timeout_s == 60.0
    assert ServerConfig().deepgram_audio_timeout_s == 10.0  # Deepgram's
    with pytest.raises(Exception, match="deepgram_audio_timeout_s must be positive"):
        ServerConfig(deepgram_audio_timeout_s=0)


# -- a real server, the official SDK ---------------------------------------------------------


@pytest.fixture
def make_server(start_server: StartServer) -> Callable[..., Awaitable[KettleServer]]:
    def start(**overrides: Any) -> Awaitable[KettleServer]:
        config = ServerConfig(port=0, api_keys=(KEY,), **overrides)
        return start_server(config, FakeDecoder)

    return start


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
async def test_the_sdk_sees_the_close_as_deepgrams(make_server: Callable[..., Any]) -> None:
    from deepgram import AsyncDeepgramClient
    from deepgram.environment import DeepgramClientEnvironment
    from websockets.exceptions import ConnectionClosedError

    server = await make_server(deepgram_audio_timeout_s=0.3)
    ws = server.url.replace("http", "ws", 1)
    environment = DeepgramClientEnvironment(
        base=server.url, production=ws, agent=ws, agent_rest=server.url
    )
    client = AsyncDeepgramClient(api_key=KEY, environment=environment)
    seen: list[Any] = []
    with pytest.raises(ConnectionClosedError) as closed:
        async with client.listen.v1.connect(
            model="nova-3", encoding="linear16", sample_rate=16000
        ) as socket:
            async with asyncio.timeout(GUARD):
                async for message in socket:  # nothing sent: the timeout closes it
                    seen.append(message)
    assert [m.type for m in seen] == ["Metadata"]
    assert closed.value.rcvd is not None
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1011, NET_0001)
    async with httpx.AsyncClient(timeout=GUARD) as http:
        info = (await http.get(f"{server.url}/v1/info")).json()
    assert info["limits"]["deepgram_audio_timeout_s"] == 0.3


async def test_a_4_mib_frame_is_refused_with_1009(make_server: Callable[..., Any]) -> None:
    server = await make_server()
    url = server.url.replace("http", "ws", 1) + "/v1/listen?" + RAW
    sent: list[dict[str, Any]] = []
    async with connect(
        url, additional_headers={"Authorization": f"Token {KEY}"}, max_size=None
    ) as socket:
        for piece in pieces(SPEECH):
            await socket.send(piece)
        try:
            await socket.send(bytes(4 << 20))  # /v1/info's max_frame_bytes is 1 MiB
            await socket.send(CLOSE_STREAM)  # (not read: the stream ended at the frame)
        except ConnectionClosed:
            pass
        async with asyncio.timeout(GUARD):
            try:
                async for text in socket:
                    sent.append(json.loads(text))
            except ConnectionClosed:
                pass
    assert socket.close_code == 1009 and socket.close_reason == FRAME_TOO_BIG
    (error,) = [m for m in sent if m["type"] == "Error"]  # (a final may come before it)
    assert error["variant"] == "DataError" and "over the limit of 1048576" in error["description"]
    assert len(finals(sent)) == 2 and sent[-1]["type"] == "Metadata"
    assert sent[-1]["duration"] == round(len(SPEECH) / 2 / 16000, 3)
