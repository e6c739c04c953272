"""Helpers shared by the engine tests: feed a stream, read its events to the end."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
from kettle.streaming.core.events import Event
from kettle.streaming.core.session import SessionConfig
from kettle.streaming.engine.engine import Engine, Stream


async def play(
    stream: Stream, audio: np.ndarray, chunk: int = 320, pace: float | None = None
) -> None:
    """Feed on a wall-clock pace, or (pace None) whenever the stream has no decode pending,
    which makes the decodes happen at the same audio positions however loaded the machine."""
    for i in range(0, len(audio), chunk):
        if pace is None:
            await stream.wait_idle()
        stream.feed_audio(audio[i : i + chunk])
        await asyncio.sleep(pace or 0)
    stream.stop()


async def collect(stream: Stream) -> list[Event]:
    return [event async for event in stream]


async def run_one(engine: Engine, audio: np.ndarray, **kw: Any) -> list[Event]:
    stream = engine.open_stream(SessionConfig(**kw))
    feeder = asyncio.create_task(play(stream, audio))
    events = await asyncio.wait_for(collect(stream), 30)
    await feeder
    return events
