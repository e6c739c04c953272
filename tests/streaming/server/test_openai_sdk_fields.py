"""The official OpenAI SDK, unchanged but for its base URL, sending the fields the voice-agent
plugins use, against a kettle server with the fake model: include logprobs, keywords,
languages, chunking_strategy and the stream's done event on the audio REST API; languages,
keywords, include logprobs and the model rule on Realtime transcription sessions."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable
from typing import Any

import numpy as np
import openai
import pytest
import soxr
from kettle.transcribe.model.fake import FakeDecoder, scripted_audio

from tests.conftest import pcm16
from tests.streaming.server.server_thread import ServerThread

KEY = "test-key"
CLIP = "jfk__openai_whisper_jfk.flac"
TRANSCRIBED = "conversation.item.input_audio_transcription."


@pytest.fixture(scope="module")
def server(serve_in_thread: Callable[..., ServerThread], fake: FakeDecoder) -> ServerThread:
    return serve_in_thread(fake, api_keys=(KEY,))


@pytest.fixture(scope="module")
def client(server: ServerThread) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0)


@pytest.fixture(scope="module")
def speech(eval_clip: Callable[[str], Any]) -> tuple[str, bytes]:
    """Real speech (Silero cuts uploads, and hears none in the fake voice) as a file."""
    path = eval_clip(CLIP).path
    return path.name, path.read_bytes()


def test_json_logprobs_languages_and_usage(
    client: openai.OpenAI, speech: tuple[str, bytes]
) -> None:
    result = client.audio.transcriptions.create(
        model="gpt-4o-mini-transcribe", file=speech, include=["logprobs"]
    )
    assert result.text.split()[:2] == ["alpha", "bravo"]
    assert result.logprobs is not None
    assert [p.token.strip() for p in result.logprobs if p.token] == result.text.split()
    assert all(p.logprob is not None and p.logprob <= 0 for p in result.logprobs)
    assert [lang.code for lang in result.languages or []] == ["en"]
    assert result.usage is not None and result.usage.type == "duration"
    plain = client.audio.transcriptions.create(model="whisper-1", file=speech)
    assert plain.logprobs is None and plain.text == result.text


def test_stream_logprobs_and_token_usage(client: openai.OpenAI, speech: tuple[str, bytes]) -> None:
    events = list(
        client.audio.transcriptions.create(
            model="gpt-4o-transcribe", file=speech, stream=True, include=["logprobs"]
        )
    )
    *rest, done = events
    assert done.type == "transcript.text.done"
    deltas = [d for d in rest if d.type == "transcript.text.delta"]
    assert deltas == rest  # all but the last are deltas
    assert "".join(d.delta for d in deltas) == done.text
    # The SDK types the two events' entries apart: compared as data.
    joined = [p.model_dump() for d in deltas for p in d.logprobs or []]
    assert joined == [p.model_dump() for p in done.logprobs or []] != []
    assert done.usage is not None and done.usage.type == "tokens"
    assert done.usage.input_tokens > 0 and done.usage.output_tokens > 0
    assert done.usage.total_tokens == done.usage.input_tokens + done.usage.output_tokens
    assert [lang.code for lang in done.languages or []] == ["en"]


def test_keywords_languages_and_chunking_reach_the_decoder(
    client: openai.OpenAI, fake: FakeDecoder, speech: tuple[str, bytes]
) -> None:
    result = client.audio.transcriptions.create(
        model="gpt-transcribe",
        file=speech,
        keywords=["Kettle", "Whisper"],
        languages=["en"],
        chunking_strategy={"type": "server_vad", "threshold": 0.6, "silence_duration_ms": 300},
    )
    assert result.text
    seen = fake.requests_seen[-1]
    assert (seen.hotwords, seen.language) == ("Kettle. Whisper.", "en")
    auto = client.audio.transcriptions.create(
        model="gpt-transcribe", file=speech, chunking_strategy="auto"
    )
    assert auto.text


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"chunking_strategy": {"type": "server_vad", "threshold": 7}},
         "chunking_strategy.threshold"),
        ({"include": ["logprobs"], "response_format": "verbose_json"}, "include"),
        ({"languages": ["de"]}, "languages"),  # the fake model is English-only
    ],
)  # fmt: skip
def test_bad_fields_are_400_with_their_param(
    client: openai.OpenAI, speech: tuple[str, bytes], fields: dict[str, Any], param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.audio.transcriptions.create(model="whisper-1", file=speech, **fields)
    assert info.value.status_code == 400
    assert isinstance(info.value.body, dict) and info.value.body["param"] == param


# -- Realtime ---------------------------------------------------------------------------------


def pcm24k(audio: np.ndarray) -> bytes:
    return pcm16(soxr.resample(audio, 16000, 24000))


async def _until(conn: Any, done: Callable[[list[Any]], bool]) -> list[Any]:
    events: list[Any] = []
    async with asyncio.timeout(60):  # a deadlock guard only
        async for event in conn:
            events.append(event)
            if done(events):
                return events
    return events


async def test_realtime_languages_keywords_and_logprobs(
    server: ServerThread, fake: FakeDecoder
) -> None:
    audio = scripted_audio([("silence", 0.3), ("voice", 2.0), ("silence", 1.5)])
    pcm = pcm24k(audio)
    client = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key=KEY)
    async with client.realtime.connect(extra_query={"intent": "transcription"}) as conn:
        await conn.session.update(
            session={
                "type": "transcription",
                "include": ["item.input_audio_transcription.logprobs"],
                "audio": {
                    "input": {
                        "transcription": {
                            "model": "gpt-transcribe",
                            "languages": ["en"],
                            "keywords": ["Kettle"],
                        },
                        "turn_detection": {"type": "semantic_vad", "eagerness": "high"},
                    }
                },
            }
        )
        for i in range(0, len(pcm), 4800):
            await conn.input_audio_buffer.append(audio=base64.b64encode(pcm[i : i + 4800]).decode())
        events = await _until(conn, lambda ev: any(e.type == TRANSCRIBED + "completed" for e in ev))
    created, updated = events[:2]
    assert (created.type, updated.type) == ("session.created", "session.updated")
    transcription = updated.session.audio.input.transcription
    assert (transcription.languages, transcription.keywords) == (["en"], ["Kettle"])
    (completed,) = [e for e in events if e.type == TRANSCRIBED + "completed"]
    assert completed.transcript.split() == ["alpha", "bravo", "charlie", "delta"]
    assert [lang.code for lang in completed.languages or []] == ["en"]
    assert [p.token.strip() for p in completed.logprobs or []] == completed.transcript.split()
    deltas = [e for e in events if e.type == TRANSCRIBED + "delta"]
    joined = [p.model_dump() for d in deltas for p in d.logprobs or []]
    assert joined == [p.model_dump() for p in completed.logprobs or []] != []
    assert any(r.hotwords == "Kettle." for r in fake.requests_seen)


async def test_realtime_unknown_model_is_refused(server: ServerThread) -> None:
    client = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key=KEY)
    async with client.realtime.connect(extra_query={"intent": "transcription"}) as conn:
        await conn.session.update(
            session={
                "type": "transcription",
                "audio": {"input": {"transcription": {"model": "gpt-9-transcribe"}}},
            }
        )
        events = await _until(conn, lambda ev: any(e.type == "error" for e in ev))
    error = events[-1].error
    assert (error.code, error.param) == (
        "model_not_found",
        "session.audio.input.transcription.model",
    )
