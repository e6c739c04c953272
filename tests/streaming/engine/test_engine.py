"""The asyncio engine with the fake model (fast) and the real tiny.en model (slow)."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from kettle.streaming.core.events import Done, Error, Event, Final, Partial
from kettle.streaming.core.session import SessionConfig
from kettle.streaming.engine.degrade import DegradeConfig
from kettle.streaming.engine.engine import BatchReport, Engine, EngineConfig, Stream
from kettle.streaming.engine.scheduling.scheduler import SchedulerConfig
from kettle.transcribe.errors import KettleError
from kettle.transcribe.model.fake import FakeDecoder, scripted_audio
from kettle.transcribe.types import SAMPLE_RATE, DecodeKind, DecodeRequest

from tests.streaming.engine.conftest import collect, play, run_one

SR = SAMPLE_RATE
TWO = scripted_audio(
    [("silence", 0.5), ("voice", 1.5), ("silence", 1.0), ("voice", 1.5), ("silence", 1.0)]
)


@dataclass
class Recorder:
    batches: list[tuple[int, int, int]] = field(default_factory=list)
    failures: list[tuple[int, str]] = field(default_factory=list)
    threads: set[int] = field(default_factory=set)

    def on_batch(self, report: BatchReport) -> None:
        assert len(report.queue_waits_s) == report.size and report.decode_s >= 0
        self.threads.add(threading.get_ident())
        self.batches.append((report.size, report.finals, report.cache_hits))

    def on_batch_failed(self, size: int, error: str) -> None:
        self.failures.append((size, error))


async def test_events_flow_and_the_model_runs_on_one_thread() -> None:
    dec = FakeDecoder(batch_delay_s=0.005)
    observer = Recorder()
    async with Engine(dec, observer=observer) as engine:
        events = await run_one(engine, TWO)
        assert engine.streams_open == 0
    finals = [e for e in events if isinstance(e, Final)]
    assert [f.text for f in finals] == ["alpha bravo charlie"] * 2
    assert [f.utterance for f in finals] == [0, 1]
    assert isinstance(events[-1], Done) and events[-1].utterances == 2
    assert any(isinstance(e, Partial) for e in events)
    assert len(dec.threads_used) == 1 and threading.get_ident() not in dec.threads_used
    assert observer.threads == {threading.get_ident()}  # hooks run on the loop thread
    assert sum(b[0] for b in observer.batches) == dec.stats.requests


async def test_next_event_after_done_raises_stop_async_iteration() -> None:
    async with Engine(FakeDecoder()) as engine:
        stream = engine.open_stream()
        stream.stop()
        assert await stream.next_event() == Done(0, 0, None)
        with pytest.raises(StopAsyncIteration):
            await stream.next_event()
        stream.stop()  # idempotent


async def test_streams_are_batched_together() -> None:
    dec = FakeDecoder(batch_delay_s=0.03)
    async with Engine(dec, EngineConfig(SchedulerConfig(max_batch_size=8))) as engine:
        results = await asyncio.gather(*(run_one(engine, TWO) for _ in range(6)))
    for events in results:
        assert [e.text for e in events if isinstance(e, Final)] == ["alpha bravo charlie"] * 2
    assert max(dec.stats.batch_sizes) > 1


async def test_failed_partial_batches_are_dropped_quietly_and_finals_still_come() -> None:
    def fail(requests: Sequence[DecodeRequest]) -> bool:
        return any(r.kind is DecodeKind.PARTIAL for r in requests)

    observer = Recorder()
    async with Engine(FakeDecoder(fail=fail), observer=observer) as engine:
        events = await run_one(engine, TWO)
    assert not any(isinstance(e, Error) for e in events)
    finals = [e for e in events if isinstance(e, Final)]
    assert len(finals) == 2
    # The only partials are those shown from the speculative finals at the pauses.
    partials = [e for e in events if isinstance(e, Partial)]
    assert all(p.text == finals[p.utterance].text for p in partials)
    assert observer.failures and all("injected" in m for _, m in observer.failures)


async def test_a_final_failing_once_is_retried_alone() -> None:
    calls = {"finals": 0}

    def fail(requests: Sequence[DecodeRequest]) -> bool:
        if any(r.kind is DecodeKind.FINAL for r in requests):
            calls["finals"] += 1
            return calls["finals"] == 1
        return False

    async with Engine(FakeDecoder(fail=fail)) as engine:
        events = await run_one(engine, TWO)
    assert [e.utterance for e in events if isinstance(e, Final)] == [0, 1]
    assert not any(isinstance(e, Error) for e in events)


async def test_a_final_failing_twice_gives_an_internal_error_and_the_engine_serves_on() -> None:
    first: list[object] = []

    def fail(requests: Sequence[DecodeRequest]) -> bool:
        # Utterance 0 of the first stream only.
        key = requests[0].stream_key  # (session, utterance)
        assert isinstance(key, tuple)
        first.extend([] if first else [key[0]])
        return any(r.kind is DecodeKind.FINAL and r.stream_key == (first[0], 0) for r in requests)

    async with Engine(
        FakeDecoder(fail=fail), EngineConfig(SchedulerConfig(max_batch_size=1))
    ) as engine:
        events = await run_one(engine, TWO, speculative_final=False)
        errors = [e for e in events if isinstance(e, Error)]
        assert [(e.code, e.fatal) for e in errors] == [("internal", False)]
        # The message names the utterance (its number, once the client saw one, and span).
        assert re.match(r"could not transcribe utterance 0 \(\d+\.\d{3}-", errors[0].message)
        finals = [e for e in events if isinstance(e, Final)]
        assert [f.utterance for f in finals] == [0, 1]
        # Another stream afterwards is served normally.
        again = await run_one(engine, scripted_audio([("voice", 1.5), ("silence", 1.0)]))
        assert [e.text for e in again if isinstance(e, Final)] == ["alpha bravo charlie"]
        assert not any(isinstance(e, Error) for e in again)


async def test_abort_releases_the_stream_and_drops_its_work() -> None:
    dec = FakeDecoder(batch_delay_s=0.05)
    async with Engine(dec) as engine:
        stream = engine.open_stream()
        stream.feed_audio(scripted_audio([("voice", 2.0)]))
        assert engine.streams_open == 1
        stream.abort()
        stream.abort()
        assert engine.streams_open == 0 and engine.queue_depth == 0
        with pytest.raises(StopAsyncIteration):
            await stream.next_event()
        stream.feed_audio(scripted_audio([("voice", 1.0)]))  # ignored
        # The engine still serves others.
        events = await run_one(engine, TWO)
        assert len([e for e in events if isinstance(e, Final)]) == 2


async def test_a_session_bug_ends_only_its_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    async with Engine(FakeDecoder()) as engine:
        broken = engine.open_stream()

        def explode(result: object) -> None:
            raise RuntimeError("bug")

        monkeypatch.setattr(broken.session, "on_result", explode)
        feeder = asyncio.create_task(play(broken, TWO))
        events = await asyncio.wait_for(collect(broken), 30)
        await asyncio.wait_for(feeder, 30)  # feeding a failed stream neither blocks nor fails
        done = events[-1]
        assert isinstance(done, Done)
        assert events[-2:] == [
            Error("internal", "internal error: RuntimeError", fatal=True),
            Done(done.audio_samples, 0, "error"),
        ]
        assert engine.streams_open == 0
        others = await run_one(engine, TWO)
        assert len([e for e in others if isinstance(e, Final)]) == 2


async def test_abort_wakes_a_waiting_reader() -> None:
    async with Engine(FakeDecoder()) as engine:
        stream = engine.open_stream()
        reader = asyncio.create_task(stream.next_event())
        await asyncio.sleep(0)
        stream.abort()
        with pytest.raises(StopAsyncIteration):
            await asyncio.wait_for(reader, 5)


async def test_close_stops_open_streams_with_their_finals() -> None:
    engine = Engine(FakeDecoder())
    await engine.start()
    stream = engine.open_stream()
    stream.feed_audio(scripted_audio([("voice", 1.5)]))
    await engine.close()
    events = await collect(stream)
    assert [type(e) for e in events][-2:] == [Final, Done]
    assert events[-1] == Done(int(1.5 * SR), 1, "shutdown")
    with pytest.raises(KettleError):
        engine.open_stream()


async def test_overload_thins_partials_with_a_notice_and_loses_no_final() -> None:
    # A slow model and many streams: partials wait longer than their limit.
    dec = FakeDecoder(batch_delay_s=0.25)
    config = EngineConfig(SchedulerConfig(max_batch_size=2, partial_max_wait_s=0.3))
    # Long utterances: partials pile up while speech goes on (at the endpoint a queued
    # partial is withdrawn for the final instead, which is not overload).
    audio = scripted_audio([("voice", 10.0), ("silence", 1.0), ("voice", 10.0), ("silence", 1.0)])
    async with Engine(dec, config) as engine:
        streams = [engine.open_stream() for _ in range(8)]

        async def paced(stream: Stream) -> list[Event]:
            feeder = asyncio.create_task(play(stream, audio, chunk=3200, pace=0.02))
            events = await asyncio.wait_for(collect(stream), 60)
            await feeder
            return events

        results = await asyncio.gather(*(paced(s) for s in streams))
    notices = [e for events in results for e in events if isinstance(e, Error)]
    assert notices and {e.code for e in notices} == {"overloaded"}
    for events in results:
        assert [e.utterance for e in events if isinstance(e, Final)] == [0, 1]


async def test_reader_that_lags_loses_only_old_partials() -> None:
    async with Engine(
        FakeDecoder(seconds_per_word=0.1), EngineConfig(event_queue_size=8)
    ) as engine:
        stream = engine.open_stream()
        audio = scripted_audio([("voice", 6.0), ("silence", 1.0)])
        await play(stream, audio)  # nobody reads meanwhile
        events = await asyncio.wait_for(collect(stream), 30)
    assert [type(e) for e in events][-2:] == [Final, Done]
    # Only partials were dropped to keep the queue bounded; what is left is in order.
    assert stream.partials_dropped > 0
    ends = [e.end for e in events if isinstance(e, Partial)]
    assert ends == sorted(ends)


# --- the real tiny.en model ------------------------------------------------------------------
# Enough words (~190) that one word that tiny.en hears differently across an utterance cut
# (e.g. "cotton" / "carton") moves WER by about half a point, not the whole 1-point margin.
WER_CLIPS = (
    "audio/ls__1089-134691-0001.flac",
    "audio/ls__1272-128104-0000.wav",
    "audio/ls__1995-1837-0001.wav",
    "audio/ls__1089-134686-0000.flac",
    "audio/ls__2830-3980-0043.wav",
    "audio/ls__4507-16021-0012.wav",
)


@pytest.mark.slow
async def test_streaming_finals_match_offline_accuracy(
    tiny_decoder: Any, eval_dir: Path, eval_clips: list[Any], wer_fn: Any
) -> None:
    from kettle.streaming.cli.simulation import Clip, run_simulation
    from kettle.transcribe.audio.read import load_audio

    refs = {c.path.relative_to(eval_dir).as_posix(): c.reference for c in eval_clips}
    clips = [Clip(name, load_audio(eval_dir / name), refs[name]) for name in WER_CLIPS]
    offline = tiny_decoder.decode_batch(
        [
            DecodeRequest(audio=c.audio, kind=DecodeKind.FINAL, request_id=i, beam_size=5)
            for i, c in enumerate(clips)
        ]
    )
    references = [c.reference or "" for c in clips]
    offline_wer = wer_fn(references, [r.text for r in offline])

    config = SessionConfig(partial_interval_s=1.0)
    # Accuracy, not load: a fast run keeps the engine saturated, which on a busy machine would
    # stretch or pause partials (cadence, degrade.py) and leave nothing to check about them.
    engine_config = EngineConfig(degrade=DegradeConfig(enabled=False), adaptive_cadence=False)
    async with Engine(tiny_decoder, engine_config) as engine:
        result = await run_simulation(engine, [[c] for c in clips], realtime=False, config=config)
    streamed = [log.hypothesis() for log in result.logs]
    streaming_wer = wer_fn(references, streamed)
    assert result.summary["stable_revisions"] == 0
    assert result.summary["finals_lost"] == 0
    assert result.summary["partials"] > 0
    assert streaming_wer <= offline_wer + 0.01, (streamed, [r.text for r in offline])


@pytest.mark.slow
async def test_silence_and_noise_give_no_finals_with_words(tiny_decoder: Any) -> None:
    rng = np.random.default_rng(7)
    silence = np.zeros(4 * SR, dtype=np.float32)
    white = (rng.standard_normal(6 * SR) * 0.05).astype(np.float32)
    loud = (rng.standard_normal(4 * SR) * 0.3).astype(np.float32)
    hum = (0.2 * np.sin(2 * np.pi * 50 * np.arange(4 * SR) / SR)).astype(np.float32)
    async with Engine(tiny_decoder) as engine:
        events = await run_one(engine, np.concatenate([silence, white, hum, loud, silence]))
    finals = [e for e in events if isinstance(e, Final)]
    assert [f.text for f in finals] == []
    assert isinstance(events[-1], Done) and events[-1].utterances == 0


async def test_an_idle_engine_releases_memory_on_the_model_thread_once_an_interval() -> None:
    released: list[str] = []
    config = EngineConfig(release_memory_s=3600.0)
    dec = FakeDecoder()
    engine = Engine(
        dec,
        config,
        release_memory=lambda: released.append(threading.current_thread().name),
    )
    async with engine:
        assert released == []  # no work yet
        await run_one(engine, TWO)
        await run_one(engine, TWO)
    assert len(released) == 1  # the second stream's work came within the interval
    # on the model's own thread, so no decode runs beside it
    assert released[0].startswith("kettle-inference")


async def test_no_release_unless_configured() -> None:
    released: list[int] = []
    async with Engine(FakeDecoder(), release_memory=lambda: released.append(1)) as engine:
        await run_one(engine, TWO)
    assert released == []
    with pytest.raises(KettleError):
        EngineConfig(release_memory_s=0.0)
