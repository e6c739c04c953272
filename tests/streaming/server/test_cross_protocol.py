"""One recording through every protocol kettle speaks gives the same final text (slow).

Live protocols share the session, so their finals match word for word where the model was
given the same inputs (the test records them), and within a flipped token where it was not:
a speculative final's window, or a fallback's sampling, may depend on timing, and an input
one ulp away may round a token the other way on another CPU. Uploads go through the file
pipeline's own windows, and on these recordings say nearly the same. Partials are
off: their stable words are forced into the finals, and which partials get decoded depends on
the machine's speed, so with them the finals may differ by timing, not by protocol. Each client is
the protocol's own: kettle's `stream_audio` for docs/protocol.md, the official Deepgram SDK for
`/v1/listen` (WebSocket and POST), the official OpenAI SDK for `/v1/audio/transcriptions`
and Realtime (24 kHz PCM, server VAD with kettle's own pre-roll). Texts are compared after
docs/protocol.md's normalisation (lowercase, punctuation removed), since each API formats its own
way.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np
import openai
import pytest
import soxr
from deepgram import AsyncDeepgramClient
from deepgram.environment import DeepgramClientEnvironment
from kettle.streaming.cli.simulation import word_errors
from kettle.streaming.client.client import ClientOptions, stream_audio, to_s16le
from kettle.streaming.core.agreement import normalize_word
from kettle.streaming.server.server import KettleServer, ServerConfig
from kettle.transcribe.audio.read import load_audio

from tests.conftest import TOKEN_FLIP_WORD_EDITS, DecoderInputs

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::DeprecationWarning:deepgram"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning:websockets"),
]

SPEECH = Path(__file__).resolve().parents[2] / "data" / "speech" / "audio"
RECORDINGS = ("jfk__openai_whisper_jfk.flac", "ls__1089-134686-0000.flac")
PIECE = 3200  # bytes: 100 ms of 16 kHz linear16

Protocol = Callable[[KettleServer, Path], Awaitable[str]]


@pytest.fixture
def recorder(tiny_decoder: Any) -> DecoderInputs:
    return DecoderInputs(tiny_decoder)


@pytest.fixture
async def server(recorder: DecoderInputs) -> AsyncIterator[KettleServer]:
    async with KettleServer(ServerConfig(port=0), lambda: recorder) as running:
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


async def openai_upload(server: KettleServer, path: Path) -> str:
    client = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="unused")
    result = await client.audio.transcriptions.create(model="whisper-1", file=path)
    return result.text


async def openai_realtime(server: KettleServer, path: Path) -> str:
    audio = soxr.resample(load_audio(path), 16000, 24000)
    pcm = (np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes() + bytes(2 * 24000)
    client = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="unused")
    async with client.realtime.connect(extra_query={"intent": "transcription"}) as conn:
        await conn.session.update(
            session={
                "type": "transcription",
                "audio": {
                    "input": {
                        # Deltas from finals only, as partials are off for the other protocols.
                        "transcription": {"delay": "high"},
                        "turn_detection": {
                            "type": "server_vad",
                            "prefix_padding_ms": 250,
                            "silence_duration_ms": 500,
                        },
                    }
                },
            }
        )
        for i in range(0, len(pcm), 4800):  # 100 ms
            await conn.input_audio_buffer.append(audio=base64.b64encode(pcm[i : i + 4800]).decode())
        # The trailing silence ended the last turn; committing it gives an empty item, which
        # comes after every turn before it has been committed.
        await conn.input_audio_buffer.commit()
        order: list[str] = []
        spoken: set[str] = set()
        texts: dict[str, str] = {}
        async for event in conn:
            assert event.type != "error", event
            if event.type == "input_audio_buffer.speech_started":
                spoken.add(event.item_id)
            elif event.type == "input_audio_buffer.committed":
                order.append(event.item_id)
            elif event.type == "conversation.item.input_audio_transcription.completed":
                texts[event.item_id] = event.transcript
            silent = [i for i in order if i not in spoken]
            if silent and silent[0] in texts and spoken <= texts.keys():
                break
    return " ".join(texts[i] for i in order if texts.get(i))


PROTOCOLS: dict[str, Protocol] = {
    "kettle v1": kettle_v1,
    "deepgram live": deepgram_live,
    "deepgram upload": deepgram_upload,
    "openai upload": openai_upload,
    "openai realtime": openai_realtime,
}


def _same_inputs(a: list[Any], b: list[Any]) -> bool:
    """Whether two runs gave the model the same batches, none of them sampled."""
    return bool(a) and a == b and not any(sampled for _, sampled in a)


@pytest.mark.parametrize("name", RECORDINGS)
async def test_every_protocol_gives_the_same_final_text(
    server: KettleServer, recorder: DecoderInputs, name: str
) -> None:
    texts: dict[str, list[str]] = {}
    inputs: dict[str, list[Any]] = {}  # each protocol's decode batches, as the model saw them
    for label, run in PROTOCOLS.items():
        mark = recorder.mark()
        texts[label] = words(await run(server, SPEECH / name))
        inputs[label] = recorder.since(mark)
    first = texts["kettle v1"]
    assert len(first) >= 8, texts
    # The live protocols share the session, the uploads the file pipeline: word for word
    # where the model saw the same inputs, else within a flipped token.
    for a, b in (("kettle v1", "deepgram live"), ("deepgram upload", "openai upload")):
        if _same_inputs(inputs[a], inputs[b]):
            assert texts[a] == texts[b], (a, b, texts)
        else:
            errors, _ = word_errors(" ".join(texts[a]), " ".join(texts[b]))
            assert errors <= TOKEN_FLIP_WORD_EDITS, (a, b, texts)
    # The upload is decoded by the file pipeline's own windows (live finals are decoded in the
    # stream's context), so it may differ by a few words ("out in" / "out and",
    # "flowerfattened" / "flower fattened"); so may Realtime, its audio resampled to 24 kHz and
    # back and its turns cut by its own server VAD.
    for label in ("deepgram upload", "openai upload", "openai realtime"):
        errors, _ = word_errors(" ".join(first), " ".join(texts[label]))
        assert errors <= max(3, len(first) // 7), (label, texts)
