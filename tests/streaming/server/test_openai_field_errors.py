"""OpenAI's refusals of bad fields through a running server (a fake model): the REST 400 with
OpenAI's error object, the Realtime handshake's 400 and an ``error`` event for a bad event,
each counted (``kettle_errors{code}``, ``kettle_sessions_rejected{reason}``)."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest
from kettle.streaming.server.server import KettleServer
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

KEY = "field-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
GUARD = 60  # seconds: a deadlock guard only


def count(server: KettleServer, name: str, **labels: str) -> float:
    return server.metrics.registry.get_sample_value(name, labels) or 0.0


@pytest.fixture
def server_settings() -> dict[str, Any]:
    return {"api_keys": (KEY,)}


async def test_rest_refusals_are_openai_errors_and_counted(server: KettleServer) -> None:
    form = {"model": "whisper-1", "temperature": "1.5"}
    files = {"file": ("a.wav", b"RIFF....WAVEfmt ", "audio/wav")}
    async with httpx.AsyncClient(timeout=GUARD) as http:
        answer = await http.post(f"{server.url}/v1/audio/transcriptions", data=form,
                                 files=files, headers=AUTH)  # fmt: skip
        assert answer.status_code == 400
        assert answer.json()["error"] == {
            "message": answer.json()["error"]["message"],
            "type": "invalid_request_error",
            "param": "temperature",
            "code": "decimal_above_max_value",
        }
        answer = await http.post(f"{server.url}/v1/audio/translations", data={}, files=files,
                                 headers=AUTH)  # fmt: skip
        assert (answer.status_code, answer.json()["error"]["code"]) == (
            400,
            "missing_required_parameter",
        )
    assert count(server, "kettle_errors_total", code="decimal_above_max_value") == 1
    assert count(server, "kettle_errors_total", code="missing_required_parameter") == 1


async def test_realtime_refusals_are_counted(server: KettleServer) -> None:
    url = server.url.replace("http", "ws", 1) + "/v1/realtime"
    with pytest.raises(InvalidStatus) as refused:
        await connect(url + "?intent=transcription&kettle_revisions=maybe", additional_headers=AUTH)
    assert refused.value.response.status_code == 400
    assert count(server, "kettle_sessions_rejected_total", reason="bad_query") == 1
    async with connect(url + "?intent=transcription", additional_headers=AUTH) as ws:
        assert json.loads(await ws.recv())["type"] == "session.created"
        bad = {
            "type": "transcription",
            "audio": {"input": {"turn_detection": {"type": "server_vad", "threshold": 2}}},
        }
        await ws.send(json.dumps({"type": "session.update", "event_id": "e1", "session": bad}))
        error = json.loads(await ws.recv())
        assert error["error"] == {
            "type": "invalid_request_error",
            "code": "decimal_above_max_value",
            "message": error["error"]["message"],
            "param": "session.audio.input.turn_detection.threshold",
            "event_id": "e1",
        }
        # The session goes on.
        audio = base64.b64encode(bytes(4800)).decode()
        await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": audio}))
        await ws.send(json.dumps({"type": "session.update", "session": {"type": "transcription"}}))
        assert json.loads(await ws.recv())["type"] == "session.updated"
    assert count(server, "kettle_errors_total", code="decimal_above_max_value") == 1
