"""Issue 38's cases with the real model, through a real server (slow tests): speech after odd
input is kept, and an upload reads the same whatever is decoded beside it.

- kettle v1, a `finalize` after every 100 ms of audio: the words come back (before, no final
  at all: each 100 ms final read as nothing, and its audio was dropped);
- OpenAI Realtime, a 1-byte append and a commit, or commits of an empty buffer, before the
  speech: its `completed` transcript is the speech (before, empty: the stray byte shifted
  every later sample);
- the same clip posted alone and among other uploads of other lengths gets the same text.

Text is compared with the same model's whole-clip reading, never with a fixed string (int8
rounds differently on AVX2 and AVX-512).
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import re
from collections.abc import Callable
from typing import Any

import httpx
import numpy as np
import pytest
import soundfile as sf
from kettle.kernels.resample import resample
from kettle.streaming.client.client import to_s16le
from kettle.streaming.server.server import KettleServer
from kettle.transcribe.audio.read import load_audio
from kettle.transcribe.types import DecodeKind, DecodeRequest
from websockets.asyncio.client import connect

pytestmark = pytest.mark.slow

SENTENCE = "Fresh coffee and warm bread waited on the table for the guests."
GUARD = 120  # seconds: a deadlock guard only
REALTIME = "/v1/realtime?intent=transcription"
COMPLETED = "conversation.item.input_audio_transcription.completed"


@pytest.fixture
def load_model(tiny_decoder: Any) -> Callable[[], Any]:
    return lambda: tiny_decoder


@pytest.fixture(scope="module")
def speech(espeak: Callable[..., np.ndarray]) -> np.ndarray:
    silence = np.zeros(4000, np.float32)
    return np.concatenate([silence, espeak(SENTENCE), silence])


def words(text: str) -> list[str]:
    return re.sub(r"[^\w\s']", " ", text.lower()).split()


def whole(decoder: Any, audio: np.ndarray) -> list[str]:
    """The model's reading of the clip decoded whole (what the server's text is held to)."""
    request = DecodeRequest(audio, DecodeKind.FINAL, "whole", beam_size=5)
    return words(decoder.decode_batch([request])[0].text)


def kept(reference: list[str], hypothesis: list[str]) -> float:
    """The share of the reference's words the hypothesis holds in order (LCS / reference)."""
    rows = [[0] * (len(hypothesis) + 1) for _ in range(len(reference) + 1)]
    for i, r in enumerate(reference):
        for j, h in enumerate(hypothesis):
            rows[i + 1][j + 1] = rows[i][j] + 1 if r == h else max(rows[i][j + 1], rows[i + 1][j])
    return rows[-1][-1] / max(len(reference), 1)


async def test_v1_finalize_every_100_ms_keeps_the_words(
    server: KettleServer, speech: np.ndarray, tiny_decoder: Any
) -> None:
    pcm = to_s16le(np.concatenate([speech, np.zeros(16000, np.float32)]))
    finals: list[str] = []
    async with connect(server.ws_url) as ws:
        for i in range(0, len(pcm), 3200):
            await ws.send(pcm[i : i + 3200])
            await ws.send(json.dumps({"type": "finalize"}))
            await asyncio.sleep(0.1)  # real time: ten finalizes a second is within the rate
        await ws.send(json.dumps({"type": "stop"}))
        async for raw in ws:
            message = json.loads(raw)
            if message["type"] == "final":
                finals.append(message["text"])
            assert message["type"] != "error", message
    heard = words(" ".join(finals))
    # Each 100 ms final is decoded in the context of those before it: the words come back,
    # though a reading of 100 ms pieces is rougher than one of the whole sentence.
    # (Before issue 38: no final at all. The bound leaves room for int8 rounding on any CPU.)
    assert kept(whole(tiny_decoder, speech), heard) >= 0.3, heard


async def realtime_transcript(server: KettleServer, odd: list[dict[str, Any]], speech: np.ndarray):
    """The `completed` transcripts after ``odd``, then the speech appended and committed
    (turn detection off: the client commits), and the errors the server sent."""
    pcm24 = to_s16le(resample(speech, 16000, 24000))
    url = server.ws_url.replace("/v1/stream", REALTIME)
    transcripts: list[str] = []
    errors: list[str] = []
    async with connect(url) as ws:
        off = {"type": "transcription", "audio": {"input": {"turn_detection": None}}}
        await ws.send(json.dumps({"type": "session.update", "session": off}))
        for event in odd:
            await ws.send(json.dumps(event))
        for i in range(0, len(pcm24), 4800):
            audio = base64.b64encode(pcm24[i : i + 4800]).decode()
            await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": audio}))
        await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
        async with asyncio.timeout(GUARD):
            while not transcripts:
                message = json.loads(await ws.recv())
                if message["type"] == "error":
                    errors.append(message["error"]["code"])
                elif message["type"] == COMPLETED:
                    transcripts.append(message["transcript"])
    return transcripts, errors


ONE_BYTE = base64.b64encode(b"\x01").decode()
ODD = {
    "one byte, then commit": [
        {"type": "input_audio_buffer.append", "audio": ONE_BYTE},
        {"type": "input_audio_buffer.commit"},
    ],
    "empty commits": [{"type": "input_audio_buffer.commit"}] * 3,
    "three bytes": [
        {"type": "input_audio_buffer.append", "audio": base64.b64encode(b"\1\2\3").decode()}
    ],
}


@pytest.mark.parametrize("case", list(ODD))
async def test_realtime_speech_after_odd_appends_and_commits(
    server: KettleServer, speech: np.ndarray, tiny_decoder: Any, case: str
) -> None:
    transcripts, errors = await realtime_transcript(server, ODD[case], speech)
    plain, _ = await realtime_transcript(server, [], speech)
    assert errors, "the odd input gets OpenAI's error"
    # The same reading as without the odd input (not bit-exact: live decodes batch by timing).
    assert kept(words(plain[0]), words(transcripts[0])) >= 0.8
    assert kept(whole(tiny_decoder, speech), words(transcripts[0])) >= 0.6  # (not empty)


async def test_an_upload_reads_the_same_among_other_lengths(
    server: KettleServer, eval_clips: list[Any]
) -> None:
    # Batch-mates on other encoder lengths (windows are encoded in 5 s steps, 10 s at least):
    # same-length requests share a generate call, whose batch shape may still flip a token.
    by_length = sorted(eval_clips, key=lambda c: c.duration_s)
    clip = next(c for c in by_length if 3.0 <= c.duration_s <= 8.0)
    others = [c for c in by_length if c.duration_s >= 10.0][-3:]

    def body(path: Any) -> bytes:
        out = io.BytesIO()
        sf.write(out, load_audio(path), 16000, format="WAV")
        return out.getvalue()

    async def post(client: httpx.AsyncClient, data: bytes) -> str:
        files = {"file": ("clip.wav", data, "audio/wav")}
        response = await client.post(
            f"{server.url}/v1/audio/transcriptions", data={"model": "whisper-1"}, files=files
        )
        assert response.status_code == 200, response.text
        return str(response.json()["text"])

    async with httpx.AsyncClient(timeout=GUARD) as client:
        alone = await post(client, body(clip.path))
        crowd = await asyncio.gather(
            *(post(client, body(c.path)) for c in others), post(client, body(clip.path))
        )
    assert crowd[-1] == alone
