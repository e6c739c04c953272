"""The server with the real tiny.en model on real speech from tests/data/speech (slow tests).

Conformance end to end (ready -> partials -> finals in order -> done -> close 1000) and the
same finals, within a small WER margin, for every encoding and input rate.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import numpy as np
import pytest
import soxr
from kettle.streaming.client.client import ClientOptions, stream_audio, to_s16le
from kettle.streaming.server.server import KettleServer, ServerConfig
from kettle.transcribe.audio.read import load_audio
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

pytestmark = pytest.mark.slow

CLIP = "jfk__openai_whisper_jfk.flac"  # 11 s, 44.1 kHz stereo, pauses between phrases


@pytest.fixture(scope="module")
def clip(eval_clip: Callable[[str], Any]) -> tuple[np.ndarray, str]:
    found = eval_clip(CLIP)
    return load_audio(found.path), found.reference


@pytest.fixture
async def server(tiny_decoder: Any) -> AsyncIterator[KettleServer]:
    async with KettleServer(ServerConfig(port=0), lambda: tiny_decoder) as running:
        yield running


def _words(text: str) -> list[str]:
    # docs/protocol.md's comparison: lowercase, punctuation removed, apostrophes inside words kept
    return [w.strip("'") for w in re.sub(r"[^\w\s']", " ", text.lower()).split() if w.strip("'")]


async def test_conformance_with_the_real_model(
    server: KettleServer, clip: tuple[np.ndarray, str], wer_fn: Any
) -> None:
    audio, reference = clip
    received: list[dict[str, Any]] = []
    # Twice real time: fast enough for the suite, slow enough for partials.
    options = ClientOptions(url=server.ws_url, realtime=True, chunk_ms=100, word_timestamps=True)
    result = await _stream_at(audio, options, speed=2.0, sink=received)
    assert result["close_code"] == 1000
    kinds = [m["type"] for m in received]
    assert kinds[0] == "ready" and kinds[-1] == "done"
    assert received[0]["model"] == "tiny.en" and received[0]["protocol"] == 1
    assert "partial" in kinds, "partials arrive while the audio streams"
    assert "error" not in kinds
    finals = [m for m in received if m["type"] == "final"]
    assert [f["utterance"] for f in finals] == list(range(len(finals)))
    assert received[-1]["utterances"] == len(finals) >= 1
    assert received[-1]["audio_seconds"] == round(len(audio) / 16000, 3)
    # stable prefixes hold for every later partial and the final of the utterance
    by_utt: dict[int, list[dict[str, Any]]] = {}
    for m in received:
        if m["type"] in ("partial", "final"):
            by_utt.setdefault(m["utterance"], []).append(m)
    for messages in by_utt.values():
        assert messages[-1]["type"] == "final"
        assert all(m["type"] == "partial" for m in messages[:-1])
        for i, m in enumerate(messages[:-1]):
            stable = _words(m["stable"])
            for later in messages[i:]:
                assert _words(later["text"])[: len(stable)] == stable
    for f in finals:
        assert f["start"] < f["end"] <= 11.0
        for w in f["words"]:
            assert f["start"] - 0.5 <= w["start"] <= w["end"] <= f["end"] + 0.5
            assert 0.0 <= w["probability"] <= 1.0
    hypothesis = " ".join(f["text"] for f in finals)
    assert wer_fn([reference], [hypothesis]) <= 0.2
    assert server.metrics.value("kettle_final_lag_seconds_count") == len(finals)
    assert server.metrics.value("kettle_partial_lag_seconds_count") >= 1


async def _stream_at(
    audio: np.ndarray, options: ClientOptions, *, speed: float, sink: list[dict[str, Any]]
) -> dict[str, Any]:
    """Like a microphone at `speed` x real time: chunk i goes out at (i + 1) * chunk / speed."""
    data = to_s16le(audio)
    chunk = 16000 * options.chunk_ms // 1000 * 2
    async with connect(options.url) as ws:
        await ws.send(json.dumps({"type": "config", "word_timestamps": options.word_timestamps}))

        async def reader() -> None:
            try:
                async for raw in ws:
                    sink.append(json.loads(raw))
            except ConnectionClosed:
                pass

        task = asyncio.create_task(reader())
        loop = asyncio.get_running_loop()
        start = loop.time()
        for i, offset in enumerate(range(0, len(data), chunk)):
            await asyncio.sleep(
                max(0.0, start + (i + 1) * options.chunk_ms / 1000 / speed - loop.time())
            )
            await ws.send(data[offset : offset + chunk])
        await ws.send('{"type": "stop"}')
        await asyncio.wait_for(task, 120)
        return {"close_code": ws.close_code}


def _mulaw(x: np.ndarray) -> bytes:
    """G.711 u-law encoding of float samples in [-1, 1]."""
    pcm = np.clip(np.round(x * 32767.0), -32768, 32767).astype(np.int32)
    sign = (pcm < 0).astype(np.int32)
    mag = np.minimum(np.abs(pcm), 32635) + 0x84
    exponent = np.floor(np.log2(mag)).astype(np.int32) - 7
    mantissa = (mag >> (exponent + 3)) & 0x0F
    return (~((sign << 7) | (exponent << 4) | mantissa) & 0xFF).astype(np.uint8).tobytes()


async def _send_encoded(url: str, query: str, data: bytes, chunk: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    async with connect(f"{url}?{query}", max_size=None) as ws:
        await ws.send('{"type": "config", "partials": false}')  # finals are the point here
        for offset in range(0, len(data), chunk):
            await ws.send(data[offset : offset + chunk])
        await ws.send('{"type": "stop"}')
        try:
            async for raw in ws:
                messages.append(json.loads(raw))
        except ConnectionClosed:
            pass
        assert ws.close_code == 1000
    return messages


async def test_every_encoding_gives_the_same_finals(
    server: KettleServer, clip: tuple[np.ndarray, str], wer_fn: Any
) -> None:
    audio, reference = clip
    at_8k = soxr.resample(audio, 16000, 8000).astype(np.float32)
    at_44k = soxr.resample(audio, 16000, 44100).astype(np.float32)
    stereo = np.stack([at_44k, 0.8 * at_44k], axis=1).reshape(-1).astype("<f4").tobytes()
    cases = {
        "s16le 16 kHz": ("encoding=pcm_s16le", to_s16le(audio), 3200),
        "mulaw 8 kHz": ("encoding=mulaw", _mulaw(at_8k), 800),
        # 1001 bytes: frames (8 bytes) split mid-sample in almost every message
        "f32le 44.1 kHz stereo": ("encoding=pcm_f32le&sample_rate=44100&channels=2", stereo, 1001),
        "s16le 16 kHz odd splits": ("", to_s16le(audio), 777),
    }
    outputs = await asyncio.gather(
        *(_send_encoded(server.ws_url, q, data, chunk) for q, data, chunk in cases.values())
    )
    texts: dict[str, str] = {}
    for name, messages in zip(cases, outputs, strict=True):
        # overloaded (partials skipped) is allowed when four streams arrive at full speed
        assert [m for m in messages if m["type"] == "error" and m["code"] != "overloaded"] == []
        assert messages[-1]["type"] == "done", name
        assert abs(messages[-1]["audio_seconds"] - len(audio) / 16000) < 0.01, name
        texts[name] = " ".join(m["text"] for m in messages if m["type"] == "final")
    baseline = texts["s16le 16 kHz"]
    base_wer = wer_fn([reference], [baseline])
    assert base_wer <= 0.2, baseline
    for name, text in texts.items():
        assert wer_fn([baseline], [text]) <= 0.15, (name, text, baseline)
        assert wer_fn([reference], [text]) <= base_wer + 0.1, (name, text)


async def test_client_library_against_real_model(
    server: KettleServer, clip: tuple[np.ndarray, str], wer_fn: Any
) -> None:
    audio, reference = clip
    result = await stream_audio(audio, ClientOptions(url=server.ws_url, partials=False))
    assert result.close_code == 1000 and result.partials == []
    assert wer_fn([reference], [result.text]) <= 0.2
