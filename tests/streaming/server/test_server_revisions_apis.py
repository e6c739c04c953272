"""Corrections on AssemblyAI v3 and OpenAI Realtime, end to end through the server with the
fake model (whose refinement spells "alpha" as "alfa", transcribe/model/fake.py): asked for with
kettle's ``kettle_revisions=true`` URL parameter, each in the API's own shape; without it
no refinement is ever asked for; a bad value is refused in the API's error shape. OpenAI's
side runs the official SDK, which parses every event into its own models."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
import soxr
from kettle.streaming.server.config import ServerConfig
from kettle.streaming.server.server import KettleServer
from kettle.transcribe.model.fake import FakeDecoder, scripted_audio
from openai.types.realtime import (
    ConversationItemInputAudioTranscriptionCompletedEvent as CompletedEvent,
)
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from tests.conftest import pcm16
from tests.streaming.server.server_thread import ServerThread

KEY = "test-key"
GUARD = 60  # seconds: a deadlock guard, never a timing assertion
COMPLETED = "conversation.item.input_audio_transcription.completed"
# Three turns; each but the last has audio after it, so the fake refinement revises it.
THREE = scripted_audio([("silence", 1.0), ("voice", 2.0), ("silence", 1.0), ("voice", 3.0),
                        ("silence", 1.0), ("voice", 1.5), ("silence", 1.0)])  # fmt: skip
OUTCOMES = ("revised", "unchanged", "kept", "skipped", "last")


def refinements(server: KettleServer) -> float:
    metrics = server.metrics
    assert metrics is not None
    return sum(metrics.value("kettle_refinements_total", {"outcome": o}) for o in OUTCOMES)


# -- AssemblyAI v3 --------------------------------------------------------------------------------


@pytest.fixture
def server_settings() -> dict[str, Any]:
    return {"api_keys": (KEY,)}


async def assemblyai(server: KettleServer, query: str) -> list[dict[str, Any]]:
    url = server.url.replace("http://", "ws://") + "/v3/ws?" + query
    async with connect(url, additional_headers={"Authorization": KEY}) as ws:
        pcm = pcm16(THREE)
        for i in range(0, len(pcm), 3200):
            await ws.send(pcm[i : i + 3200])
        await ws.send(json.dumps({"type": "Terminate"}))
        async with asyncio.timeout(GUARD):
            messages = [json.loads(m) async for m in ws]
    assert ws.close_code == 1000 and messages[-1]["type"] == "Termination"
    return messages


async def test_assemblyai_corrections_come_as_turns_of_the_same_order(
    server: KettleServer,
) -> None:
    messages = await assemblyai(server, "sample_rate=16000&format_turns=true&kettle_revisions=true")
    ends = [m for m in messages if m["type"] == "Turn" and m["end_of_turn"]]
    for order in (0, 1):
        plain, formatted, fix = [m for m in ends if m["turn_order"] == order]
        assert not plain["turn_is_formatted"] and formatted["turn_is_formatted"]
        assert fix["turn_is_formatted"] and messages.index(formatted) < messages.index(fix)
        assert fix["transcript"] == formatted["transcript"].replace("alpha", "alfa")
        assert fix["transcript"] != formatted["transcript"]
        assert set(fix) == set(formatted)
    assert len([m for m in ends if m["turn_order"] == 2]) == 2  # the last: nothing after it
    metrics = server.metrics
    assert metrics is not None
    assert metrics.value("kettle_refinements_total", {"outcome": "revised"}) == 2
    assert metrics.value("kettle_revision_delay_seconds_count") == 2


async def test_assemblyai_without_the_parameter_nothing_is_refined(server: KettleServer) -> None:
    messages = await assemblyai(server, "sample_rate=16000&format_turns=true")
    ends = [m for m in messages if m["type"] == "Turn" and m["end_of_turn"]]
    assert [m["turn_order"] for m in ends] == [0, 0, 1, 1, 2, 2]
    assert refinements(server) == 0


async def test_assemblyai_refuses_a_bad_value(server: KettleServer) -> None:
    url = server.url.replace("http://", "ws://") + "/v3/ws?kettle_revisions=sometimes"
    with pytest.raises(InvalidStatus) as refused:
        await connect(url, additional_headers={"Authorization": KEY})
    assert refused.value.response.status_code == 400
    body = json.loads(refused.value.response.body or b"{}")
    assert set(body) == {"error"} and body["error"].startswith("kettle_revisions")


# -- OpenAI Realtime ----------------------------------------------------------------------------


@pytest.fixture
def thread_server() -> Iterator[ServerThread]:
    running = ServerThread(ServerConfig(port=0, api_keys=(KEY,)), FakeDecoder)
    yield running
    running.close()


async def realtime(server: ServerThread, query: dict[str, str], completed: int) -> list[Any]:
    """The SDK's events until ``completed`` completed events came."""
    client = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key=KEY)
    pcm = pcm16(soxr.resample(THREE, 16000, 24000))
    events: list[Any] = []
    async with client.realtime.connect(extra_query={"intent": "transcription", **query}) as conn:
        for i in range(0, len(pcm), 4800):
            await conn.input_audio_buffer.append(audio=base64.b64encode(pcm[i : i + 4800]).decode())
        async with asyncio.timeout(GUARD):
            async for event in conn:
                events.append(event)
                if sum(e.type == COMPLETED for e in events) >= completed:
                    break
    return events


async def test_realtime_corrections_are_completed_events_of_the_same_item(
    thread_server: ServerThread,
) -> None:
    events = await realtime(thread_server, {"kettle_revisions": "true"}, completed=4)
    completed = [e for e in events if e.type == COMPLETED]
    assert all(isinstance(e, CompletedEvent) for e in completed)
    committed = [e.item_id for e in events if e.type == "input_audio_buffer.committed"]
    assert len(committed) == 3
    # The first item reads "alpha ..." (the fake model reads the others in their context,
    # without "alpha"): its correction comes after its completed event.
    assert len({e.item_id for e in completed}) == 3
    first, fix = [e for e in completed if e.item_id == committed[0]]
    assert events.index(first) < events.index(fix) and fix.content_index == first.content_index == 0
    assert fix.transcript == first.transcript.replace("alpha", "alfa") != first.transcript
    assert fix.event_id not in {e.event_id for e in events if e is not fix}
    assert fix.usage == first.usage


async def test_realtime_without_the_parameter_nothing_is_refined(
    thread_server: ServerThread,
) -> None:
    events = await realtime(thread_server, {}, completed=3)
    completed = [e.item_id for e in events if e.type == COMPLETED]
    assert len(set(completed)) == 3
    assert refinements(thread_server.server) == 0


async def test_realtime_refuses_a_bad_value(thread_server: ServerThread) -> None:
    url = thread_server.url.replace("http", "ws", 1) + "/v1/realtime?kettle_revisions=2"
    with pytest.raises(InvalidStatus) as refused:
        await connect(url, additional_headers={"Authorization": f"Bearer {KEY}"})
    assert refused.value.response.status_code == 400
    error = json.loads(refused.value.response.body or b"{}")["error"]
    assert error["type"] == "invalid_request_error" and "kettle_revisions" in error["message"]
