"""Load control as the one producer of overloaded notices, with one throttle per stream."""

from __future__ import annotations

from typing import cast

from kettle.streaming.core.events import Error, Event
from kettle.streaming.core.session import Session, SessionConfig
from kettle.streaming.core.vad import EnergyClassifier
from kettle.streaming.engine.clock import Clock
from kettle.streaming.engine.config import EngineConfig
from kettle.streaming.engine.load import SKIPPING, LoadControl
from kettle.streaming.engine.scheduling.scheduler import Scheduler
from kettle.streaming.engine.stream import Stream
from kettle.transcribe.model.fake import synth_voice
from kettle.transcribe.types import SAMPLE_RATE


class Now:
    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t


class Client:
    """The part of a Stream that load control reaches: its id, its partial interval and the
    engine's hint for it, its events."""

    def __init__(self, stream_id: str = "s1") -> None:
        self.stream_id = stream_id
        self.partial_interval_s = SessionConfig().partial_interval_s
        self.interval_hint_s: float | None = None
        self.events: list[Event] = []

    def deliver(self, events: list[Event]) -> None:
        self.events += events

    @property
    def notices(self) -> list[Error]:
        return [e for e in self.events if isinstance(e, Error) and e.code == "overloaded"]


def control() -> tuple[LoadControl, Now]:
    now = Now()
    return LoadControl(EngineConfig(), Scheduler(), cast(Clock, now), None), now


def test_overloaded_notice_at_most_once_per_five_seconds_while_partials_are_skipped() -> None:
    load, now = control()
    client = Client()
    stream = cast(Stream, client)
    session = Session(SessionConfig(), session_id="t", classifier=EnergyClassifier())
    voice = synth_voice(20.0)
    for i in range(0, len(voice), 320):
        now.t = i / SAMPLE_RATE  # a live stream: its audio comes in real time
        session.feed_audio(voice[i : i + 320])
        for r in session.poll_requests():
            load.partial_skipped(stream)  # every partial skipped
            session.on_dropped(r.request_id, overloaded=True)
    assert 3 <= len(client.notices) <= 4  # ~20 s / 5 s


def test_level_steps_and_skipped_partials_share_one_throttle() -> None:
    load, now = control()
    client, other = Client("s1"), Client("s2")
    streams = [cast(Stream, client), cast(Stream, other)]
    load.degrader.pressure(0.0)
    load.level_changed(streams)  # both told
    stepped = load.level.notice
    now.t = 1.0
    load.partial_skipped(streams[0])  # within 5 s of the last notice: not again
    now.t = 5.0
    load.partial_skipped(streams[0])
    load.degrader.pressure(5.0)
    load.level_changed(streams)  # s1 was just told; s2 is told again
    assert [e.message for e in client.notices] == [stepped, SKIPPING]
    assert [e.message for e in other.notices] == [stepped, load.level.notice]


def test_a_stream_forgotten_is_told_again_at_once() -> None:
    load, _ = control()
    client = Client()
    load.partial_skipped(cast(Stream, client))
    load.forget(client.stream_id)
    load.partial_skipped(cast(Stream, client))
    assert len(client.notices) == 2
