"""The voice-agent frameworks' OpenAI STT plugins, unchanged but for base URL and key, against
a kettle server on 127.0.0.1:0: LiveKit Agents' ``openai.STT`` (REST with its default model,
Realtime with ``use_realtime=True`` and with ``gpt-realtime-whisper``) and Pipecat's
``OpenAISTTService`` and ``OpenAIRealtimeSTTService`` with their defaults, each in the
smallest setting its docs show (LiveKit: recognize() / stream() inside
``http_context.open()``; Pipecat: its ``run_test`` pipeline). The fake model answers where the
words need not be real; one test per framework runs tiny.en on real speech."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import soxr
from kettle.transcribe.audio.read import load_audio
from kettle.transcribe.model.fake import FakeDecoder, scripted_audio

from tests.conftest import pcm16
from tests.streaming.server.server_thread import ServerThread

KEY = "test-key"
CLIP = "jfk__openai_whisper_jfk.flac"  # 11 s, pauses between phrases
# Two turns of fake voice, each followed by silence long enough for any endpoint.
TURNS = [("silence", 0.3), ("voice", 2.0), ("silence", 1.5), ("voice", 1.5), ("silence", 1.5)]


@pytest.fixture(scope="module")
def server(serve_in_thread: Callable[..., ServerThread], fake: FakeDecoder) -> ServerThread:
    return serve_in_thread(fake, api_keys=(KEY,))


@pytest.fixture(scope="module")
def real_server(serve_in_thread: Callable[..., ServerThread], tiny_decoder: Any) -> ServerThread:
    return serve_in_thread(tiny_decoder, api_keys=(KEY,))


def real_speech(eval_clip: Callable[[str], Any]) -> tuple[np.ndarray, str]:
    found = eval_clip(CLIP)
    return load_audio(found.path), found.reference


# -- LiveKit Agents ---------------------------------------------------------------------------


def livekit_frames(audio: np.ndarray, rate: int = 16000, chunk_s: float = 0.02) -> list[Any]:
    from livekit import rtc

    if rate != 16000:
        audio = soxr.resample(audio, 16000, rate).astype(np.float32)
    step = round(rate * chunk_s)
    frames = []
    for i in range(0, len(audio), step):
        piece = pcm16(audio[i : i + step])
        frames.append(rtc.AudioFrame(piece, rate, 1, len(piece) // 2))
    return frames


async def livekit_finals(stt: Any, audio: np.ndarray, count: int, pace: bool = False) -> list[Any]:
    """Stream ``audio`` through ``stt.stream()``; the first ``count`` final transcripts."""
    from livekit.agents import stt as lk_stt

    stream = stt.stream()
    finals: list[Any] = []

    async def feed() -> None:
        for frame in livekit_frames(audio):
            stream.push_frame(frame)
            if pace:
                await asyncio.sleep(0.02)  # LiveKit's VAD runs on the frames as they come
        await asyncio.sleep(0)

    feeding = asyncio.create_task(feed())
    try:
        async with asyncio.timeout(120):  # a deadlock guard only
            async for event in stream:
                if event.type == lk_stt.SpeechEventType.FINAL_TRANSCRIPT:
                    finals.append(event)
                    if len(finals) == count:
                        break
    finally:
        feeding.cancel()
        await stream.aclose()
    return finals


async def test_livekit_rest_default_model(
    server: ServerThread, fake: FakeDecoder, eval_clip: Callable[[str], Any]
) -> None:
    from livekit.agents import utils
    from livekit.plugins import openai as lk_openai

    # Real speech (uploads are cut by Silero, which hears no speech in the fake voice); the
    # fake model's words.
    speech, _ = real_speech(eval_clip)
    async with utils.http_context.open():
        stt = lk_openai.STT(base_url=server.url + "/v1", api_key=KEY)
        assert stt.model == "gpt-4o-mini-transcribe"
        event = await stt.recognize(livekit_frames(speech))
        (alt,) = event.alternatives
        assert alt.text.split()[:2] == ["alpha", "bravo"]
        assert alt.language == "en"
        # gpt-transcribe takes keywords and a list of languages; kettle hears both.
        keyed = lk_openai.STT(base_url=server.url + "/v1", api_key=KEY, model="gpt-transcribe",
                              keywords=["Kettle", "LiveKit"])  # fmt: skip
        event = await keyed.recognize(livekit_frames(speech))
        assert event.alternatives[0].text and event.alternatives[0].language == "en"
        assert fake.requests_seen[-1].hotwords == "Kettle. LiveKit."
        await stt.aclose()
        await keyed.aclose()


async def test_livekit_realtime_with_server_vad(server: ServerThread) -> None:
    """use_realtime=True with the default model: LiveKit sends server_vad, kettle ends turns."""
    from livekit.agents import utils
    from livekit.plugins import openai as lk_openai

    async with utils.http_context.open():
        stt = lk_openai.STT(base_url=server.url + "/v1", api_key=KEY, use_realtime=True)
        finals = await livekit_finals(stt, scripted_audio(TURNS), 2)
        await stt.aclose()
    texts = [f.alternatives[0].text for f in finals]
    assert texts[0].split() == ["alpha", "bravo", "charlie", "delta"]
    assert all(f.alternatives[0].language == "en" for f in finals)  # completed's languages


async def test_livekit_keywords_updated_mid_stream(server: ServerThread, fake: FakeDecoder) -> None:
    """update_options() resends the whole session: kettle takes the new keywords at once."""
    from livekit.agents import stt as lk_stt
    from livekit.agents import utils
    from livekit.plugins import openai as lk_openai

    turn = scripted_audio([("silence", 0.3), ("voice", 1.5), ("silence", 1.5)])
    async with utils.http_context.open():
        stt = lk_openai.STT(base_url=server.url + "/v1", api_key=KEY, use_realtime=True,
                            model="gpt-transcribe", keywords=["Kettle"])  # fmt: skip
        stream = stt.stream()
        finals: list[Any] = []
        try:
            async with asyncio.timeout(60):  # a deadlock guard only
                for keywords in (None, ["Kettle", "Agents"]):
                    if keywords is not None:
                        stt.update_options(keywords=keywords)
                        await asyncio.sleep(0.2)  # the session.update goes out first
                    for frame in livekit_frames(turn):
                        stream.push_frame(frame)
                    async for event in stream:
                        if event.type == lk_stt.SpeechEventType.FINAL_TRANSCRIPT:
                            finals.append(event)
                            break
        finally:
            await stream.aclose()
            await stt.aclose()
    assert len(finals) == 2
    assert fake.requests_seen[-1].hotwords == "Kettle. Agents."


@pytest.mark.slow
async def test_livekit_gpt_realtime_whisper_commits_on_its_vad(
    real_server: ServerThread, eval_clip: Callable[[str], Any], wer_fn: Callable[..., float]
) -> None:
    """No turn detection for this model: LiveKit's Silero VAD commits each turn."""
    from livekit.agents import stt as lk_stt
    from livekit.agents import utils
    from livekit.plugins import openai as lk_openai

    audio, reference = real_speech(eval_clip)
    audio = np.concatenate([audio, np.zeros(32000, np.float32)])  # the last turn ends too
    async with utils.http_context.open():
        stt = lk_openai.STT(base_url=real_server.url + "/v1", api_key=KEY,
                            model="gpt-realtime-whisper")  # fmt: skip
        stream = stt.stream()
        texts: list[str] = []

        async def feed() -> None:
            # Real time, as a room delivers it: fed faster, the client's own VAD lags the audio
            # it has sent and its commits cut turns wherever that lag falls (CI saw it).
            for frame in livekit_frames(audio):
                stream.push_frame(frame)
                await asyncio.sleep(0.02)

        feeding = asyncio.create_task(feed())
        events = aiter(stream)
        next_event = asyncio.ensure_future(anext(events))
        try:
            async with asyncio.timeout(120):  # a deadlock guard only
                await feeding
                # The turns are over once the stream has been quiet a while after the audio.
                while (await asyncio.wait([next_event], timeout=10))[0]:
                    event = next_event.result()
                    if event.type == lk_stt.SpeechEventType.FINAL_TRANSCRIPT:
                        texts.append(event.alternatives[0].text)
                    next_event = asyncio.ensure_future(anext(events))
        finally:
            next_event.cancel()
            feeding.cancel()
            await stream.aclose()
            await stt.aclose()
    assert wer_fn([reference], [" ".join(texts)]) < 0.3


# -- Pipecat ----------------------------------------------------------------------------------


def pipecat_audio_frames(audio: np.ndarray, chunk_s: float = 0.02) -> list[Any]:
    from pipecat.frames.frames import InputAudioRawFrame

    step = round(16000 * chunk_s)
    return [
        InputAudioRawFrame(pcm16(audio[i : i + step]), 16000, 1) for i in range(0, len(audio), step)
    ]


def pipecat_turn(audio: np.ndarray) -> list[Any]:
    """One user turn as a local VAD reports it: started, the audio, stopped."""
    from pipecat.frames.frames import VADUserStartedSpeakingFrame, VADUserStoppedSpeakingFrame

    return [VADUserStartedSpeakingFrame(), *pipecat_audio_frames(audio),
            VADUserStoppedSpeakingFrame()]  # fmt: skip


def transcriptions(frames: Any) -> list[Any]:
    from pipecat.frames.frames import TranscriptionFrame

    return [f for f in frames if isinstance(f, TranscriptionFrame)]


async def test_pipecat_openai_stt_default_model(
    server: ServerThread, eval_clip: Callable[[str], Any]
) -> None:
    from pipecat.services.openai.stt import OpenAISTTService
    from pipecat.tests.utils import run_test

    stt = OpenAISTTService(api_key=KEY, base_url=server.url + "/v1", include_prob_metrics=True)
    speech, _ = real_speech(eval_clip)  # real speech for Silero, the fake model's words
    # The EndFrame run_test sends last waits for the queued segment's transcription.
    down, _ = await run_test(stt, frames_to_send=pipecat_turn(speech))
    (frame,) = transcriptions(down)
    assert frame.text.split()[:2] == ["alpha", "bravo"]
    # gpt-transcribe with include_prob_metrics asks for json with logprobs: the words'.
    logprobs = frame.result.logprobs
    assert [p.token.strip() for p in logprobs] == frame.text.split()
    assert all(p.logprob <= 0 for p in logprobs)


async def test_pipecat_realtime_stt_defaults(server: ServerThread) -> None:
    from pipecat.frames.frames import InterimTranscriptionFrame
    from pipecat.services.openai.stt import OpenAIRealtimeSTTService
    from pipecat.tests.utils import SleepFrame, run_test

    stt = OpenAIRealtimeSTTService(
        api_key=KEY, base_url="ws" + server.url[len("http") :] + "/v1/realtime"
    )
    turn = pipecat_turn(scripted_audio([("voice", 2.0), ("silence", 0.3)]))
    # Pipecat sends audio at once, before its session.update (language "en") is answered:
    # the update applies from then on (test_openai_realtime_update.py), nothing is refused.
    down, _ = await run_test(stt, frames_to_send=[*turn, SleepFrame(3.0)])
    (frame,) = transcriptions(down)
    assert frame.text.split() == ["alpha", "bravo", "charlie", "delta"]
    interim = "".join(f.text for f in down if isinstance(f, InterimTranscriptionFrame))
    assert interim == frame.text


@pytest.mark.slow
async def test_pipecat_openai_stt_on_real_speech(
    real_server: ServerThread, eval_clip: Callable[[str], Any], wer_fn: Callable[..., float]
) -> None:
    from pipecat.services.openai.stt import OpenAISTTService
    from pipecat.tests.utils import run_test

    audio, reference = real_speech(eval_clip)
    stt = OpenAISTTService(api_key=KEY, base_url=real_server.url + "/v1")
    down, _ = await run_test(stt, frames_to_send=pipecat_turn(audio))
    (frame,) = transcriptions(down)
    assert wer_fn([reference], [frame.text]) < 0.2
