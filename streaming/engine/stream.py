"""One live stream of the engine: audio and control in, events out.

A ``Stream`` owns its session and its event queue; whatever it feeds the session is handed to
its ``StreamHost`` (the engine), which moves the session's requests to the scheduler and its
events back here. The two talk only through the public methods below: the host protocol on one
side, ``deliver`` / ``set_pending`` / ``fail`` ("engine side") on the other.

Methods are called on the event loop's thread (the server's connection handlers).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Protocol

import numpy as np
from kettle.streaming.core.backlog import FINAL, OTHER, PARTIAL, Backlog
from kettle.streaming.core.events import Done, Error, Event, Final, Partial
from kettle.streaming.core.session import Session, SessionConfig
from kettle.streaming.engine.speakers import SpeakerService, StreamLabeler


class StreamHost(Protocol):
    def stream_changed(self, stream: Stream) -> None:
        """The stream's session may hold new requests or events."""

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
        return self._session

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
        self._host.stream_changed(self)

    def finalize(self) -> None:
        if self._aborted:
            return
        self._session.finalize()
        self._host.stream_changed(self)

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
            self._host.stream_changed(self)

    def stop(self, reason: str | None = None) -> None:
        """Finalize what it holds; the remaining finals then Done follow. Idempotent."""
        if self._aborted:
            return
        self._session.stop(reason)
        self._host.stream_changed(self)

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

    def set_pending(self, pending: bool) -> None:
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
