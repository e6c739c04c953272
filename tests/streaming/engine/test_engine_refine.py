"""The engine's refinement lane with the fake model: its own model, and skipped under load."""

from __future__ import annotations

import asyncio

import pytest
from kettle.streaming.core.events import Done, Event, Final, Revision
from kettle.streaming.core.session import SessionConfig
from kettle.streaming.engine.clock import ManualClock
from kettle.streaming.engine.engine import Engine, EngineConfig
from kettle.streaming.engine.scheduling.scheduler import Scheduler, SchedulerConfig
from kettle.transcribe.model.fake import FakeDecoder, scripted_audio

from tests.streaming.engine.conftest import run_one

TWO = [("silence", 0.5), ("voice", 1.5), ("silence", 1.0), ("voice", 1.5), ("silence", 1.0)]
THREE = scripted_audio([*TWO, ("voice", 1.0), ("silence", 1.0)])


async def test_refinements_run_on_the_refinement_model_and_revise_finals() -> None:
    live, refiner = FakeDecoder(name="live"), FakeDecoder(name="refiner")
    async with Engine(live, refine_decoder=refiner) as engine:
        assert engine.refine_decoder is refiner and engine.final_decoder is live
        events = await run_one(engine, THREE, revisions=True)
    revisions = [e for e in events if isinstance(e, Revision)]
    assert [r.utterance for r in revisions] == [0, 1]
    assert all(r.text.startswith("alfa ") for r in revisions)
    assert refiner.stats.requests == 4 and all(r.refinement for r in refiner.requests_seen)
    assert not any(r.refinement for r in live.requests_seen)
    assert isinstance(events[-1], Done) and events[-1].utterances == 3


async def test_without_revisions_nothing_is_refined() -> None:
    live, refiner = FakeDecoder(), FakeDecoder()
    async with Engine(live, refine_decoder=refiner) as engine:
        events = await run_one(engine, THREE)
    assert refiner.stats.requests == 0
    assert not any(isinstance(e, Revision) for e in events)


async def test_refinements_held_past_their_wait_are_skipped_and_finals_still_come(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The model never gets an idle moment for refinements (as if partials kept being
    # skipped): each waits refine_max_wait_s, is dropped, and the stream goes on.
    monkeypatch.setattr(Scheduler, "overloaded", lambda self, now: True)
    config = EngineConfig(scheduler=SchedulerConfig(refine_max_wait_s=0.1))
    async with Engine(FakeDecoder(), config) as engine:
        events = await run_one(engine, THREE, revisions=True)
        assert engine.refinements_skipped == 2
    assert not any(isinstance(e, Revision) for e in events)
    assert [e.utterance for e in events if isinstance(e, Final)] == [0, 1, 2]
    assert isinstance(events[-1], Done) and events[-1].utterances == 3


async def test_a_final_is_refined_while_the_stream_goes_on_speaking() -> None:
    # One short sentence, then one long one: the first's refinement is due 2 s into the
    # second and goes once it has waited refine_urgent_s, while the speaker still talks.
    audio = scripted_audio([("silence", 0.5), ("voice", 1.5), ("silence", 0.7), ("voice", 8.0)])
    second_starts = int(2.6 * 16000)
    clock = ManualClock()
    arrived: list[tuple[int, Event]] = []  # (samples fed when it arrived, event)
    fed = 0
    async with Engine(FakeDecoder(), clock=clock) as engine:
        stream = engine.open_stream(SessionConfig(revisions=True))

        async def collect() -> None:
            async for event in stream:
                arrived.append((fed, event))

        collector = asyncio.create_task(collect())
        for pos in range(0, len(audio), 1600):  # 100 ms at a time, in real time
            stream.feed_audio(audio[pos : pos + 1600])
            fed = min(len(audio), pos + 1600)
            await clock.advance(0.1)
            await asyncio.sleep(0.002)  # the model thread answers (not a timing assertion)
        stream.stop()
        async with asyncio.timeout(30):
            while not collector.done():
                await clock.advance(0.05)
                await asyncio.sleep(0.001)
    revised = [at for at, e in arrived if isinstance(e, Revision) and e.utterance == 0]
    assert revised, "the first final got no revision"
    assert second_starts < revised[0] < len(audio)  # inside the second sentence, not after
