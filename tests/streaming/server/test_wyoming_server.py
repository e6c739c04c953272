"""The Wyoming listener over real TCP, driven by the ``wyoming`` library's own client
(``AsyncTcpClient``, unchanged), on the fake model: describe, rounds, and every bad input
answered with an ``error`` event and a close while other clients are served."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
import pytest
from kettle.streaming.server.server import KettleServer
from kettle.transcribe.model.fake import scripted_audio
from wyoming.asr import Transcribe, Transcript, TranscriptChunk
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Describe, Info

READ_S = 20  # a deadlock guard, not a speed requirement
SPEECH = scripted_audio(
    [("silence", 0.3), ("voice", 1.5), ("silence", 1.0), ("voice", 2.0), ("silence", 0.3)]
)  # fmt: skip
FORMAT = {"rate": 16000, "width": 2, "channels": 1}

Wyoming = Callable[..., Awaitable[KettleServer]]


@pytest.fixture
def wyoming(make_server: Any) -> Wyoming:
    """``wyoming(**settings)``: a started server with a Wyoming listener on a free port."""

    def start(**settings: Any) -> Awaitable[KettleServer]:
        return make_server(wyoming="tcp://127.0.0.1:0", **settings)

    return start


def client(server: KettleServer) -> AsyncTcpClient:
    assert server.wyoming is not None
    return AsyncTcpClient("127.0.0.1", server.wyoming.port, read_timeout=READ_S)


def pcm(samples: np.ndarray) -> bytes:
    return (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()


async def read_until(c: AsyncTcpClient, kind: str) -> list[Event]:
    events: list[Event] = []
    while True:
        event = await c.read_event()
        assert event is not None, f"closed before {kind}: {events}"
        events.append(event)
        if event.type == kind:
            return events


async def refused(c: AsyncTcpClient) -> Error:
    """The error event last, then the close."""
    events = []
    while (event := await c.read_event()) is not None:
        events.append(event)
    assert events and Error.is_type(events[-1].type), events
    return Error.from_event(events[-1])


async def test_describe_gets_info_with_streaming(wyoming: Wyoming) -> None:
    server = await wyoming()
    async with client(server) as c:
        await c.write_event(Describe().event())
        event = await c.read_event()
        assert event is not None and Info.is_type(event.type)
        (asr,) = Info.from_event(event).asr
        assert asr.supports_transcript_streaming and asr.models[0].languages == ["en"]


async def speak(c: AsyncTcpClient, audio: bytes, chunk: int = 3200) -> None:
    await c.write_event(Transcribe(language="en").event())
    await c.write_event(AudioStart(**FORMAT).event())
    for i in range(0, len(audio), chunk):
        await c.write_event(AudioChunk(audio=audio[i : i + chunk], **FORMAT).event())


async def test_chunks_come_before_audio_stop_and_the_transcript_equals_them(
    wyoming: Wyoming,
) -> None:
    server = await wyoming()
    async with client(server) as c:
        for _ in range(2):  # two rounds on one connection, as satellites do
            await speak(c, pcm(SPEECH))
            early = await read_until(c, "transcript-chunk")  # before audio-stop is sent
            await c.write_event(AudioStop().event())
            events = early + await read_until(c, "transcript-stop")
            kinds = [e.type for e in events]
            assert kinds[0] == "transcript-start"
            assert kinds[-2:] == ["transcript", "transcript-stop"]
            chunks = "".join(
                TranscriptChunk.from_event(e).text for e in events if e.type == "transcript-chunk"
            )
            transcript = Transcript.from_event(events[-2])
            assert transcript.text == chunks and chunks.strip()
    assert server.metrics.value("kettle_sessions_total") >= 1


async def test_a_client_that_reads_only_the_transcript_gets_it(wyoming: Wyoming) -> None:
    # Home Assistant's loop: read until `transcript`, ignore every other type.
    server = await wyoming()
    async with client(server) as c:
        await speak(c, pcm(SPEECH))
        await c.write_event(AudioStop().event())
        events = await read_until(c, "transcript")
        assert Transcript.from_event(events[-1]).text.strip()


BAD_INPUTS = {
    "malformed json header": [b"{this is not json\n"],
    "payload length that lies": [
        b'{"type": "audio-chunk", "data": {"rate": 16000, "width": 2, "channels": 1}, '
        b'"payload_length": 10}\n' + b"\0" * 10 + b"tail that is no header\n"
    ],
    "oversized payload": [b'{"type": "audio-chunk", "payload_length": 1073741824}\n'],
    "audio before audio-start": [b'{"type": "audio-chunk", "data": {"rate": 16000, '
                                 b'"width": 2, "channels": 1}, "payload_length": 4}\n\0\0\0\0'],
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
async def test_bad_input_gets_an_error_and_a_close_while_others_go_on(
    wyoming: Wyoming, name: str
) -> None:
    server = await wyoming()
    async with client(server) as good, client(server) as bad:
        await speak(good, pcm(SPEECH[:16000]))
        if name == "payload length that lies":
            await bad.write_event(AudioStart(**FORMAT).event())
        assert bad._writer is not None
        for raw in BAD_INPUTS[name]:
            bad._writer.write(raw)
        error = await refused(bad)
        assert error.text and error.code
        await speak_rest_and_finish(good)


async def speak_rest_and_finish(c: AsyncTcpClient) -> None:
    for i in range(16000 * 2, len(pcm(SPEECH)), 3200):
        await c.write_event(AudioChunk(audio=pcm(SPEECH)[i : i + 3200], **FORMAT).event())
    await c.write_event(AudioStop().event())
    events = await read_until(c, "transcript-stop")
    assert Transcript.from_event(events[-2]).text.strip()


async def test_a_chunk_format_that_changes_mid_stream_is_refused(wyoming: Wyoming) -> None:
    server = await wyoming()
    async with client(server) as c:
        await speak(c, pcm(SPEECH[:8000]))
        await c.write_event(AudioChunk(audio=b"\0\0" * 80, rate=8000, width=2, channels=1).event())
        assert (await refused(c)).code == "bad_audio"


async def test_a_stalled_client_times_out_with_an_error(wyoming: Wyoming) -> None:
    server = await wyoming(idle_timeout_s=0.5)
    async with client(server) as c:
        assert c._writer is not None
        c._writer.write(b'{"type": "audio-start", "data_len')  # and nothing more
        error = await refused(c)
        assert error.code == "timeout"
    async with client(server) as c:  # the listener still serves
        await c.write_event(Describe().event())
        event = await c.read_event()
        assert event is not None and event.type == "info"


async def test_over_capacity_is_refused_with_an_error(wyoming: Wyoming) -> None:
    server = await wyoming(max_sessions=1)
    async with client(server) as first:
        await first.write_event(Describe().event())
        assert await first.read_event() is not None
        async with client(server) as second:
            error = await refused(second)
            assert error.code == "session_limit"


async def test_shutdown_stops_the_listener(wyoming: Wyoming) -> None:
    server = await wyoming()
    assert server.wyoming is not None
    port = server.wyoming.port
    await server.shutdown(timeout=5)
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", port)
