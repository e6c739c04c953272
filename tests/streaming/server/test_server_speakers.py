"""Speaker labels on kettle's own protocol (docs/protocol.md#config `diarize`), end to end through
the server with the fake model and the pitch stand-in encoder (two voices: two pitches)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kettle.streaming.engine.speakers import SpeakerService
from kettle.streaming.server.config import ServerConfig
from kettle.streaming.server.server import KettleServer
from kettle.transcribe.model.fake import FakeDecoder, scripted_audio
from kettle.transcribe.speakers.fake import PitchSpeakerEncoder

from tests.conftest import pcm16
from tests.streaming.conftest import MakeServer, StartServer
from tests.streaming.server.conftest import check_finals, open_ws, read_all, send_chunks

TWO_VOICES = scripted_audio(
    [
        ("silence", 0.3),
        ("voice@140", 1.6),
        ("silence", 1.0),
        ("voice@230", 1.6),
        ("silence", 1.0),
        ("voice@140", 1.6),
        ("silence", 1.0),
    ]
)
PCM = pcm16(TWO_VOICES)


async def run(server: KettleServer, config: dict[str, object]) -> list[dict[str, Any]]:
    ws = await open_ws(server)
    await ws.send(json.dumps({"type": "config", **config}))
    await send_chunks(ws, PCM)
    await ws.send('{"type": "stop"}')
    messages, code = await read_all(ws)
    assert code == 1000
    return messages


@pytest.fixture
async def server(make_server: MakeServer) -> KettleServer:
    return await make_server(speakers=SpeakerService(PitchSpeakerEncoder()))


async def test_finals_and_their_words_carry_the_speaker(server: KettleServer) -> None:
    messages = await run(server, {"diarize": True, "word_timestamps": True})
    finals = check_finals(messages)
    assert [f["speaker"] for f in finals] == [0, 1, 0]
    for final in finals:
        assert final["words"] and all(w["speaker"] == final["speaker"] for w in final["words"])


async def test_max_speakers_caps_the_labels(server: KettleServer) -> None:
    messages = await run(server, {"diarize": True, "max_speakers": 1})
    assert {f["speaker"] for f in check_finals(messages)} == {0}


async def test_without_diarize_no_speaker_field(server: KettleServer) -> None:
    messages = await run(server, {"word_timestamps": True})
    for final in check_finals(messages):
        assert "speaker" not in final
        assert all("speaker" not in w for w in final["words"])


async def test_a_server_without_a_speaker_model_refuses_diarize(
    start_server: StartServer,
) -> None:
    server = await start_server(ServerConfig(port=0, diarize="off"), FakeDecoder)
    ws = await open_ws(server)
    assert json.loads(await ws.recv())["type"] == "ready"
    await ws.send(json.dumps({"type": "config", "diarize": True}))
    reply = json.loads(await ws.recv())
    assert reply["type"] == "error" and reply["code"] == "bad_message"
    assert "speaker model" in reply["message"]
    await ws.close()


async def test_revisions_carry_their_utterances_speaker(server: KettleServer) -> None:
    messages = await run(server, {"diarize": True, "revisions": True, "word_timestamps": True})
    finals = check_finals(messages)
    revisions = [m for m in messages if m["type"] == "revision"]
    assert revisions  # the fake model's refinement respells "alpha"
    for revision in revisions:
        assert revision["speaker"] == finals[revision["utterance"]]["speaker"]
        assert all(w["speaker"] == revision["speaker"] for w in revision["words"])
