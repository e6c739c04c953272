"""The official OpenAI SDK, unchanged but for its base URL, asking kettle (fake model, pitch
speaker encoder) for gpt-4o-transcribe-diarize's diarized_json: speakers "A"/"B", known
speakers by reference clip, the streamed segment events, and the 400s."""

from __future__ import annotations

import base64
import io
from collections.abc import Callable

import numpy as np
import openai
import pytest
import soundfile as sf
from kettle.streaming.engine.speakers import SpeakerService
from kettle.streaming.server.server import ServerConfig
from kettle.transcribe.model.fake import FakeDecoder, scripted_audio
from kettle.transcribe.speakers.fake import PitchSpeakerEncoder
from openai.types.audio.transcription_create_params import ChunkingStrategyVadConfig

from tests.streaming.server.server_thread import ServerThread

KEY = "test-key"
MODEL = "gpt-4o-transcribe-diarize"
# Silero hears the fake voice only at its lowest threshold, and 140/180 Hz best.
CHUNKING: ChunkingStrategyVadConfig = {
    "type": "server_vad",
    "threshold": 0.01,
    "silence_duration_ms": 300,
}


def wav(audio: np.ndarray) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, audio, 16000, format="WAV")
    return buf.getvalue()


def data_url(audio: np.ndarray) -> str:
    return "data:audio/wav;base64," + base64.b64encode(wav(audio)).decode()


TWO_VOICES = (
    "two.wav",
    wav(scripted_audio([("voice@140", 2.0), ("silence", 1.5), ("voice@180", 2.0)])),
)


@pytest.fixture(scope="module")
def server(serve_in_thread: Callable[..., ServerThread]) -> ServerThread:
    return serve_in_thread(api_keys=(KEY,), speakers=SpeakerService(PitchSpeakerEncoder()))


@pytest.fixture(scope="module")
def client(server: ServerThread) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0)


def test_diarized_json_labels_two_voices_a_and_b(client: openai.OpenAI) -> None:
    result = client.audio.transcriptions.create(
        model=MODEL, file=TWO_VOICES, response_format="diarized_json", chunking_strategy=CHUNKING
    )
    assert result.task == "transcribe" and result.duration == pytest.approx(5.5, abs=0.1)
    assert [s.speaker for s in result.segments] == ["A", "B"]
    assert [s.id for s in result.segments] == ["seg_0", "seg_1"]
    assert all(s.type == "transcript.text.segment" and s.end > s.start for s in result.segments)
    assert result.text == " ".join(s.text for s in result.segments)
    assert result.usage is not None and result.usage.type == "duration"


def test_known_speaker_reference_names_its_voice(client: openai.OpenAI) -> None:
    result = client.audio.transcriptions.create(
        model=MODEL,
        file=TWO_VOICES,
        response_format="diarized_json",
        chunking_strategy=CHUNKING,
        known_speaker_names=["agent"],
        known_speaker_references=[data_url(scripted_audio([("voice@180", 2.5)]))],
    )
    assert [s.speaker for s in result.segments] == ["A", "agent"]


def test_json_with_the_diarize_model_is_text_only(client: openai.OpenAI) -> None:
    result = client.audio.transcriptions.create(
        model=MODEL, file=TWO_VOICES, response_format="json", chunking_strategy=CHUNKING
    )
    assert result.text and "segments" not in result.model_dump()


def test_streamed_segments_come_before_done(client: openai.OpenAI) -> None:
    events = list(
        client.audio.transcriptions.create(
            model=MODEL,
            file=TWO_VOICES,
            response_format="diarized_json",
            chunking_strategy=CHUNKING,
            stream=True,
        )
    )
    kinds = [e.type for e in events]
    assert kinds[-1] == "transcript.text.done"
    segments = [e for e in events if e.type == "transcript.text.segment"]
    assert [s.speaker for s in segments] == ["A", "B"]
    assert [s.id for s in segments] == ["seg_0", "seg_1"]
    deltas = [e for e in events if e.type == "transcript.text.delta"]
    assert [d.segment_id for d in deltas] == ["seg_0", "seg_1"]


@pytest.mark.parametrize(
    ("names", "refs", "param"),
    [
        (["agent"], [], "known_speaker_references"),
        (["agent"], ["not a data url"], "known_speaker_references"),
        (["agent"], ["data:audio/wav;base64,bm90IGF1ZGlv"], "known_speaker_references"),
        (["a", "b", "c", "d", "e"], ["data:audio/wav;base64,AAAA"] * 5, "known_speaker_names"),
    ],
)
def test_bad_known_speakers_are_400(
    client: openai.OpenAI, names: list[str], refs: list[str], param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.audio.transcriptions.create(
            model=MODEL,
            file=TWO_VOICES,
            response_format="diarized_json",
            known_speaker_names=names,
            known_speaker_references=refs,
        )
    error = caught.value.body
    assert isinstance(error, dict) and error["type"] == "invalid_request_error"
    assert error["param"] == param


def test_no_speaker_model_is_400() -> None:
    running = ServerThread(ServerConfig(port=0, api_keys=(KEY,), diarize="off"), FakeDecoder)
    try:
        client = openai.OpenAI(base_url=running.url + "/v1", api_key=KEY, max_retries=0)
        with pytest.raises(openai.BadRequestError) as caught:
            client.audio.transcriptions.create(
                model=MODEL, file=TWO_VOICES, response_format="diarized_json"
            )
        assert "speaker model" in caught.value.message
    finally:
        running.close()
