"""POST /v1/listen with a fake model: the body, raw audio, and every refusal in Deepgram's
error shape. (The official SDK against tiny.en is in tests/streaming/protocols.)"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from kettle.streaming.server.server import KettleServer
from kettle.transcribe.audio.read import load_audio
from kettle.transcribe.files.pipeline import PipelineConfig
from kettle.transcribe.files.windows import split_windows
from kettle.transcribe.model.fake import FakeDecoder
from kettle.transcribe.types import DecodeRequest

from tests.conftest import pcm16
from tests.containers import encode

KEY = "upload-key"
FLAC = (Path(__file__).resolve().parents[2] / "data" / "jfk.flac").read_bytes()  # real speech
GUARD = 60  # seconds: a deadlock guard only


def said(request: DecodeRequest) -> str:
    return "Hello, world."  # every window the pipeline decodes says this


@pytest.fixture
def server_settings() -> dict[str, Any]:
    return {"api_keys": (KEY,)}


@pytest.fixture
def load_model() -> Callable[[], FakeDecoder]:
    return lambda: FakeDecoder(text_for=said)


async def post(
    server: KettleServer, body: bytes, query: str = "", key: str | None = KEY, **headers: str
) -> httpx.Response:
    if key is not None:
        headers["Authorization"] = f"Token {key}"
    async with httpx.AsyncClient(timeout=GUARD) as client:
        return await client.post(f"{server.url}/v1/listen?{query}", content=body, headers=headers)


async def test_body_container_and_raw(make_server: Callable[..., Any]) -> None:
    server = await make_server()
    answer = await post(server, FLAC, "model=nova-3&punctuate=true")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert "request_id" not in body and body["metadata"]["request_id"]
    assert body["metadata"]["duration"] == pytest.approx(11.0, abs=0.01)
    alt = body["results"]["channels"][0]["alternatives"][0]
    assert set(alt["transcript"].split()) == {"Hello,", "world."}  # Whisper's formatted text
    assert {(w["word"], w["punctuated_word"]) for w in alt["words"]} == {
        ("hello", "Hello,"),
        ("world", "world."),
    }
    raw = pcm16(load_audio(FLAC))
    answer = await post(server, raw, "encoding=linear16&sample_rate=16000")
    plain = answer.json()["results"]["channels"][0]["alternatives"][0]["transcript"]
    assert plain == " ".join(w["word"] for w in alt["words"])  # punctuate off: plain words
    # Bearer (the SDK's access tokens) works as Token does.
    answer = await post(server, FLAC, key=None, Authorization=f"Bearer {KEY}")
    assert answer.status_code == 200


@pytest.mark.parametrize(
    ("body", "query", "headers", "status", "match"),
    [
        (b"RIFF not really audio", "", {}, 400, "cannot be decoded"),
        (b"", "", {}, 400, "empty"),
        (
            b'{"url": "https://example.com/a.wav"}',
            "",
            {"Content-Type": "application/json"},
            400,
            "URL",
        ),
        (b"\x00\x00", "encoding=opus", {}, 400, "encoding"),
        # Raw audio needs its rate, as on the live socket (Deepgram requires both).
        (b"\x00\x00", "encoding=linear16", {}, 400, "sample_rate is required"),
        (b"\x00\x00", "multichannel=maybe", {}, 400, "multichannel"),
        (b"\x00" * 2048, "", {}, 413, "limit"),
    ],
)
async def test_refusals_in_deepgram_shape(
    make_server: Callable[..., Any],
    body: bytes,
    query: str,
    headers: dict[str, str],
    status: int,
    match: str,
) -> None:
    server = await make_server(max_upload_bytes=1024)
    answer = await post(server, body, query, **headers)
    assert answer.status_code == status
    error = answer.json()
    assert set(error) == {"err_code", "err_msg", "request_id"} and match in error["err_msg"]


async def test_bad_key_is_401(make_server: Callable[..., Any]) -> None:
    server = await make_server()
    for key in ("wrong", None):
        answer = await post(server, FLAC, key=key)
        assert answer.status_code == 401 and answer.json()["err_code"] == "INVALID_AUTH"


async def test_full_upload_slots_answer_429_with_retry_after(
    make_server: Callable[..., Any],
) -> None:
    decoding, release = threading.Event(), threading.Event()

    def held(request: DecodeRequest) -> str:
        decoding.set()
        release.wait(GUARD)
        return "held"

    server = await make_server(FakeDecoder(text_for=held), max_uploads=1, retry_after_s=7)
    first = asyncio.create_task(post(server, FLAC))
    assert await asyncio.to_thread(decoding.wait, GUARD)  # the first upload is decoding
    second = await post(server, FLAC)
    assert second.status_code == 429 and second.headers["Retry-After"] == "7"
    release.set()
    done = await first
    assert done.status_code == 200
    transcript = done.json()["results"]["channels"][0]["alternatives"][0]["transcript"]
    assert set(transcript.split()) == {"held"}


async def test_a_client_that_leaves_frees_its_slot_and_its_work(
    make_server: Callable[..., Any],
) -> None:
    decoding, release = threading.Event(), threading.Event()

    def held(request: DecodeRequest) -> str:
        decoding.set()
        release.wait(GUARD)
        return "held"

    decoder = FakeDecoder(text_for=held)
    server = await make_server(decoder, max_uploads=1)
    # Real speech, 4.4 minutes: more windows than the file pipeline hands the engine at once.
    speech = load_audio(FLAC)
    audio = np.tile(speech, 24)
    first_call = PipelineConfig().batch_size
    assert len(split_windows(audio, PipelineConfig().windows)) > first_call
    body = pcm16(audio)
    url = httpx.URL(server.url)
    _, writer = await asyncio.open_connection(url.host, url.port)
    head = (
        "POST /v1/listen?encoding=linear16&sample_rate=16000 HTTP/1.1\r\n"
        f"Host: {url.host}:{url.port}\r\nAuthorization: Token {KEY}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    writer.write(head.encode() + body)
    await writer.drain()
    try:
        assert await asyncio.to_thread(decoding.wait, GUARD)  # its first window is in the model
        assert server.uploads.active == 1
        writer.close()  # the client leaves while the model holds that window
        await writer.wait_closed()
        async with asyncio.timeout(GUARD):  # a deadlock guard: the old route held the slot
            await server.uploads.wait_idle()  # until the model let go
        release.set()
        short = pcm16(speech[: 3 * 16000])
        answer = await post(server, short, "encoding=linear16&sample_rate=16000")
    finally:
        release.set()
    assert answer.status_code == 200, answer.text  # admitted: no 429
    transcript = answer.json()["results"]["channels"][0]["alternatives"][0]["transcript"]
    assert set(transcript.split()) == {"held"}
    long_windows = [r for r in decoder.requests_seen if len(r.audio) > 5 * 16000]
    # Only the pipeline's first call reached the engine; the rest was never asked for.
    assert 0 < len(long_windows) <= first_call, "the rest of the departed upload was withdrawn"


async def test_multichannel_and_keyterms(make_server: Callable[..., Any]) -> None:
    def said_loudest(request: DecodeRequest) -> str:
        # Which channel is this? The loud one says "loud", the quiet one "quiet".
        return "loud" if float(np.abs(request.audio).max()) > 0.3 else "quiet"

    decoder = FakeDecoder(text_for=said_loudest, voiced_rms=0.001, keep_requests=1000)
    server = await make_server(decoder)
    speech = load_audio(FLAC)[: 4 * 16000]
    loud = speech / max(float(np.abs(speech).max()), 1e-6) * 0.9
    quiet = loud * 0.2
    stereo = np.stack([quiet, loud], axis=1).reshape(-1)
    query = "encoding=linear16&sample_rate=16000&channels=2&multichannel=true&keyterm=Kettle"
    answer = await post(server, pcm16(stereo), query + "&keywords=Whisper:2")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    channels = body["results"]["channels"]
    assert body["metadata"]["channels"] == 2 and len(channels) == 2
    texts = [set(c["alternatives"][0]["transcript"].split()) for c in channels]
    assert texts == [{"quiet"}, {"loud"}]
    assert {r.hotwords for r in decoder.requests_seen} == {"Kettle. Whisper."}
    # A container's channels split the same way; without multichannel they are mixed.
    wav = encode([quiet, loud], "wav")
    channels = (await post(server, wav, "multichannel=true")).json()["results"]["channels"]
    assert [set(c["alternatives"][0]["transcript"].split()) for c in channels] == texts
    mixed = (await post(server, wav)).json()["results"]["channels"]
    assert len(mixed) == 1
    webm = encode([quiet, loud], "webm")  # (read by PyAV, not libsndfile)
    channels = (await post(server, webm, "multichannel=true")).json()["results"]["channels"]
    assert [set(c["alternatives"][0]["transcript"].split()) for c in channels] == texts
