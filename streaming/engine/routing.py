"""Routing: the open streams; each one's new requests to the ledger, its events back to it."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Hashable

from kettle.streaming.engine.clock import Clock
from kettle.streaming.engine.ledger import Ledger
from kettle.streaming.engine.load import LoadControl
from kettle.streaming.engine.records import StreamRecord
from kettle.streaming.engine.scheduling.scheduler import Priority, Scheduler
from kettle.streaming.engine.stream import Stream
from kettle.transcribe.types import SAMPLE_RATE, DecodeKind, Decoder, DecodeRequest


class Router:
    """What the engine does when a stream opens, changes or ends; holds the open streams."""

    def __init__(
        self,
        ledger: Ledger,
        scheduler: Scheduler,
        clock: Clock,
        load: LoadControl,
        *,
        decoder: Decoder,
        kick: Callable[[], None],
        drained: Callable[[], None],
    ) -> None:
        self._ledger = ledger
        self._scheduler = scheduler  # told each stream's pace
        self._clock = clock
        self._load = load
        self._records: dict[str, StreamRecord] = {}  # stream id -> its record, while open
        self._decoder = decoder  # the one whose per-utterance features are released
        self._kick = kick  # wakes the engine's loop
        self._drained = drained  # called when the last open stream is released

    # --- the open streams ----------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._records)

    @property
    def streams(self) -> list[Stream]:
        return [record.stream for record in self._records.values()]

    def open(self, stream: Stream) -> None:
        self._records[stream.stream_id] = StreamRecord(stream)

    def is_open(self, stream: Stream) -> bool:
        return stream.stream_id in self._records

    def live_pausing(self, now: float) -> bool:
        """Whether a live stream (not ahead of real time) is in a pause, its final near."""
        return any(
            record.stream.session.pausing and not self._scheduler.ahead(stream_id, now)
            for stream_id, record in self._records.items()
        )

    def final_headroom(self, now: float) -> float:
        """Seconds before a live stream's final can come due (math.inf: none is inside an
        utterance): a refinement that starts must finish by then, since a decode cannot be
        preempted."""
        return min(
            (
                headroom
                for stream_id, record in self._records.items()
                if (headroom := record.stream.session.final_headroom_s) is not None
                and not self._scheduler.ahead(stream_id, now)
            ),
            default=math.inf,
        )

    # --- a stream changes or ends --------------------------------------------------------
    def stream_changed(self, stream: Stream) -> None:
        """Move a session's new requests to the ledger and its events to the stream."""
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
            self._submit(request, now, stream)
        if record is not None and session.final_due and session.in_flight is not None:
            # The utterance ended on the speculated window: the speculation is the final.
            self._ledger.promote(stream, session.in_flight, Priority.FINAL)
        stream.deliver(session.poll_events())
        stream.set_pending(not (record is None or not session.busy or session.done))
        if session.done:
            self.release(stream)
        if requests:
            self._kick()

    def release(self, stream: Stream) -> None:
        """Drop a stream's record, its requests (a finished one has none) and its pace."""
        record = self._records.pop(stream.stream_id, None)
        if record is None:
            return
        self._track_key(record, None)
        self._ledger.cancel(stream)  # also forgets its pace and fair share
        self._load.forget(stream.stream_id)
        if not self._records:
            self._drained()

    def _submit(self, request: DecodeRequest, now: float, stream: Stream) -> None:
        """Queue a live request as the load allows, a final one round at a time."""
        if request.kind is DecodeKind.FINAL and request.fallback_round is None:
            # Live finals ask the model for one temperature-fallback round at a time.
            request = dataclasses.replace(request, fallback_round=0)
        self._ledger.submit(self._load.adjust(request), now, stream)

    def _withdraw_superseded(self, stream: Stream) -> None:
        # Loops because the session's next request may itself be superseded (rare).
        for _ in range(4):
            rid = stream.session.superseded
            if rid is None:
                return
            if self._ledger.withdraw(stream, rid) is None:
                return  # already running: its result comes back and is handled then
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
