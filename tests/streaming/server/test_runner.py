"""The connection runner with a scripted transport and the fake model (no sockets)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from kettle.streaming.client.client import to_s16le
from kettle.streaming.core.backlog import OTHER
from kettle.streaming.engine.engine import Engine
from kettle.streaming.protocols.base import (
    Action,
    Close,
    CodecContext,
    ModelInfo,
    OutMessage,
    RateGate,
    Send,
)
from kettle.streaming.protocols.kettle_v1.live import KettleV1Codec
from kettle.streaming.protocols.kettle_v1.wire import StreamSettings
from kettle.streaming.protocols.limits import Limits
from kettle.streaming.server.runner import ConnectionRunner, PeerGone
from kettle.transcribe.model.fake import FakeDecoder, scripted_audio

PCM = to_s16le(scripted_audio([("silence", 0.3), ("voice", 1.5), ("silence", 1.0)]))
TIMEOUT = 30


class Script:
    """A peer that sends `incoming`, then waits (or leaves, with `leave`)."""

    def __init__(self, incoming: list[str | bytes], leave: bool = False, reads: bool = True):
        self.incoming = list(incoming)
        self.leave = leave
        self.reads = reads
        self.sent: list[dict[str, Any]] = []
        self.closed_with: tuple[int, str] | None = None

    async def receive(self) -> str | bytes | None:
        if self.incoming:
            return self.incoming.pop(0)
        if self.leave:
            return None
        await asyncio.Event().wait()
        return None

    async def send(self, text: str) -> None:
        if self.closed_with is not None:
            raise PeerGone("closed")
        if not self.reads:
            await asyncio.Event().wait()
        self.sent.append(json.loads(text))

    async def close(self, code: int, reason: str = "") -> None:
        self.closed_with = (code, reason)


def v1(**context: Any) -> KettleV1Codec:
    return KettleV1Codec(CodecContext("s", ModelInfo("fake", False)), StreamSettings())


async def run(peer: Script, codec: Any, engine: Engine, **kw: Any) -> ConnectionRunner:
    kw.setdefault("limits", Limits())
    runner = ConnectionRunner(peer, codec, engine, connection_id="s", **kw)
    await asyncio.wait_for(runner.run(), TIMEOUT)
    return runner


async def test_stop_gives_finals_done_and_close_1000() -> None:
    peer = Script([PCM, '{"type": "stop"}'])
    async with Engine(FakeDecoder()) as engine:
        runner = await run(peer, v1(), engine)
        assert engine.streams_open == 0
    kinds = [m["type"] for m in peer.sent]
    assert kinds[0] == "ready" and kinds[-1] == "done" and "final" in kinds
    assert peer.closed_with == (1000, "") and runner.close_code == 1000


async def test_a_peer_that_leaves_releases_its_stream() -> None:
    peer = Script([PCM[: len(PCM) // 2]], leave=True)
    async with Engine(FakeDecoder()) as engine:
        runner = await run(peer, v1(), engine)
        assert runner.stream is not None and engine.streams_open == 0
    assert peer.closed_with is None  # nothing to close: the peer is gone


async def test_a_peer_that_reads_nothing_is_closed_with_1008() -> None:
    class Chatty(KettleV1Codec):
        def on_text(self, text: str, rate: RateGate) -> list[Action]:
            return [Send(OutMessage(OTHER, '{"type": "x"}')) for _ in range(10)]

    peer = Script(["{}"], reads=False)
    async with Engine(FakeDecoder()) as engine:
        chatty = Chatty(v1().context, StreamSettings())
        runner = await run(peer, chatty, engine, limits=Limits(outbox_limit=5))
    assert peer.closed_with is not None and peer.closed_with[0] == 1008
    assert runner.close_code == 1008


async def test_a_codec_may_close_at_once() -> None:
    class Closing(KettleV1Codec):
        def on_text(self, text: str, rate: RateGate) -> list[Action]:
            return [Close(4001, "go away")]

    peer = Script([PCM, "{}"])
    async with Engine(FakeDecoder()) as engine:
        await run(peer, Closing(v1().context, StreamSettings()), engine)
        assert engine.streams_open == 0
    assert peer.closed_with == (4001, "go away")


async def test_a_codec_that_raises_ends_with_its_fatal_error_and_1011() -> None:
    class Broken(KettleV1Codec):
        def on_binary(self, data: bytes) -> list[Action]:
            raise RuntimeError("bug")

    peer = Script([PCM])
    async with Engine(FakeDecoder()) as engine:
        await run(peer, Broken(v1().context, StreamSettings()), engine)
    assert peer.sent[-1] == {
        "type": "error",
        "code": "internal",
        "message": "internal server error",
        "fatal": True,
    }
    assert peer.closed_with is not None and peer.closed_with[0] == 1011
