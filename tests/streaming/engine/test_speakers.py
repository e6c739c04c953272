"""Speaker labels on live streams (engine/speakers.py): fake decoder, pitch encoder."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from kettle.streaming.core.events import Done, Event, Final, Partial
from kettle.streaming.core.session import SessionConfig
from kettle.streaming.engine.engine import Engine, EngineConfig, Stream
from kettle.streaming.engine.speakers import SpeakerService
from kettle.transcribe.audio.read import load_audio
from kettle.transcribe.errors import KettleError
from kettle.transcribe.model.fake import FakeDecoder, scripted_audio
from kettle.transcribe.speakers import encoder as speaker_encoder
from kettle.transcribe.speakers.fake import PitchSpeakerEncoder
from kettle.transcribe.types import SAMPLE_RATE

from tests.streaming.engine.conftest import collect, play

CONVERSATION = [
    ("silence", 0.3),
    ("voice@140", 2.0),
    ("silence", 1.0),
    ("voice@230", 1.8),
    ("silence", 1.0),
    ("voice@140", 1.5),
    ("silence", 1.0),
    ("voice@310", 2.2),
    ("silence", 1.0),
]


async def run(engine: Engine, audio: np.ndarray, **kw: object) -> list[Event]:
    events, _ = await run_stream(engine, audio, **kw)
    return events


async def run_stream(engine: Engine, audio: np.ndarray, **kw: Any) -> tuple[list[Event], Stream]:
    stream = engine.open_stream(SessionConfig(**kw))
    feeder = asyncio.create_task(play(stream, audio))
    events = await asyncio.wait_for(collect(stream), 30)
    await feeder
    return events, stream


async def test_finals_carry_the_speaker_in_the_order_first_heard() -> None:
    encoder = PitchSpeakerEncoder()
    async with Engine(FakeDecoder(), EngineConfig(), speakers=SpeakerService(encoder)) as engine:
        events, stream = await run_stream(engine, scripted_audio(CONVERSATION), diarize=True)
    finals = [e for e in events if isinstance(e, Final)]
    assert [f.speaker for f in finals] == [0, 1, 0, 2]
    # Each embedding started when its utterance closed, beside the final's decode.
    assert stream.labeler is not None and stream.labeler.early_labels == 4
    assert all(f.speaker_confidence is not None and f.speaker_confidence > 0.5 for f in finals)
    assert encoder.calls == 4
    assert isinstance(events[-1], Done)


async def test_events_keep_the_session_order_while_a_final_waits_for_its_label() -> None:
    async with Engine(
        FakeDecoder(), EngineConfig(), speakers=SpeakerService(PitchSpeakerEncoder())
    ) as engine:
        events = await run(engine, scripted_audio(CONVERSATION), diarize=True)
    seen: list[int] = []
    for event in events:
        if isinstance(event, Partial | Final):
            assert not seen or event.utterance >= seen[-1]
            seen.append(event.utterance)
    finals = [e.utterance for e in events if isinstance(e, Final)]
    assert finals == sorted(finals) == list(range(len(finals)))


async def test_the_cap_holds_per_stream() -> None:
    async with Engine(
        FakeDecoder(), EngineConfig(), speakers=SpeakerService(PitchSpeakerEncoder())
    ) as engine:
        events = await run(engine, scripted_audio(CONVERSATION), diarize=True, max_speakers=2)
    assert {e.speaker for e in events if isinstance(e, Final)} == {0, 1}


class BrokenEncoder:
    def embed(self, audio: np.ndarray) -> np.ndarray:
        raise RuntimeError("no voice today")


async def test_a_failing_encoder_loses_no_final() -> None:
    async with Engine(
        FakeDecoder(), EngineConfig(), speakers=SpeakerService(BrokenEncoder())
    ) as engine:
        events = await run(engine, scripted_audio(CONVERSATION), diarize=True)
    finals = [e for e in events if isinstance(e, Final)]
    assert len(finals) == 4
    assert all(f.speaker == 0 and f.speaker_confidence == 0.0 for f in finals)


async def test_without_diarize_no_speaker_and_no_embedding() -> None:
    encoder = PitchSpeakerEncoder()
    async with Engine(FakeDecoder(), EngineConfig(), speakers=SpeakerService(encoder)) as engine:
        events = await run(engine, scripted_audio(CONVERSATION))
    assert all(e.speaker is None for e in events if isinstance(e, Final))
    assert encoder.calls == 0


async def test_diarize_without_a_speaker_model_is_refused() -> None:
    async with Engine(FakeDecoder(), EngineConfig()) as engine:
        with pytest.raises(KettleError, match="speaker model"):
            engine.open_stream(SessionConfig(diarize=True))


async def test_the_encoder_loads_lazily_on_the_speaker_thread() -> None:
    loaded: list[str] = []

    def load() -> PitchSpeakerEncoder:
        import threading

        loaded.append(threading.current_thread().name)
        return PitchSpeakerEncoder()

    async with Engine(FakeDecoder(), EngineConfig(), speakers=SpeakerService(load)) as engine:
        assert loaded == []
        events = await run(engine, scripted_audio(CONVERSATION[:3]), diarize=True)
    assert [e.speaker for e in events if isinstance(e, Final)] == [0]
    assert len(loaded) == 1 and loaded[0].startswith("kettle-speaker")


SPEECH = Path(__file__).resolve().parents[2] / "data" / "speech" / "audio"
# LibriSpeech readers turn by turn: 1089 (male) with 4507, then 1995 (two women).
TURNS = [
    ("A", "ls__1089-134686-0001.flac"),
    ("B", "ls__4507-16021-0012.wav"),
    ("A", "ls__1089-134691-0000.flac"),
    ("C", "ls__1995-1837-0001.wav"),
    ("A", "ls__1089-134691-0001.flac"),
]


@pytest.mark.skipif(not speaker_encoder.available(), reason="the diarize extra is not here")
async def test_a_three_reader_conversation_is_labeled_turn_by_turn() -> None:
    """The real GE2E encoder on real voices (the fake decoder hears words in any speech)."""
    gap = np.zeros(SAMPLE_RATE, np.float32)
    pieces, spans, at = [], [], 0
    for who, name in TURNS:
        clip = load_audio((SPEECH / name).read_bytes())
        pieces += [clip, gap]
        spans.append((who, at, at + len(clip)))
        at += len(clip) + len(gap)
    service = SpeakerService(speaker_encoder.ResemblyzerEncoder())
    async with Engine(FakeDecoder(), EngineConfig(), speakers=service) as engine:
        events = await run(engine, np.concatenate(pieces), diarize=True)
    finals = [e for e in events if isinstance(e, Final)]
    assert len(finals) >= len(TURNS)
    mapping: dict[str, int] = {}
    for final in finals:
        middle = (final.start + final.end) // 2
        who = next(w for w, start, end in spans if start <= middle < end + SAMPLE_RATE)
        assert final.speaker is not None
        assert mapping.setdefault(who, final.speaker) == final.speaker, (who, final)
    assert sorted(mapping.values()) == [0, 1, 2]
