"""One recording through every protocol kettle speaks gives the same final text (slow).

Live protocols share the session, so their finals must match word for word; uploads go
through the file pipeline's own windows, and on these recordings say the same. Partials are
off: their stable words are forced into the finals, and which partials get decoded depends on
the machine's speed, so with them the finals may differ by timing, not by protocol. Each client is
the protocol's own: kettle's `stream_audio` for PROTOCOL.md, the official Deepgram SDK for
`/v1/listen` (WebSocket and POST). Texts are compared after PROTOCOL.md's normalisation
(lowercase, punctuation removed), since each API formats its own way.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from deepgram import AsyncDeepgramClient
from deepgram.environment import DeepgramClientEnvironment
from kettle.streaming.agreement import normalize_word
from kettle.streaming.client import ClientOptions, stream_audio, to_s16le
from kettle.streaming.server import KettleServer, ServerConfig
from kettle.transcribe.audio_io import load_audio

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::DeprecationWarning:deepgram"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning:websockets"),
]

SPEECH = Path(__file__).resolve().parents[1] / "data" / "speech" / "audio"
RECORDINGS = ("jfk__openai_whisper_jfk.flac", "ls__1089-134686-0000.flac")
PIECE = 3200  # bytes: 100 ms of 16 kHz linear16

Protocol = Callable[[KettleServer, Path], Awaitable[str]]


@pytest.fixture
async def server(tiny_decoder: Any) -> AsyncIterator[KettleServer]:
    async with KettleServer(ServerConfig(port=0), lambda: tiny_decoder) as running:
        yield running


def words(text: str) -> list[str]:
    return [w for w in (normalize_word(t) for t in text.split()) if w]


def deepgram(server: KettleServer) -> AsyncDeepgramClient:
    ws = server.url.replace("http", "ws", 1)
    env = DeepgramClientEnvironment(base=server.url, production=ws, agent=ws, agent_rest=ws)
    return AsyncDeepgramClient(api_key="unused", environment=env)


async def kettle_v1(server: KettleServer, path: Path) -> str:
    options = ClientOptions(url=server.ws_url, partials=False)
    result = await stream_audio(load_audio(path), options)
    assert result.close_code == 1000
    return " ".join(f["text"] for f in result.finals)


async def deepgram_live(server: KettleServer, path: Path) -> str:
    pcm = to_s16le(load_audio(path))
    finals = []
    async with deepgram(server).listen.v1.connect(
        model="nova-3", encoding="linear16", sample_rate=16000, interim_results=False
    ) as socket:
        for i in range(0, len(pcm), PIECE):
            await socket.send_media(pcm[i : i + PIECE])
        await socket.send_close_stream()
        async for message in socket:
            if message.type == "Results" and message.is_final:
                finals.append(message.channel.alternatives[0].transcript)
    return " ".join(finals)


async def deepgram_upload(server: KettleServer, path: Path) -> str:
    response: Any = await deepgram(server).listen.v1.media.transcribe_file(
        request=path.read_bytes(), model="nova-3"
    )
    return str(response.results.channels[0].alternatives[0].transcript)


PROTOCOLS: dict[str, Protocol] = {
    "kettle v1": kettle_v1,
    "deepgram live": deepgram_live,
    "deepgram upload": deepgram_upload,
}


@pytest.mark.parametrize("name", RECORDINGS)
async def test_every_protocol_gives_the_same_final_text(server: KettleServer, name: str) -> None:
    texts = {label: words(await run(server, SPEECH / name)) for label, run in PROTOCOLS.items()}
    first = texts["kettle v1"]
    assert len(first) >= 8, texts
    assert all(text == first for text in texts.values()), texts
