"""The official OpenAI SDK's Realtime client updating a transcription session after audio, as
OpenAI allows (every field but voice and model), against a kettle server with a multilingual
fake model: language, prompt and include for the next item, the input format switched from
pcm16 to G.711 u-law mid-item, turn detection changed from now on, and a voice refused in
OpenAI's error shape with the session going on and nothing lost."""

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

from tests.conftest import mulaw, pcm16
from tests.streaming.server.server_thread import ServerThread

KEY = "test-key"
TRANSCRIBED = "conversation.item.input_audio_transcription."
# Two turns of 2 s (the fake model reads 4 words in each), 1.5 s apart.
AUDIO = scripted_audio([("silence", 0.3), ("voice", 2.0), ("silence", 1.5), ("voice", 2.0),
                        ("silence", 1.5)])  # fmt: skip
SPLIT_S = 1.3  # inside the first turn (0.3..2.3 s)


class MultilingualFake(FakeDecoder):
    @property
    def multilingual(self) -> bool:
        return True


@pytest.fixture(scope="module")
def fake() -> FakeDecoder:
    return MultilingualFake(keep_requests=1000)


@pytest.fixture(scope="module")
def server(serve_in_thread: Callable[..., ServerThread], fake: FakeDecoder) -> ServerThread:
    return serve_in_thread(fake, api_keys=(KEY,))


def pcm24k(audio: np.ndarray) -> bytes:
    return pcm16(soxr.resample(audio, 16000, 24000))


def ulaw(audio: np.ndarray) -> bytes:
    return mulaw(soxr.resample(audio, 16000, 8000))


async def _append(conn: Any, data: bytes, piece: int) -> None:
    for i in range(0, len(data), piece):
        await conn.input_audio_buffer.append(audio=base64.b64encode(data[i : i + piece]).decode())


async def _until(conn: Any, done: Callable[[list[Any]], bool]) -> list[Any]:
    events: list[Any] = []
    async with asyncio.timeout(60):  # a deadlock guard only
        async for event in conn:
            events.append(event)
            if done(events):
                return events
    return events


def _of(events: list[Any], kind: str) -> list[Any]:
    return [e for e in events if e.type == kind]


def _completed(n: int) -> Callable[[list[Any]], bool]:
    return lambda events: len(_of(events, TRANSCRIBED + "completed")) >= n


def _connect(server: ServerThread) -> Any:
    client = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key=KEY)
    return client.realtime.connect(extra_query={"intent": "transcription"})


async def test_language_prompt_and_include_apply_to_the_next_item(
    server: ServerThread, fake: FakeDecoder
) -> None:
    pcm = pcm24k(AUDIO)
    split = int(SPLIT_S * 24000) * 2
    fake.requests_seen.clear()
    async with _connect(server) as conn:
        await _append(conn, pcm[:split], 4800)
        opened = await _until(conn, lambda ev: bool(_of(ev, "input_audio_buffer.speech_started")))
        await conn.session.update(
            session={
                "type": "transcription",
                "include": ["item.input_audio_transcription.logprobs"],
                "audio": {"input": {"transcription": {"language": "fr", "prompt": "Kettle."}}},
            }
        )
        await _append(conn, pcm[split:], 4800)
        events = opened + await _until(conn, _completed(2))
    assert not _of(events, "error")
    (updated,) = _of(events, "session.updated")
    assert updated.session.audio.input.transcription.language == "fr"
    first, second = _of(events, TRANSCRIBED + "completed")
    assert first.transcript.split() == second.transcript.split() == [
        "alpha", "bravo", "charlie", "delta"
    ]  # fmt: skip
    # The item open at the update keeps what it began with; the next one takes the update.
    assert [lang.code for lang in first.languages or []] == ["en"] and first.logprobs is None
    assert [lang.code for lang in second.languages or []] == ["fr"]
    assert [p.token.strip() for p in second.logprobs or []] == second.transcript.split()
    streams = {r.stream_key[1] for r in fake.requests_seen if isinstance(r.stream_key, tuple)}
    assert streams == {0, 1}
    for r in fake.requests_seen:
        assert isinstance(r.stream_key, tuple)  # (session, utterance)
        if r.stream_key[1] == 0:
            assert (r.language, r.prompt) == (None, None)
        else:
            assert r.language == "fr" and r.prompt is not None and r.prompt.startswith("Kettle.")


async def test_format_switch_from_pcm16_to_ulaw_mid_item(server: ServerThread) -> None:
    async with _connect(server) as conn:
        await _append(conn, pcm24k(AUDIO[: int(SPLIT_S * 16000)]), 4800)
        await conn.session.update(
            session={
                "type": "transcription",
                "audio": {"input": {"format": {"type": "audio/pcmu"}}},
            }
        )
        await _append(conn, ulaw(AUDIO)[int(SPLIT_S * 8000) :], 800)  # the rest, 8 kHz u-law
        events = await _until(conn, _completed(2))
    assert not _of(events, "error")
    (updated,) = _of(events, "session.updated")
    assert updated.session.audio.input.format.type == "audio/pcmu"
    completed = _of(events, TRANSCRIBED + "completed")
    assert [c.transcript.split() for c in completed] == [["alpha", "bravo", "charlie", "delta"]] * 2
    # Input audio time runs on across the switch: the second turn starts near 3.8 s.
    starts = [e.audio_start_ms for e in _of(events, "input_audio_buffer.speech_started")]
    assert len(starts) == 2 and 3300 <= starts[1] <= 3800


async def test_turn_detection_from_now_on_and_a_voice_refused(server: ServerThread) -> None:
    pcm = pcm24k(AUDIO)
    split = int(SPLIT_S * 24000) * 2
    async with _connect(server) as conn:
        await _append(conn, pcm[:split], 4800)
        voice = {"type": "transcription", "audio": {"output": {"voice": "alloy"}},
                 "include": ["item.input_audio_transcription.logprobs"]}  # fmt: skip
        await conn.session.update(session=voice, event_id="evt_voice")
        td = {"type": "server_vad", "silence_duration_ms": 2000}
        await conn.session.update(
            session={"type": "transcription", "audio": {"input": {"turn_detection": td}}}
        )
        await _append(conn, pcm[split:] + pcm24k(np.zeros(16000, dtype=np.float32)), 4800)
        events = await _until(conn, _completed(1))
    (error,) = _of(events, "error")
    assert (error.error.type, error.error.code, error.error.param, error.error.event_id) == (
        "invalid_request_error",
        "cannot_update_voice",
        "session.audio.output.voice",
        "evt_voice",
    )
    (updated,) = _of(events, "session.updated")  # the voice's update changed nothing ...
    assert updated.session.include is None
    assert updated.session.audio.input.turn_detection.silence_duration_ms == 2000
    # ... and the open turn now ends only after 2 s of silence: one item holds both turns.
    (completed,) = _of(events, TRANSCRIBED + "completed")
    assert completed.transcript.split() == [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"
    ]  # fmt: skip
    assert completed.logprobs is None
