"""The engine's refinement lane with the fake model: its own model, and skipped under load."""

from __future__ import annotations

import pytest
from kettle.streaming.core.events import Done, Final, Revision
from kettle.streaming.engine.engine import Engine, EngineConfig
from kettle.streaming.engine.scheduling.scheduler import Scheduler, SchedulerConfig
from kettle.transcribe.fake import FakeDecoder, scripted_audio

from tests.streaming.engine.test_engine import run_one

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
