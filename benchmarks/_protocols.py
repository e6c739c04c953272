"""bench_server's protocol measurements: the same audio over each WebSocket protocol, and
uploads while live streams run. Each client is the protocol's own (kettle's `stream_audio`,
the official Deepgram SDK; plain HTTP for uploads).

Clients replay audio the way a microphone would (a chunk goes once it would have been
recorded) and time every result at receipt against the audio clock:

- kettle v1: `partial` / `final` messages, lag = receipt - (stream start + end);
- Deepgram: interim / final `Results`, lag = receipt - (stream start + start + duration);
- OpenAI Realtime (24 kHz PCM, server VAD): a turn's `...transcription.completed`, lag =
  receipt - (stream start + its `speech_stopped.audio_end_ms`). Its deltas carry no audio
  time, so no partial lag is measured for it (their count is in `partials`).
"""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np
import soundfile as sf
from kettle.streaming.client.client import ClientOptions, stream_audio, to_s16le

SAMPLE_RATE = 16000


@dataclass
class Lags:
    partial: list[float] = field(default_factory=list)
    final: list[float] = field(default_factory=list)
    text: str = ""
    partial_count: int | None = None  # when partials come without audio times to lag them


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def summary(lags: Lags) -> dict[str, Any]:
    return {
        "partials": len(lags.partial) if lags.partial_count is None else lags.partial_count,
        "partial_p50_s": _percentile(lags.partial, 50),
        "partial_p95_s": _percentile(lags.partial, 95),
        "finals": len(lags.final),
        "final_p50_s": _percentile(lags.final, 50),
        "final_p95_s": _percentile(lags.final, 95),
    }


async def kettle_v1(base: str, audio: np.ndarray, chunk_ms: int) -> Lags:
    url = base.replace("http", "ws", 1) + "/v1/stream"
    result = await stream_audio(audio, ClientOptions(url=url, realtime=True, chunk_ms=chunk_ms))
    lags = Lags(text=result.text)
    for message, at in result.received:
        if message["type"] in ("partial", "final"):
            lag = at - (result.audio_start + message["end"])
            (lags.partial if message["type"] == "partial" else lags.final).append(lag)
    return lags


async def deepgram_live(base: str, audio: np.ndarray, chunk_ms: int) -> Lags:
    from deepgram import AsyncDeepgramClient
    from deepgram.environment import DeepgramClientEnvironment

    ws = base.replace("http", "ws", 1)
    client = AsyncDeepgramClient(
        api_key="bench",
        environment=DeepgramClientEnvironment(base=base, production=ws, agent=ws, agent_rest=base),
    )
    pcm = to_s16le(audio)
    piece = SAMPLE_RATE * 2 * chunk_ms // 1000
    lags, finals = Lags(), []
    async with client.listen.v1.connect(
        model="nova-3", encoding="linear16", sample_rate=SAMPLE_RATE, interim_results=True
    ) as socket:
        start = time.monotonic()

        async def send() -> None:
            for i, offset in enumerate(range(0, len(pcm), piece)):
                delay = start + (i + 1) * chunk_ms / 1000 - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)  # sent once it would have been recorded
                await socket.send_media(pcm[offset : offset + piece])
            await socket.send_close_stream()

        sender = asyncio.create_task(send())
        async for message in socket:
            if getattr(message, "type", None) != "Results":
                continue
            transcript = message.channel.alternatives[0].transcript
            if not transcript:
                continue
            lag = time.monotonic() - (start + message.start + message.duration)
            if message.is_final:
                lags.final.append(lag)
                finals.append(transcript)
            else:
                lags.partial.append(lag)
        await sender
    lags.text = " ".join(finals)
    return lags


async def openai_realtime(base: str, audio: np.ndarray, chunk_ms: int) -> Lags:
    import base64

    import openai
    from kettle.kernels.resample import resample

    pcm = to_s16le(resample(np.concatenate([audio, np.zeros(2 * SAMPLE_RATE)]), 16000, 24000))
    piece = 24000 * 2 * chunk_ms // 1000
    client = openai.AsyncOpenAI(base_url=base + "/v1", api_key="bench")
    lags, deltas = Lags(), 0
    stopped_at: dict[str, float] = {}  # item -> audio end of its turn, seconds
    done: dict[str, str] = {}  # item -> transcript
    async with client.realtime.connect(extra_query={"intent": "transcription"}) as conn:
        await conn.session.update(
            session={
                "type": "transcription",
                "audio": {
                    "input": {
                        "format": {"type": "audio/pcm", "rate": 24000},
                        "turn_detection": {"type": "server_vad", "silence_duration_ms": 500},
                    }
                },
            }
        )
        start = time.monotonic()

        async def send() -> None:
            for i, offset in enumerate(range(0, len(pcm), piece)):
                delay = start + (i + 1) * chunk_ms / 1000 - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                chunk = base64.b64encode(pcm[offset : offset + piece]).decode()
                await conn.input_audio_buffer.append(audio=chunk)

        sender = asyncio.create_task(send())
        while not sender.done() or len(done) < len(stopped_at):
            try:
                event = await asyncio.wait_for(conn.recv(), 1.0)
            except TimeoutError:
                continue
            if event.type == "input_audio_buffer.speech_stopped":
                stopped_at[event.item_id] = event.audio_end_ms / 1000
            elif event.type == "conversation.item.input_audio_transcription.delta":
                deltas += 1
            elif event.type == "conversation.item.input_audio_transcription.completed":
                done[event.item_id] = event.transcript
                if event.item_id in stopped_at:
                    lags.final.append(time.monotonic() - (start + stopped_at[event.item_id]))
        await sender
    lags.text = " ".join(t for t in done.values() if t)
    lags.partial_count = deltas
    return lags


WEBSOCKET_PROTOCOLS: dict[str, Callable[[str, np.ndarray, int], Awaitable[Lags]]] = {
    "kettle v1": kettle_v1,
    "deepgram live": deepgram_live,
    "openai realtime": openai_realtime,
}
# The route name GET /v1/info lists for each client above.
ROUTE_NAMES = {
    "kettle v1": "kettle",
    "deepgram live": "deepgram",
    "openai realtime": "openai_realtime",
}


def served(base: str) -> list[str]:
    """The protocols above that this server speaks (from GET /v1/info)."""
    protocols = httpx.get(f"{base}/v1/info", timeout=30).json()["protocols"]
    return [name for name in WEBSOCKET_PROTOCOLS if ROUTE_NAMES[name] in protocols]


async def per_protocol(
    base: str, audio: np.ndarray, rounds: int, chunk_ms: int
) -> dict[str, dict[str, Any]]:
    """Each protocol in turn on the same audio, `rounds` times interleaved (so a machine
    shared with other jobs weighs on every protocol alike)."""
    names = served(base)
    collected = {name: Lags() for name in names}
    for _ in range(rounds):
        for name in names:
            lags = await WEBSOCKET_PROTOCOLS[name](base, audio, chunk_ms)
            collected[name].partial += lags.partial
            collected[name].final += lags.final
            collected[name].text = lags.text
            if lags.partial_count is not None:
                collected[name].partial_count = (collected[name].partial_count or 0) + (
                    lags.partial_count
                )
    return {name: {**summary(lags), "text": lags.text} for name, lags in collected.items()}


def _wav(audio: np.ndarray) -> bytes:
    out = io.BytesIO()
    sf.write(out, audio, SAMPLE_RATE, format="WAV", subtype="PCM_16")
    return out.getvalue()


async def uploads_during_live(
    base: str,
    upload_audio: list[np.ndarray],
    live_audio: list[np.ndarray],
    chunk_ms: int,
) -> dict[str, Any]:
    """Uploads (POST /v1/listen, all at once) while live kettle v1 streams run in real time:
    upload throughput in audio seconds per wall second, and the live streams' lags."""

    async def upload(client: httpx.AsyncClient, body: bytes) -> float:
        began = time.monotonic()
        answer = await client.post(f"{base}/v1/listen", content=body)
        answer.raise_for_status()
        return time.monotonic() - began

    bodies = [_wav(a) for a in upload_audio]
    # The same live streams alone first: what the uploads cost them.
    alone = await asyncio.gather(*(kettle_v1(base, a, chunk_ms) for a in live_audio))
    async with httpx.AsyncClient(timeout=3600) as client:
        began = time.monotonic()
        live = [asyncio.create_task(kettle_v1(base, a, chunk_ms)) for a in live_audio]
        each = await asyncio.gather(*(upload(client, b) for b in bodies))
        uploads_wall = time.monotonic() - began
        lives = await asyncio.gather(*live)
    upload_s = sum(len(a) for a in upload_audio) / SAMPLE_RATE
    merged = Lags(
        partial=[x for lags in lives for x in lags.partial],
        final=[x for lags in lives for x in lags.final],
    )
    return {
        "uploads": len(bodies),
        "upload_audio_s": round(upload_s, 1),
        "uploads_wall_s": round(uploads_wall, 1),
        "upload_throughput_audio_s_per_s": upload_s / uploads_wall,
        "slowest_upload_s": max(each),
        "live_streams": len(live_audio),
        **{f"live_{k}": v for k, v in summary(merged).items()},
        **{
            f"live_alone_{k}": v
            for k, v in summary(
                Lags(
                    partial=[x for lags in alone for x in lags.partial],
                    final=[x for lags in alone for x in lags.final],
                )
            ).items()
        },
    }
