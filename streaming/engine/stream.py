"""One live stream of the engine: audio and control in, events out.

A ``Stream`` owns its session and its event queue. After each call into the session it takes
what the session produced: the events go to its own queue, the new decode requests go to its
``StreamHost`` (routing.Router) as a ``StreamChange`` record, so the host never reads the
session. The engine side (outcomes.py, load.py) reaches the session only through the methods
under "engine side" below; the server asks its questions (undecoded audio, refinement counts)
of the stream, not of the session.

Methods are called on the event loop's thread (the server's connection handlers).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Hashable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from kettle.streaming.core.backlog import FINAL, OTHER, PARTIAL, Backlog
from kettle.streaming.core.events import Done, Error, Event, Final, Partial
from kettle.streaming.core.refine import RefineStats
from kettle.streaming.core.session import Session, SessionConfig
from kettle.streaming.engine.speakers import SpeakerService, StreamLabeler
from kettle.transcribe.types import DecodeRequest, DecodeResult


@dataclass(frozen=True)
class StreamChange:
    """What a stream's session asked of the engine since the stream last told its host."""

    requests: tuple[DecodeRequest, ...]  # new decode requests, in the order asked
    samples_fed: int  # audio fed so far (the client's pace)
    promote: str | None  # its queued speculative final, now the final (the utterance ended)
    done: bool  # the session produced Done: the host lets the stream go


class StreamHost(Protocol):
    def is_open(self, stream: Stream) -> bool:
        """Whether the host still holds the stream (False once released)."""

    def withdraw(self, stream: Stream, request_id: Hashable) -> bool:
        """Take back a queued request; False if it is not queued (running: its result comes)."""

    def stream_changed(self, stream: Stream, change: StreamChange) -> None:
        """Act on what the session asked for (queue, promote, release when done)."""

    def stream_aborted(self, stream: Stream) -> None:
        """The stream is gone: drop its queued work."""


class Stream:
    """One live stream. Created by ``Engine.open_stream``."""

    def __init__(
        self,
        host: StreamHost,
        stream_id: str,
        session: Session,
        queue_size: int,
        speakers: SpeakerService | None = None,
    ) -> None:
        self.stream_id = stream_id
        self._host = host
        self._session = session
        self._events: Backlog[Event] = Backlog(queue_size, _classify)
        self._wakeup = asyncio.Event()
        self._finished = False  # Done returned to the reader (or aborted)
        self._aborted = False
        self._idle = asyncio.Event()  # set while no decode of this stream is pending
        self._idle.set()
        # With diarize: finals wait for their speaker label (engine/speakers.py).
        self._labeler = (
            StreamLabeler(
                speakers,
                session.take_speech,
                session.take_closed_speech,
                self._queue,
                session.config.max_speakers,
            )
            if speakers is not None and session.config.diarize
            else None
        )

    # --- inputs --------------------------------------------------------------------------
    @property
    def samples_fed(self) -> int:
        return self._session.samples_fed

    @property
    def session(self) -> Session:
        """For tests and tools; the engine and the server use the methods of the stream."""
        return self._session

    @property
    def undecoded_samples(self) -> int:
        """Audio the session holds for decodes still to come (Session.undecoded_samples)."""
        return self._session.undecoded_samples

    @property
    def refinements(self) -> RefineStats | None:
        """What the refinement pass did so far; None when revisions are off."""
        return self._session.refinements

    @property
    def aborted(self) -> bool:
        return self._aborted

    @property
    def labeler(self) -> StreamLabeler | None:
        """The speaker labeler (with diarize and a speaker model), else None."""
        return self._labeler

    @property
    def partials_dropped(self) -> int:
        """Partials replaced by newer ones before the reader took them."""
        return self._events.dropped_partials

    def feed_audio(self, samples: np.ndarray) -> None:
        """Float32 mono 16 kHz, any size. Never blocks; ignored after stop or abort."""
        if self._aborted:
            return
        self._session.feed_audio(samples)
        self._sync()

    def finalize(self, *, new_request: bool = False) -> None:
        """Session.finalize."""
        if self._aborted:
            return
        self._session.finalize(new_request=new_request)
        self._sync()

    def set_keyterms(self, terms: tuple[str, ...]) -> None:
        """Keyterms for the decodes asked from now on (Session.set_keyterms)."""
        if not self._aborted:
            self._session.set_keyterms(terms)

    def set_endpoint_silence(self, ms: int) -> None:
        """The VAD's endpoint silence from now on (Session.set_endpoint_silence)."""
        if not self._aborted:
            self._session.set_endpoint_silence(ms)

    def reconfigure(self, config: SessionConfig) -> None:
        """The settings a running stream may change, from now on (Session.reconfigure)."""
        if not self._aborted:
            self._session.reconfigure(config)
            self._sync()

    def stop(self, reason: str | None = None) -> None:
        """Finalize what it holds; the remaining finals then Done follow. Idempotent."""
        if self._aborted:
            return
        self._session.stop(reason)
        self._sync()

    def abort(self) -> None:
        """The client vanished: drop queued work, release everything, no more events."""
        if self._aborted:
            return
        self._aborted = True
        if self._labeler is not None:
            self._labeler.close()
        self._events.clear()
        self._idle.set()
        self._host.stream_aborted(self)
        self._wakeup.set()

    async def wait_idle(self) -> None:
        """Wait until none of this stream's decodes is queued or running (for ``simulate
        --fast``, which feeds audio as fast as the engine takes it)."""
        await self._idle.wait()

    def endpoint_sample(self, utterance: int) -> int | None:
        """Stream position at which the session decided that utterance's end (for latency)."""
        return self._session.endpoints.get(utterance)

    # --- outputs -------------------------------------------------------------------------
    async def next_event(self) -> Event:
        while True:
            if self._aborted or self._finished:
                raise StopAsyncIteration
            event = self._events.popleft()
            if event is not None:
                if isinstance(event, Done):
                    self._finished = True
                return event
            self._wakeup.clear()
            await self._wakeup.wait()

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Event]:
        while True:
            try:
                yield await self.next_event()
            except StopAsyncIteration:
                return

    # --- engine side ---------------------------------------------------------------------
    @property
    def in_flight(self) -> str | None:
        """The session's live request queued or running, if any."""
        return self._session.in_flight

    @property
    def pausing(self) -> bool:
        """Silence has begun in the open utterance: its final may be asked for soon."""
        return self._session.pausing

    @property
    def final_headroom_s(self) -> float | None:
        """Seconds of audio before the next final can come due (Session.final_headroom_s)."""
        return self._session.final_headroom_s

    @property
    def partial_interval_s(self) -> float:
        """The partial interval of the session's config."""
        return self._session.config.partial_interval_s

    @property
    def interval_hint_s(self) -> float | None:
        """The longer partial interval the engine asks of the session (load.py)."""
        return self._session.interval_hint_s

    @interval_hint_s.setter
    def interval_hint_s(self, hint: float | None) -> None:
        self._session.interval_hint_s = hint

    def on_result(self, result: DecodeResult) -> None:
        """A request's result (outcomes.py)."""
        self._session.on_result(result)
        self._sync()

    def on_dropped(self, request_id: Hashable, *, overloaded: bool = False) -> None:
        """A request that did not run (Session.on_dropped)."""
        self._session.on_dropped(request_id, overloaded=overloaded)
        self._sync()

    def on_failed(self, request_id: Hashable, message: str) -> None:
        """A request that failed for good (Session.on_failed)."""
        self._session.on_failed(request_id, message)
        self._sync()

    def _sync(self) -> None:
        """Hand on what the session produced: its events to the reader, then its requests to
        the host (queueing them wakes no task, so the wakeups come in the order they always
        did: the reader, ``wait_idle``, the engine's close, the engine's loop)."""
        session = self._session
        self._withdraw_superseded()
        requests = tuple(session.poll_requests())
        promote = session.in_flight if session.final_due else None
        open_ = self._host.is_open(self)
        self.deliver(session.poll_events())
        self._set_pending(open_ and session.busy and not session.done)
        change = StreamChange(requests, session.samples_fed, promote, session.done)
        self._host.stream_changed(self, change)

    def _withdraw_superseded(self) -> None:
        # Loops because the session's next request may itself be superseded (rare).
        for _ in range(4):
            rid = self._session.superseded
            if rid is None or not self._host.withdraw(self, rid):
                return  # not queued (running): its result comes back and is handled then
            self._session.on_dropped(rid)

    def deliver(self, events: list[Event]) -> None:
        """Queue events for the reader under the backlog policy (stale partials are replaced;
        finals, errors and done never dropped)."""
        if self._aborted:
            return
        if self._labeler is not None:
            self._labeler.push(events)
        else:
            self._queue(events)

    def _queue(self, events: list[Event]) -> None:
        if self._aborted:
            return
        for event in events:
            self._events.put(event)
        if events:
            self._wakeup.set()

    def _set_pending(self, pending: bool) -> None:
        """Whether a decode of this stream is queued or running (``wait_idle``)."""
        if pending:
            self._idle.clear()
        else:
            self._idle.set()

    def fail(self, message: str) -> None:
        """End the stream after an internal error: a fatal Error, then Done."""
        session = self._session
        self.deliver(
            [
                Error("internal", message, fatal=True),
                Done(session.samples_fed, session.finals_sent, "error"),
            ]
        )
        self._idle.set()


def _classify(event: Event) -> tuple[str, int]:
    if isinstance(event, Partial):
        return PARTIAL, event.utterance
    if isinstance(event, Final):
        return FINAL, event.utterance
    return OTHER, -1
