"""Engine v2 behaviour with a manual clock and a model that can be held mid-batch: priority
classes, offline work, withdrawn partials, fallback rounds, failure isolation and backoff."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from kettle.streaming.core.events import Done, Error, Event, Final
from kettle.streaming.core.session import SessionConfig
from kettle.streaming.engine.clock import ManualClock
from kettle.streaming.engine.degrade import DegradeConfig, Level
from kettle.streaming.engine.engine import BatchReport, Engine, EngineConfig, Stream
from kettle.streaming.engine.scheduling.scheduler import SchedulerConfig
from kettle.streaming.engine.worker import RetryPolicy
from kettle.transcribe.model.costs import CostProfile
from kettle.transcribe.model.fake import FakeDecoder, scripted_audio
from kettle.transcribe.types import DecodeKind, DecodeRequest, DecodeResult

GUARD_S = 30.0  # deadlock guard only; nothing below waits on the wall clock for timing


class HeldDecoder(FakeDecoder):
    """A fake whose batches can be held until the test releases them; logs every call."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.calls: list[list[DecodeRequest]] = []
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.gate.set()

    def decode_batch(self, requests: Sequence[DecodeRequest]) -> list[DecodeResult]:
        self.calls.append(list(requests))
        self.entered.set()
        assert self.gate.wait(GUARD_S)
        return super().decode_batch(requests)


async def until(condition: Callable[[], bool]) -> None:
    """Let the loop (and the inference thread) run until the condition holds."""
    async with asyncio.timeout(GUARD_S):
        while not condition():
            await asyncio.sleep(0.001)


async def finish(clock: ManualClock, task: asyncio.Future[Any]) -> None:
    """Advance the manual clock in small steps until the task is done."""
    async with asyncio.timeout(GUARD_S):
        while not task.done():
            await asyncio.sleep(0.001)
            await clock.advance(0.05)


async def hold_first_batch(dec: HeldDecoder) -> None:
    await until(dec.entered.is_set)


def offline(n: int, seconds: float = 1.0) -> list[DecodeRequest]:
    audio = scripted_audio([("voice", seconds)])
    return [DecodeRequest(audio=audio, kind=DecodeKind.FINAL, request_id=i) for i in range(n)]


def ids(call: list[DecodeRequest]) -> list[object]:
    return [r.request_id for r in call]


async def drain(stream: Stream) -> list[Event]:
    async with asyncio.timeout(GUARD_S):
        return [e async for e in stream]


async def test_decode_offline_returns_results_in_order() -> None:
    dec = FakeDecoder()
    async with Engine(dec, clock=ManualClock()) as engine:
        results = await engine.decode_offline(offline(5))
        assert await engine.decode_offline([]) == []
    assert [r.request_id for r in results] == [0, 1, 2, 3, 4]
    assert all(r.text == "alpha bravo" and r.error is None for r in results)


async def test_a_live_final_goes_before_queued_offline_work() -> None:
    dec = HeldDecoder()
    dec.gate.clear()
    config = EngineConfig(SchedulerConfig(max_batch_size=2))
    async with Engine(dec, config, clock=ManualClock()) as engine:
        upload = asyncio.create_task(engine.decode_offline(offline(6)))
        await hold_first_batch(dec)  # offline batch [0, 1] is running
        stream = engine.open_stream(SessionConfig(partials=False, speculative_final=False))
        stream.feed_audio(scripted_audio([("voice", 1.5)]))
        stream.stop()  # its final is due now
        dec.gate.set()
        events = await drain(stream)
        results = await asyncio.wait_for(upload, GUARD_S)
    assert [ids(c) for c in dec.calls][:2] == [[0, 1], [f"{stream.stream_id}/1"]]
    assert [type(e) for e in events] == [Final, Done]
    assert [r.request_id for r in results] == list(range(6))


async def test_a_due_final_withdraws_the_sessions_queued_partial() -> None:
    dec = HeldDecoder()
    dec.gate.clear()
    config = EngineConfig(SchedulerConfig(partial_budget_s=0.0))
    async with Engine(dec, config, clock=ManualClock()) as engine:
        upload = asyncio.create_task(engine.decode_offline(offline(1)))
        await hold_first_batch(dec)
        stream = engine.open_stream()
        stream.feed_audio(scripted_audio([("voice", 1.5)]))
        assert engine.queue_depth == 1  # its partial, waiting for the model
        stream.feed_audio(scripted_audio([("silence", 1.0)]))  # the endpoint
        dec.gate.set()
        stream.stop()
        events = await drain(stream)
        await asyncio.wait_for(upload, GUARD_S)
    mine = [r for c in dec.calls for r in c if r.stream_key is not None]
    assert [r.kind for r in mine] == [DecodeKind.FINAL]  # the partial never ran
    assert [type(e) for e in events] == [Final, Done]


async def test_a_stream_ahead_of_real_time_yields_to_a_live_stream() -> None:
    dec = HeldDecoder()
    dec.gate.clear()
    config = EngineConfig(SchedulerConfig(max_batch_size=1))
    session = SessionConfig(partials=False, speculative_final=False)
    async with Engine(dec, config, clock=ManualClock()) as engine:
        upload = asyncio.create_task(engine.decode_offline(offline(1)))
        await hold_first_batch(dec)  # the model is busy
        flooder = engine.open_stream(session)
        flooder.feed_audio(scripted_audio([("voice", 1.5), ("silence", 1.0)] * 4))  # 10 s now
        live = engine.open_stream(session)
        live.feed_audio(scripted_audio([("voice", 1.5), ("silence", 1.0)]))
        assert engine.queue_depth == 2  # the flooder's first final, queued first, and the live one
        dec.gate.set()
        live.stop()
        flooder.stop()
        await drain(live)
        await drain(flooder)
        await asyncio.wait_for(upload, GUARD_S)
    owners = [str(c[0].request_id).split("/")[0] for c in dec.calls[1:]]
    assert owners[0] == live.stream_id and owners[1:] == [flooder.stream_id] * 4


async def test_each_fallback_round_is_a_request_of_its_own() -> None:
    first: list[object] = []

    def rounds(request: DecodeRequest) -> int:
        first.extend([] if first else [request.stream_key])
        return 2 if request.stream_key == first[0] else 0

    dec = HeldDecoder(fallback_rounds=rounds)
    dec.gate.clear()
    config = EngineConfig(SchedulerConfig(max_batch_size=8))
    async with Engine(dec, config, clock=ManualClock()) as engine:
        upload = asyncio.create_task(engine.decode_offline(offline(1)))
        await hold_first_batch(dec)
        session = SessionConfig(partials=False, speculative_final=False)
        streams = [engine.open_stream(session) for _ in range(2)]
        for stream in streams:
            stream.feed_audio(scripted_audio([("voice", 1.5)]))
            stream.stop()
        dec.gate.set()
        results = await asyncio.gather(*(drain(s) for s in streams))
        await asyncio.wait_for(upload, GUARD_S)
    live = [c for c in dec.calls if c[0].stream_key is not None]
    assert [[r.fallback_round for r in c] for c in live] == [[0, 0], [1], [2]]
    for events in results:
        assert [type(e) for e in events] == [Final, Done]


async def test_offline_requests_fail_on_their_own() -> None:
    def fail(requests: Sequence[DecodeRequest]) -> bool:
        return any(r.request_id == 2 for r in requests)

    dec = FakeDecoder(fail=fail)
    config = EngineConfig(SchedulerConfig(max_batch_size=8))
    clock = ManualClock()
    async with Engine(dec, config, clock=clock) as engine:
        task = asyncio.create_task(engine.decode_offline(offline(4)))
        await finish(clock, task)  # the retries wait out their backoff on the manual clock
        results = task.result()
    assert [r.error is None for r in results] == [True, True, False, True]
    assert "injected" in (results[2].error or "")
    # The batch of 4 failed; each request went once more alone (the bad one failed again).
    assert dec.stats.batch_sizes == [4, 1, 1, 1, 1]


async def test_repeated_model_errors_back_off_and_mark_the_model_failing() -> None:
    broken = {"on": True}
    dec = FakeDecoder(fail=lambda _: broken["on"])
    clock = ManualClock()
    policy = RetryPolicy(retries=1, backoff_base_s=1.0, backoff_max_s=8.0, failing_after=2)
    async with Engine(dec, EngineConfig(retry=policy), clock=clock) as engine:
        assert engine.healthy and not engine.model_failing
        task = asyncio.create_task(engine.decode_offline(offline(1)))
        await until(lambda: dec.stats.calls == 1)
        await asyncio.sleep(0.01)
        assert dec.stats.calls == 1  # the retry waits out the backoff
        await clock.advance(0.99)
        assert dec.stats.calls == 1
        await clock.advance(0.01)
        await until(task.done)
        assert task.result()[0].error is not None
        assert engine.model_failing and not engine.healthy
        # The model recovers: the next request waits 2 s (the second backoff), then works.
        broken["on"] = False
        task = asyncio.create_task(engine.decode_offline(offline(1)))
        await asyncio.sleep(0.01)
        assert dec.stats.calls == 2
        await clock.advance(2.0)
        await until(task.done)
        assert task.result()[0].error is None
        assert engine.healthy and not engine.model_failing


async def test_a_bug_while_failing_a_batch_does_not_abandon_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def fail(requests: Sequence[DecodeRequest]) -> bool:
        return any(r.kind is DecodeKind.PARTIAL for r in requests)

    dec = HeldDecoder(fail=fail)
    dec.gate.clear()
    config = EngineConfig(SchedulerConfig(partial_budget_s=0.0, max_batch_size=8))
    clock = ManualClock()
    async with Engine(dec, config, clock=clock) as engine:
        upload = asyncio.create_task(engine.decode_offline(offline(1)))
        await hold_first_batch(dec)
        broken, fine = engine.open_stream(), engine.open_stream()

        def explode(request_id: object, *, overloaded: bool = False) -> None:
            raise RuntimeError("bug")

        monkeypatch.setattr(broken.session, "on_dropped", explode)
        for stream in (broken, fine):
            stream.feed_audio(scripted_audio([("voice", 1.5)]))
        dec.gate.set()  # next: one batch with both partials, which fails
        await until(lambda: len(dec.calls) >= 2)
        fine.feed_audio(scripted_audio([("silence", 1.0)]))
        fine.stop()
        both = asyncio.gather(drain(broken), drain(fine))
        await finish(clock, both)  # past the backoff the failed batch started
        got_broken, got_fine = both.result()
        await asyncio.wait_for(upload, GUARD_S)
    assert [len(c) for c in dec.calls][:2] == [1, 2]
    done = got_broken[-1]
    assert isinstance(done, Done)
    assert got_broken[-2:] == [
        Error("internal", "internal error: RuntimeError", fatal=True),
        Done(done.audio_samples, 0, "error"),
    ]
    assert [type(e) for e in got_fine][-2:] == [Final, Done]


async def test_decode_offline_needs_a_running_engine() -> None:
    from kettle.transcribe.errors import KettleError

    engine = Engine(FakeDecoder())
    with pytest.raises(KettleError):
        await engine.decode_offline(offline(1))


def test_audio_fixture_is_voiced() -> None:
    assert float(np.abs(offline(1)[0].audio).max()) > 0.1


class LevelLog:
    def __init__(self) -> None:
        self.levels: list[str] = []

    def on_batch(self, report: BatchReport) -> None:
        pass

    def on_batch_failed(self, size: int, error: str) -> None:
        pass

    def on_degradation(self, level: str) -> None:
        self.levels.append(level)


async def test_degradation_reaches_clients_and_full_quality_returns_when_calm() -> None:
    dec = HeldDecoder()
    dec.gate.clear()
    clock = ManualClock()
    log = LevelLog()
    degrade = DegradeConfig(final_target_s=1.5, step_s=1.0, calm_s=5.0, streak=1)
    config = EngineConfig(degrade=degrade)
    async with Engine(dec, config, clock=clock, observer=log) as engine:
        upload = asyncio.create_task(engine.decode_offline(offline(1)))
        await hold_first_batch(dec)
        stream = engine.open_stream(SessionConfig(speculative_final=False))
        stream.feed_audio(scripted_audio([("voice", 1.5)]))
        stream.stop()
        await clock.advance(1.3)  # the final waits behind the running batch, past its share
        dec.gate.set()
        events = await drain(stream)
        await asyncio.wait_for(upload, GUARD_S)
        assert engine.degradation is Level.PARTIALS_STRETCHED
        await clock.advance(5.0)
        await until(lambda: engine.degradation is Level.FULL)
    notices = [e for e in events if isinstance(e, Error)]
    assert [(e.code, e.fatal) for e in notices] == [("overloaded", False)]
    assert [type(e) for e in events][-2:] == [Final, Done]
    assert log.levels == ["partials_stretched", "full"]


async def test_stretched_and_paused_partials_reach_the_sessions() -> None:
    clock = ManualClock()
    config = EngineConfig(degrade=DegradeConfig(step_s=0.0), adaptive_cadence=False)
    dec = FakeDecoder()
    async with Engine(dec, config, clock=clock) as engine:
        stream = engine.open_stream(SessionConfig(partial_interval_s=0.5, partial_beam_size=3))
        assert stream.session.interval_hint_s is None
        degrader = engine._degrader  # driven directly: pressure comes from real waits elsewhere
        degrader.pressure(clock.now())
        engine._level_changed()
        assert stream.session.interval_hint_s == pytest.approx(1.0)
        stream.feed_audio(scripted_audio([("voice", 1.5)]))
        await until(lambda: bool(dec.requests_seen))
        # and the partial that asked for a beam of 3 is decoded greedy
        assert {r.beam_size for r in dec.requests_seen} == {1}
        degrader.pressure(clock.now())
        engine._level_changed()
        assert stream.session.interval_hint_s == float("inf")
        stream.feed_audio(scripted_audio([("voice", 3.0)]))
        assert engine.queue_depth == 0  # no partial asked for
        stream.stop()
        events = await drain(stream)
        # Two steps within 5 s: one notice.
        assert [e.code for e in events if isinstance(e, Error)] == ["overloaded"]


class Releasing(FakeDecoder):
    """A fake that records which stream keys the engine released."""

    def __init__(self) -> None:
        super().__init__()
        self.released: list[object] = []

    def release_stream(self, stream_key: object) -> None:
        self.released.append(stream_key)


async def test_the_engine_releases_an_utterances_features_when_its_final_is_in() -> None:
    dec = Releasing()
    async with Engine(dec, clock=ManualClock()) as engine:
        stream = engine.open_stream()
        audio = scripted_audio([("voice", 1.5), ("silence", 1.0), ("voice", 1.5), ("silence", 1.0)])
        for i in range(0, len(audio), 1600):
            await stream.wait_idle()
            stream.feed_audio(audio[i : i + 1600])
        stream.stop()
        events = await drain(stream)
    assert [type(e) for e in events if isinstance(e, Final | Done)] == [Final, Final, Done]
    # Each utterance's features go once it is over: when the next one starts, or the stream
    # ends (a speculative final in a pause does not end it).
    assert dec.released == [(stream.stream_id, 0), (stream.stream_id, 1)]


class CostedDecoder(FakeDecoder):
    """A fake with a cost probe that records how the engine asked for it."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[tuple[object, bool]] = []

    def measure_costs(self, cache: object = None, *, refresh: bool = False) -> CostProfile:
        self.asked.append((cache, refresh))
        return CostProfile(((1, 0.3),), ((1, 0.01),))


@pytest.mark.parametrize(("cache", "remeasure"), [(None, False), ("costs", False), ("costs", True)])
async def test_start_up_costs_come_from_the_cost_cache_when_configured(
    tmp_path: Path, cache: str | None, remeasure: bool
) -> None:
    dec = CostedDecoder()
    folder = None if cache is None else tmp_path / cache
    config = EngineConfig(cost_cache=folder, remeasure_costs=remeasure)
    async with Engine(dec, config, clock=ManualClock()) as engine:
        # One model serves partials and finals: asked once, its profile used for both.
        assert dec.asked == [(folder, remeasure)]
        assert set(engine.cost_profiles) == {DecodeKind.PARTIAL, DecodeKind.FINAL}


async def test_a_model_busy_for_a_whole_interval_releases_memory_between_batches() -> None:
    # A flooding client can keep the model busy for minutes: the release cannot wait for
    # an idle moment, so it comes between two batches once an interval of work has passed.
    dec = HeldDecoder()
    dec.gate.clear()
    released_after: list[int] = []
    config = EngineConfig(SchedulerConfig(max_batch_size=1), release_memory_s=60.0)
    clock = ManualClock()
    engine = Engine(
        dec, config, clock=clock, release_memory=lambda: released_after.append(len(dec.calls))
    )
    async with engine:
        work = asyncio.create_task(engine.decode_offline(offline(4)))
        await hold_first_batch(dec)  # the work started at t=0
        await clock.advance(61.0)
        dec.gate.set()
        await asyncio.wait_for(work, GUARD_S)
    assert len(dec.calls) == 4
    # after the first batch, with three still queued; not again within the interval
    assert released_after == [1]
