"""Deepgram's live features on a real server with the fake model, over a plain WebSocket:
keyterm/keywords and Configure reaching the decoder, multichannel (a stream per channel,
a session slot per stream), containerised audio, and undecodable audio."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from kettle.streaming.server.server import KettleServer
from kettle.transcribe.audio.read import load_audio
from kettle.transcribe.model.fake import FakeDecoder
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.conftest import pcm16
from tests.containers import chunks, encode

RAW = "encoding=linear16&sample_rate=16000"  # raw audio: both are required

KEY = "dg-key"
GUARD = 60  # seconds: a deadlock guard only
SPEECH = load_audio(Path(__file__).resolve().parents[2] / "data" / "jfk.flac")
PIECE = 3200


@pytest.fixture
def server_settings() -> dict[str, Any]:
    return {"api_keys": (KEY,)}


def url(server: KettleServer, query: str) -> str:
    return server.url.replace("http", "ws", 1) + "/v1/listen?" + query


async def session(
    server: KettleServer,
    query: str,
    audio: bytes,
    *,
    piece: int = PIECE,
    midway: str | None = None,
) -> tuple[list[dict[str, Any]], int | None]:
    """Send the audio (and ``midway``, a text message, half-way), CloseStream; every message
    the server sent, and the close code."""
    messages: list[dict[str, Any]] = []
    async with connect(
        url(server, query), additional_headers={"Authorization": f"Token {KEY}"}
    ) as ws:

        async def read() -> None:
            with contextlib.suppress(ConnectionClosed):  # (a close other than 1000)
                async for text in ws:
                    messages.append(json.loads(text))

        reader = asyncio.create_task(read())
        parts = chunks(audio, piece)
        with contextlib.suppress(ConnectionClosed):  # the server may close first
            for i, part in enumerate(parts):
                if midway is not None and i == len(parts) // 2:
                    await ws.send(midway)
                await ws.send(part)
            await ws.send('{"type": "CloseStream"}')
        await asyncio.wait_for(reader, GUARD)
        return messages, ws.close_code


def finals(messages: list[dict[str, Any]], channel: int | None = None) -> list[dict[str, Any]]:
    return [
        m
        for m in messages
        if m["type"] == "Results"
        and m["is_final"]
        and (channel is None or m["channel_index"][0] == channel)
    ]


async def test_keyterms_reach_the_decoder_and_configure_replaces_them(
    make_server: Callable[..., Any],
) -> None:
    decoder = FakeDecoder(keep_requests=1000)
    server = await make_server(decoder)
    query = RAW + "&keyterm=Kettle&keywords=Whisper:3"
    configure = json.dumps({"type": "Configure", "keyterms": ["Ray Dalio"]})
    messages, code = await session(server, query, pcm16(SPEECH), midway=configure)
    assert code == 1000
    (success,) = [m for m in messages if m["type"] == "ConfigureSuccess"]
    assert success["keyterms"] == ["Ray Dalio"]
    hotwords = [r.hotwords for r in decoder.requests_seen]
    assert hotwords[0] == "Kettle. Whisper."
    assert hotwords[-1] == "Ray Dalio." and set(hotwords) == {"Kettle. Whisper.", "Ray Dalio."}


async def test_bad_keyterms_are_refused_in_deepgram_shape(make_server: Callable[..., Any]) -> None:
    server = await make_server()
    query = RAW + "&" + "&".join(f"keyterm=t{i}" for i in range(101))
    with pytest.raises(InvalidStatus) as refused:
        async with connect(
            url(server, query), additional_headers={"Authorization": f"Token {KEY}"}
        ):
            pass
    assert refused.value.response.status_code == 400
    body = json.loads(refused.value.response.body or b"{}")
    assert body["err_code"] == "Bad Request" and "at most" in body["err_msg"]


@pytest.mark.parametrize("query", ["encoding=linear16", "encoding=mulaw&channels=2"])
async def test_raw_audio_without_its_rate_is_refused(
    make_server: Callable[..., Any], query: str
) -> None:
    # Deepgram requires sample_rate with encoding: raw bytes do not say their rate.
    server = await make_server()
    with pytest.raises(InvalidStatus) as refused:
        async with connect(
            url(server, query), additional_headers={"Authorization": f"Token {KEY}"}
        ):
            pass
    assert refused.value.response.status_code == 400
    body = json.loads(refused.value.response.body or b"{}")
    assert body["err_code"] == "Bad Request" and "sample_rate is required" in body["err_msg"]


async def test_multichannel_transcribes_each_channel_on_its_own(
    make_server: Callable[..., Any],
) -> None:
    server = await make_server(max_sessions=2)
    silence = np.zeros_like(SPEECH)
    stereo = np.stack([silence, SPEECH], axis=1).reshape(-1)  # speech on channel 1 only
    query = RAW + "&channels=2&multichannel=true&vad_events=true"
    messages, code = await session(server, query, pcm16(stereo), piece=2 * PIECE)
    assert code == 1000
    assert finals(messages) and all(m["channel_index"] == [1, 2] for m in finals(messages))
    assert all(m["channel"] == [1, 2] for m in messages if m["type"] == "SpeechStarted")
    (meta,) = [m for m in messages if m["type"] == "Metadata"]
    assert messages[-1] is meta and meta["channels"] == 2
    assert meta["duration"] == pytest.approx(11.0, abs=0.01)
    # Without multichannel the same audio is mixed down: one transcript, channel 0 of 1.
    messages, _ = await session(server, RAW + "&channels=2", pcm16(stereo))
    assert finals(messages) and all(m["channel_index"] == [0, 1] for m in finals(messages))


async def test_multichannel_holds_a_session_slot_per_channel(
    make_server: Callable[..., Any],
) -> None:
    server = await make_server(max_sessions=2)
    headers = {"Authorization": f"Token {KEY}"}
    three = RAW + "&channels=3&multichannel=true"
    with pytest.raises(InvalidStatus) as never:
        async with connect(url(server, three), additional_headers=headers):
            pass
    assert never.value.response.status_code == 400  # more streams than the server runs
    two = RAW + "&channels=2&multichannel=true"
    async with connect(url(server, two), additional_headers=headers):
        assert server.sessions_active == 2
        with pytest.raises(InvalidStatus) as full:
            async with connect(url(server, RAW), additional_headers=headers):
                pass
        assert full.value.response.status_code == 503
    for _ in range(100):
        if server.sessions_active == 0:
            break
        await asyncio.sleep(0.05)
    assert server.sessions_active == 0


@pytest.mark.parametrize("kind", ["webm", "ogg"])
async def test_container_audio_without_encoding(make_server: Callable[..., Any], kind: str) -> None:
    server = await make_server()
    messages, code = await session(server, "model=nova-3&punctuate=true", encode(SPEECH, kind))
    assert code == 1000 and finals(messages)
    assert not [m for m in messages if m["type"] == "Error"]
    (meta,) = [m for m in messages if m["type"] == "Metadata"]
    assert meta["duration"] == pytest.approx(11.0, abs=0.1)  # the decoded audio's length


async def test_multichannel_container(make_server: Callable[..., Any]) -> None:
    server = await make_server(max_sessions=2)
    data = encode([SPEECH, np.zeros_like(SPEECH)], "webm")
    messages, code = await session(server, "channels=2&multichannel=true", data)
    assert code == 1000
    assert finals(messages) and all(m["channel_index"] == [0, 2] for m in finals(messages))


async def test_undecodable_container_is_a_data_error_and_1008(
    make_server: Callable[..., Any],
) -> None:
    server = await make_server()
    messages, code = await session(server, "model=nova-3", b"definitely not audio " * 2000)
    assert code == 1008
    (error,) = [m for m in messages if m["type"] == "Error"]
    assert error["variant"] == "DataError" and "cannot be decoded" in error["description"]
    assert messages[-1]["type"] == "Metadata"
