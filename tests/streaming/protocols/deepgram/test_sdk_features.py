"""The official Deepgram SDK against a real server with tiny.en, for the features voice
agents use: keyterms (query and Configure), containerised live audio, multichannel live and
prerecorded. Text is checked by WER bounds, never word for word (slow tests)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from deepgram import AsyncDeepgramClient
from deepgram.listen.v1.types import ListenV1Configure
from kettle.transcribe.audio.read import load_audio

from tests.conftest import pcm16
from tests.containers import chunks, encode
from tests.streaming.protocols.deepgram.conftest import (
    JFK_REFERENCE,
    environment,
    finals_text,
    is_results,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::DeprecationWarning:deepgram"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning:websockets"),
]

DATA = Path(__file__).resolve().parents[3] / "data"
LS_CLIP = DATA / "speech" / "audio" / "ls__1089-134686-0000.flac"
LS_REFERENCE = (
    "HE HOPED THERE WOULD BE STEW FOR DINNER TURNIPS AND CARROTS AND BRUISED POTATOES AND FAT "
    "MUTTON PIECES TO BE LADLED OUT IN THICK PEPPERED FLOUR FATTENED SAUCE"
)
KEY = "dg-test-key"
GUARD = 120  # seconds: a deadlock guard, never a timing assertion


@pytest.fixture
def server_settings() -> dict[str, Any]:
    return {"api_keys": (KEY,)}


@pytest.fixture
def load_model(tiny_decoder: Any) -> Callable[[], Any]:
    return lambda: tiny_decoder


async def test_webm_opus_with_keyterms_and_configure(
    make_server: Callable[..., Any], wer_fn: Any
) -> None:
    server = await make_server()
    client = AsyncDeepgramClient(api_key=KEY, environment=environment(server.url))
    webm = encode(load_audio(DATA / "jfk.flac"), "webm")
    seen: list[Any] = []
    # No encoding: the container says what it holds, as Deepgram takes browser audio.
    async with client.listen.v1.connect(
        model="nova-3", keyterm=["Americans", "fellow"], punctuate=True
    ) as socket:

        async def read() -> None:
            async for message in socket:
                seen.append(message)

        reader = asyncio.create_task(read())
        pieces = chunks(webm, 2000)
        for i, piece in enumerate(pieces):
            if i == len(pieces) // 2:
                await socket.send_configure(ListenV1Configure(keyterms=["country"]))
            await socket.send_media(piece)
        await socket.send_close_stream()
        await asyncio.wait_for(reader, GUARD)
    (success,) = [m for m in seen if m.type == "ConfigureSuccess"]
    assert success.keyterms == ["country"]
    assert seen[-1].type == "Metadata" and seen[-1].duration == pytest.approx(11.0, abs=0.1)
    assert wer_fn([JFK_REFERENCE], [finals_text(seen)]) <= 0.2


async def test_multichannel_live_and_prerecorded(
    make_server: Callable[..., Any], wer_fn: Any
) -> None:
    server = await make_server()
    client = AsyncDeepgramClient(api_key=KEY, environment=environment(server.url))
    left, right = load_audio(DATA / "jfk.flac"), load_audio(LS_CLIP)
    n = max(len(left), len(right))
    stereo = np.zeros((n, 2), dtype=np.float32)
    stereo[: len(left), 0], stereo[: len(right), 1] = left, right
    pcm = pcm16(stereo.reshape(-1))
    seen: list[Any] = []
    async with client.listen.v1.connect(
        model="nova-3",
        encoding="linear16",
        sample_rate=16000,
        channels=2,
        multichannel=True,
        punctuate=True,
    ) as socket:

        async def read() -> None:
            async for message in socket:
                seen.append(message)

        reader = asyncio.create_task(read())
        for piece in chunks(pcm, 6400):
            await socket.send_media(piece)
        await socket.send_close_stream()
        await asyncio.wait_for(reader, GUARD)
    by_channel = [
        [m for m in seen if is_results(m) and m.channel_index == [i, 2]] for i in range(2)
    ]
    assert wer_fn([JFK_REFERENCE], [finals_text(by_channel[0])]) <= 0.2
    assert wer_fn([LS_REFERENCE], [finals_text(by_channel[1])]) <= 0.25
    assert seen[-1].type == "Metadata" and seen[-1].channels == 2
    # The same audio as one upload: a transcript per channel.
    response: Any = await client.listen.v1.media.transcribe_file(
        request=encode([left, right], "wav"), model="nova-3", multichannel=True, keyterm="stew"
    )
    texts = [c.alternatives[0].transcript for c in response.results.channels]
    assert len(texts) == 2 and response.metadata.channels == 2
    assert wer_fn([JFK_REFERENCE], [texts[0]]) <= 0.2
    assert wer_fn([LS_REFERENCE], [texts[1]]) <= 0.25
