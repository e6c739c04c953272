"""Routing: each session's new requests to the scheduler, its events back to its stream."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Iterable

from kettle.streaming.engine.clock import Clock
from kettle.streaming.engine.load import LoadControl
from kettle.streaming.engine.outcomes import OfflineCall, Tag
from kettle.streaming.engine.records import StreamRecord
from kettle.streaming.engine.scheduling.scheduler import Priority, Scheduler, Ticket
from kettle.streaming.engine.stream import Stream
from kettle.transcribe.types import SAMPLE_RATE, DecodeKind, Decoder, DecodeRequest


class Router:
    """What the engine does when a stream changes or ends; shares the engine's records and
    the tags of tickets queued or running (which outcomes.py reads back)."""

    def __init__(
        self,
        scheduler: Scheduler,
        clock: Clock,
        load: LoadControl,
        records: dict[str, StreamRecord],
        tags: dict[int, Tag],
        *,
        decoder: Decoder,
        kick: Callable[[], None],
        drained: Callable[[], None],
    ) -> None:
        self._scheduler = scheduler
        self._clock = clock
        self._load = load
        self._records = records
        self._tags = tags
        self._decoder = decoder  # the one whose per-utterance features are released
        self._kick = kick  # wakes the engine's loop
        self._drained = drained  # called when the last open stream is released

    def stream_changed(self, stream: Stream) -> None:
        """Move a session's new requests to the scheduler and its events to the stream."""
        session = stream.session
        record = self._records.get(stream.stream_id)
        self._withdraw_superseded(stream)
        requests = session.poll_requests()
        if record is None:
            requests = []  # released (failed or finished): nothing more runs for it
        now = self._clock.now()
        if record is not None and session.samples_fed > record.fed:
            # The client's pace: a stream ahead of real time yields to live ones.
            fed, record.fed = session.samples_fed - record.fed, session.samples_fed
            self._scheduler.observe_audio(stream.stream_id, fed / SAMPLE_RATE, now)
        for request in requests:
            if record is not None and request.stream_key is not None:
                self._track_key(record, request.stream_key)
            self.submit(request, now, stream.stream_id)
        if record is not None and session.final_due and session.in_flight is not None:
            # The utterance ended on the speculated window: the speculation is the final.
            self._scheduler.promote(stream.stream_id, session.in_flight, Priority.FINAL)
        stream.deliver(session.poll_events())
        stream.set_pending(not (record is None or not session.busy or session.done))
        if session.done:
            self.release(stream, keep_events=True)
        if requests:
            self._kick()

    def release(self, stream: Stream, keep_events: bool = False) -> None:
        """Drop a stream's record, its queued work (unless finishing) and its pace."""
        record = self._records.pop(stream.stream_id, None)
        if record is None:
            return
        self._track_key(record, None)
        if not keep_events:
            self.forget(self._scheduler.cancel(stream.stream_id))
        self._scheduler.forget(stream.stream_id)
        if not self._records:
            self._drained()

    def submit(
        self,
        request: DecodeRequest,
        now: float,
        owner: Hashable,
        priority: Priority | None = None,
        tag: Tag | None = None,
    ) -> None:
        """Queue a request; a live one as the load allows, a live final one round at a time."""
        if not isinstance(owner, OfflineCall):
            if request.kind is DecodeKind.FINAL and request.fallback_round is None:
                # Live finals ask the model for one temperature-fallback round at a time.
                request = dataclasses.replace(request, fallback_round=0)
            request = self._load.adjust(request)
        ticket = self._scheduler.submit(request, now, owner=owner, priority=priority)
        self._tags[ticket.seq] = tag or Tag()

    def forget(self, tickets: Iterable[Ticket]) -> None:
        """Tickets withdrawn or cancelled: they will have no outcome."""
        for ticket in tickets:
            self._tags.pop(ticket.seq, None)

    def _withdraw_superseded(self, stream: Stream) -> None:
        # Loops because the session's next request may itself be superseded (rare).
        for _ in range(4):
            rid = stream.session.superseded
            if rid is None:
                return
            ticket = self._scheduler.withdraw(stream.stream_id, rid)
            if ticket is None:
                return  # already running: its result comes back and is handled then
            self._tags.pop(ticket.seq, None)
            stream.session.on_dropped(rid)

    def _track_key(self, record: StreamRecord, key: Hashable | None) -> None:
        """A stream's requests carry one stream key per utterance, in order: when a new key
        appears (or the stream ends) the previous utterance is over and the model may drop
        its incremental features. The adapter itself knows no lifecycles."""
        if record.key is not None and record.key != key:
            release = getattr(self._decoder, "release_stream", None)
            if release is not None:
                release(record.key)
        record.key = key
