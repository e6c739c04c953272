"""The official Deepgram SDK (unchanged but for its base URL) asks a real server for
``diarize``, live and prerecorded: fake model, pitch speaker encoder (the voice is its pitch),
so the two speakers are known. Without a speaker model both endpoints answer 400."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Awaitable, Callable
from itertools import groupby
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
from deepgram import AsyncDeepgramClient
from deepgram.core.api_error import ApiError
from deepgram.environment import DeepgramClientEnvironment
from kettle.streaming.engine.speakers import SpeakerService
from kettle.streaming.protocols.deepgram.wire import NO_SPEAKER_MODEL
from kettle.streaming.server.server import KettleServer
from kettle.transcribe.audio.read import load_audio
from kettle.transcribe.model.fake import scripted_audio, synth_voice
from kettle.transcribe.speakers.fake import PitchSpeakerEncoder

from tests.conftest import pcm16
from tests.containers import chunks
from tests.streaming.conftest import MakeServer

pytestmark = [
    # The SDK's async client is built on websockets' legacy API.
    pytest.mark.filterwarnings("ignore::DeprecationWarning:deepgram"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning:websockets"),
]

KEY = "dg-key"
GUARD = 60  # seconds: a deadlock guard only
# Three turns, two voices (f0 140 Hz, 230 Hz, 140 Hz again), apart by pauses the VAD ends at.
TURNS = [
    ("silence", 0.3),
    ("voice@140", 2.0),
    ("silence", 1.2),
    ("voice@230", 2.0),
    ("silence", 1.2),
    ("voice@140", 2.0),
    ("silence", 1.2),
]
SPEECH = load_audio(Path(__file__).resolve().parents[2] / "data" / "jfk.flac")


@pytest.fixture
def make_server(make_server: MakeServer) -> Callable[..., Awaitable[KettleServer]]:
    """The shared factory, with or without the pitch stand-in speaker model."""

    def start(speakers: bool = True) -> Awaitable[KettleServer]:
        service = SpeakerService(PitchSpeakerEncoder()) if speakers else None
        diarize = "auto" if speakers else "off"
        return make_server(speakers=service, api_keys=(KEY,), diarize=diarize)

    return start


def client(server: KettleServer) -> AsyncDeepgramClient:
    ws = server.url.replace("http", "ws", 1)
    env = DeepgramClientEnvironment(base=server.url, production=ws, agent=ws, agent_rest=server.url)
    return AsyncDeepgramClient(api_key=KEY, environment=env)


def wav(samples: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    sf.write(buffer, samples, 16000, format="WAV", subtype="PCM_16")
    return buffer.getvalue()


def turns(words: list[Any]) -> list[int]:
    """The speakers of the words in order, each run of one speaker once."""
    return [speaker for speaker, _ in groupby(w.speaker for w in words)]


async def test_live_words_carry_two_speakers_in_turn_order(
    make_server: Callable[..., Any],
) -> None:
    server = await make_server()
    seen: list[Any] = []
    async with client(server).listen.v1.connect(
        model="nova-3", encoding="linear16", sample_rate=16000, diarize=True
    ) as socket:

        async def read() -> None:
            async for message in socket:
                seen.append(message)

        reader = asyncio.create_task(read())
        for piece in chunks(pcm16(scripted_audio(TURNS)), 3200):
            await socket.send_media(piece)
        await socket.send_close_stream()
        await asyncio.wait_for(reader, GUARD)
    finals = [m for m in seen if m.type == "Results" and m.is_final]
    words = [w for m in finals for w in m.channel.alternatives[0].words]
    assert words and turns(words) == [0, 1, 0]
    for m in finals:  # a final is one speaker's
        assert len({w.speaker for w in m.channel.alternatives[0].words}) <= 1
    # (The SDK's live word model keeps speaker_confidence as an extra field.)
    assert all(0.0 <= getattr(w, "speaker_confidence") <= 1.0 for w in words)  # noqa: B009


async def test_live_multichannel_labels_each_channels_speakers_on_their_own(
    make_server: Callable[..., Any],
) -> None:
    server = await make_server()
    left = scripted_audio([*TURNS[:4], ("silence", 2.0)])  # 140 Hz, then 230 Hz
    right = scripted_audio([("silence", 0.3), ("voice@310", 2.0), ("silence", 3.2)])
    n = max(len(left), len(right))
    stereo = np.zeros((n, 2), dtype=np.float32)
    stereo[: len(left), 0], stereo[: len(right), 1] = left, right
    seen: list[Any] = []
    async with client(server).listen.v1.connect(
        model="nova-3",
        encoding="linear16",
        sample_rate=16000,
        channels=2,
        multichannel=True,
        diarize=True,
    ) as socket:

        async def read() -> None:
            async for message in socket:
                seen.append(message)

        reader = asyncio.create_task(read())
        for piece in chunks(pcm16(stereo.reshape(-1)), 6400):
            await socket.send_media(piece)
        await socket.send_close_stream()
        await asyncio.wait_for(reader, GUARD)
    by_channel = [
        [
            w
            for m in seen
            if m.type == "Results" and m.is_final and m.channel_index == [i, 2]
            for w in m.channel.alternatives[0].words
        ]
        for i in range(2)
    ]
    assert turns(by_channel[0]) == [0, 1]
    assert turns(by_channel[1]) == [0]  # the channel's own first speaker


def conversation() -> np.ndarray:
    """Three turns of real speech (Silero VAD, which cuts uploads into windows, hears the
    synthetic voice only in bits), each with a voice of its own pitch over it (the pitch
    encoder's speaker); each turn is a window of its own."""
    voice = lambda f0: SPEECH + synth_voice(len(SPEECH) / 16000, f0=f0)  # noqa: E731
    pause = np.zeros(24000, dtype=np.float32)
    return np.concatenate([pause, voice(140), pause, voice(230), pause, voice(140), pause])


async def test_prerecorded_words_carry_two_speakers_in_turn_order(
    make_server: Callable[..., Any],
) -> None:
    server = await make_server()
    response: Any = await client(server).listen.v1.media.transcribe_file(
        request=wav(conversation()), model="nova-3", diarize=True
    )
    words = response.results.channels[0].alternatives[0].words
    assert words and turns(words) == [0, 1, 0]
    assert all(0.0 <= w.speaker_confidence <= 1.0 for w in words)
    plain: Any = await client(server).listen.v1.media.transcribe_file(
        request=wav(conversation()), model="nova-3"
    )
    assert all(w.speaker is None for w in plain.results.channels[0].alternatives[0].words)


async def test_diarize_without_a_speaker_model_is_refused_with_400(
    make_server: Callable[..., Any],
) -> None:
    server = await make_server(speakers=False)
    with pytest.raises(ApiError) as live:
        async with client(server).listen.v1.connect(
            model="nova-3", encoding="linear16", sample_rate=16000, diarize=True
        ):
            pass
    assert live.value.status_code == 400
    with pytest.raises(ApiError) as upload:
        await client(server).listen.v1.media.transcribe_file(
            request=wav(scripted_audio(TURNS)), model="nova-3", diarize=True
        )
    assert upload.value.status_code == 400
    assert upload.value.body["err_msg"] == NO_SPEAKER_MODEL
