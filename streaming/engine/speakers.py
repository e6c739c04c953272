"""Speaker labels for live streams: embeddings beside the model's thread, labels in order.

``SpeakerService`` owns the speaker encoder and one thread of its own (not the model's: a
final's decode never waits for an embedding, nor an embedding for a decode batch).
``StreamLabeler`` sits between a stream's session and its event queue: a Final waits there
for its label (the embedding of its audio, clustered with the stream's earlier speakers), and
every event after it waits behind it, so the client still gets events in the session's order.
The embedding starts when the utterance closes (``Session.take_closed_speech``), beside its
final's decode, so the label is usually ready before the final is. A Revision is labeled
again against the speakers as they are now (they have heard more): it may move its utterance to
another speaker, and says so, as docs/protocol.md#revision lets a revision do. An embedding that
fails labels the final with the last speaker heard at confidence 0: a final is never lost or held
for good.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np
from kettle.streaming.core.events import Event, Final, Revision
from kettle.transcribe.speakers.clusters import SpeakerClusters, SpeakerLabel
from kettle.transcribe.speakers.encoder import SpeakerEncoder
from kettle.transcribe.types import SAMPLE_RATE

logger = logging.getLogger(__name__)
T = TypeVar("T")
KEEP_LABELS = 256


class SpeakerService:
    """The encoder and its thread, shared by every stream of an engine."""

    def __init__(self, encoder: SpeakerEncoder | Callable[[], SpeakerEncoder]) -> None:
        # A callable loads the encoder on first use, on the speaker thread (torch's import
        # takes seconds; a server with no diarizing client never pays it).
        self._encoder = encoder if not callable(encoder) else None
        self._load = encoder if callable(encoder) else None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kettle-speaker")

    def encoder(self) -> SpeakerEncoder:
        """The encoder, loaded if need be (call on the speaker thread: ``run``)."""
        if self._encoder is None:
            assert self._load is not None
            self._encoder = self._load()
        return self._encoder

    async def embed(self, audio: np.ndarray) -> np.ndarray:
        return await self.run(lambda encoder: encoder.embed(audio))

    async def run(self, fn: Callable[[SpeakerEncoder], T]) -> T:
        """``fn(encoder)`` on the speaker thread (a file's spans: diarize.label_spans)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: fn(self.encoder()))

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


class StreamLabeler:
    """One stream's speakers, and the events held until their final is labeled."""

    def __init__(
        self,
        service: SpeakerService,
        speech: Callable[[int], np.ndarray | None],
        closed: Callable[[], list[tuple[int, np.ndarray]]],
        release: Callable[[list[Event]], None],
        max_speakers: int,
    ) -> None:
        self._service = service
        self._speech = speech  # Session.take_speech
        self._closed = closed  # Session.take_closed_speech
        # Embeddings started at an utterance's close: start sample -> (samples, embedding).
        self._early: dict[int, tuple[int, asyncio.Future[np.ndarray]]] = {}
        self._release = release
        self.clusters = SpeakerClusters(max_speakers=max_speakers)
        self._held: deque[Event] = deque()
        # Utterance -> its label and embedding, for the last KEEP_LABELS finals (revisions
        # come soon after their final).
        self._labels: OrderedDict[int, tuple[SpeakerLabel, np.ndarray | None]] = OrderedDict()
        self._task: asyncio.Task[None] | None = None
        self.early_labels = 0  # labels whose embedding started at the utterance's close

    @property
    def holding(self) -> int:
        return len(self._held)

    def push(self, events: list[Event]) -> None:
        for start, audio in self._closed():
            self._early[start] = (len(audio), asyncio.ensure_future(self._service.embed(audio)))
        self._held.extend(events)
        self._drain()

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        for _, future in self._early.values():
            future.cancel()
        self._early.clear()
        self._held.clear()

    def _drain(self) -> None:
        """Release events up to the first final not labeled yet, and start its label."""
        if self._task is not None:
            return
        ready: list[Event] = []
        while self._held:
            event = self._held[0]
            if isinstance(event, Final) and event.utterance not in self._labels:
                self._task = asyncio.ensure_future(self._label(event))
                break
            ready.append(self._labeled(self._held.popleft()))
        if ready:
            self._release(ready)

    async def _label(self, final: Final) -> None:
        audio = self._speech(final.utterance)
        early = self._take_early(final)
        embedding: np.ndarray | None = None
        try:
            if early is not None:
                self.early_labels += 1
                embedding = await early
            elif audio is not None and len(audio):
                embedding = await self._service.embed(audio)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("speaker embedding of utterance %d failed", final.utterance)
        seconds = (final.end - final.start) / SAMPLE_RATE
        self._labels[final.utterance] = (self.clusters.assign(embedding, seconds), embedding)
        while len(self._labels) > KEEP_LABELS:
            self._labels.popitem(last=False)
        self._task = None
        self._drain()

    def _take_early(self, final: Final) -> asyncio.Future[np.ndarray] | None:
        """The embedding started at this final's close, if it covers the same audio; those
        of earlier starts (utterances that gave no final) are dropped."""
        for start in [s for s in self._early if s < final.start]:
            self._early.pop(start)[1].cancel()
        samples, future = self._early.pop(final.start, (0, None))
        if future is not None and samples != final.end - final.start:
            future.cancel()
            return None
        return future

    def _labeled(self, event: Event) -> Event:
        if isinstance(event, Final | Revision) and event.utterance in self._labels:
            label, embedding = self._labels[event.utterance]
            if isinstance(event, Revision) and embedding is not None:
                label = self.clusters.nearest(embedding) or label
            return dataclasses.replace(
                event, speaker=label.speaker, speaker_confidence=round(label.confidence, 3)
            )
        return event
