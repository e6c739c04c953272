"""Routing: the open streams, and each one's new requests to the ledger.

The router is the streams' ``StreamHost``: a stream hands it a ``StreamChange`` record after
each call into its session, and the router queues, promotes or lets go what the record says.
It reads no session: the streams answer its questions (pace, pause, headroom) themselves.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Hashable

from kettle.streaming.engine.clock import Clock
from kettle.streaming.engine.ledger import Ledger
from kettle.streaming.engine.load import LoadControl
from kettle.streaming.engine.records import StreamRecord
from kettle.streaming.engine.scheduling.scheduler import Priority, Scheduler
from kettle.streaming.engine.stream import Stream, StreamChange
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
            record.stream.pausing and not self._scheduler.ahead(stream_id, now)
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
                if (headroom := record.stream.final_headroom_s) is not None
                and not self._scheduler.ahead(stream_id, now)
            ),
            default=math.inf,
        )

    # --- a stream changes or ends (the StreamHost protocol) -------------------------------
    def stream_changed(self, stream: Stream, change: StreamChange) -> None:
        """Queue a stream's new requests (nothing more runs for a released one), note its
        pace, promote its speculative final that is now the final; let it go when done."""
        record = self._records.get(stream.stream_id)
        if record is None:
            return  # released (failed or finished): nothing more runs for it
        now = self._clock.now()
        if change.samples_fed > record.fed:
            # The client's pace: a stream ahead of real time yields to live ones.
            fed, record.fed = change.samples_fed - record.fed, change.samples_fed
            self._scheduler.observe_audio(stream.stream_id, fed / SAMPLE_RATE, now)
        for request in change.requests:
            if request.stream_key is not None:
                self._track_key(record, request.stream_key)
            self._submit(request, now, stream)
        if change.promote is not None:
            # The utterance ended on the speculated window: the speculation is the final.
            self._ledger.promote(stream, change.promote, Priority.FINAL)
        if change.done:
            self.release(stream)
        if change.requests:
            self._kick()

    def withdraw(self, stream: Stream, request_id: Hashable) -> bool:
        """Supersede a stream's queued request; False if it is not queued."""
        return self._ledger.withdraw(stream, request_id) is not None

    def stream_aborted(self, stream: Stream) -> None:
        self.release(stream)

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

    def _track_key(self, record: StreamRecord, key: Hashable | None) -> None:
        """A stream's requests carry one stream key per utterance, in order: when a new key
        appears (or the stream ends) the previous utterance is over and the model may drop
        its incremental features. The adapter itself knows no lifecycles."""
        if record.key is not None and record.key != key:
            release = getattr(self._decoder, "release_stream", None)
            if release is not None:
                release(record.key)
        record.key = key
