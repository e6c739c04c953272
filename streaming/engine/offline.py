"""The engine as a `Decoder` for the file pipeline: uploads share the live engine.

The pipeline is synchronous and runs in a worker thread; each of its batches goes to
`Engine.decode_offline` on the engine's event loop (the lowest priority: live finals and
partials always go first, so an upload delays a live final by at most the one batch already
running) and the thread waits for the results. `transcribe_offline` does all of it for one
recording, and a cancelled caller withdraws what is still queued.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from kettle.transcribe.errors import KettleError
from kettle.transcribe.files.pipeline import PipelineConfig, transcribe_audio
from kettle.transcribe.speakers.diarize import diarize_transcript
from kettle.transcribe.transcript import Transcript
from kettle.transcribe.types import DecodeRequest, DecodeResult

if TYPE_CHECKING:
    from kettle.streaming.engine.engine import Engine


class Cancelled(KettleError):
    """The caller gave up (its client went away); the rest of the file is not decoded."""


class EngineDecoder:
    """A `Decoder` whose batches the engine runs at the offline priority. Call `decode_batch`
    from a thread other than the loop's (the pipeline's worker thread), never on the loop;
    `cancel()` (from any thread) withdraws what is queued and makes later calls raise
    `Cancelled`."""

    def __init__(self, engine: Engine, loop: asyncio.AbstractEventLoop) -> None:
        self._engine = engine
        self._loop = loop
        self._lock = threading.Lock()
        self._cancelled = False
        self._current: concurrent.futures.Future[list[DecodeResult]] | None = None

    @property
    def name(self) -> str:
        return self._engine.final_decoder.name  # offline requests are finals

    @property
    def multilingual(self) -> bool:
        return self._engine.final_decoder.multilingual

    def decode_batch(self, requests: Sequence[DecodeRequest]) -> list[DecodeResult]:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            raise RuntimeError("EngineDecoder.decode_batch would block the engine's own loop")
        with self._lock:
            if self._cancelled:
                raise Cancelled("the transcription was cancelled")
            future = asyncio.run_coroutine_threadsafe(
                self._engine.decode_offline(list(requests)), self._loop
            )
            self._current = future
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            raise Cancelled("the transcription was cancelled") from None
        finally:
            with self._lock:
                self._current = None

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            if self._current is not None:
                self._current.cancel()


async def transcribe_offline(
    engine: Engine, audio: np.ndarray, config: PipelineConfig
) -> Transcript:
    """Transcribe one recording through the engine at offline priority (the finals model).

    Raises KettleError when it cannot be transcribed; cancelling the caller cancels the work.
    """
    decoder = EngineDecoder(engine, asyncio.get_running_loop())
    task = asyncio.ensure_future(asyncio.to_thread(transcribe_audio, audio, decoder, config))
    try:
        # Shielded: a cancelled caller stops the work through cancel(), and the thread ends
        # at its next batch instead of being abandoned mid-call.
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        decoder.cancel()
        task.add_done_callback(_consume)
        raise


async def diarize_offline(engine: Engine, audio: np.ndarray, transcript: Transcript) -> Transcript:
    """The transcript with each segment's speaker, embedded on the engine's speaker thread.

    Raises KettleError when the engine has no speaker model."""
    speakers = engine.speakers
    if speakers is None:
        raise KettleError("diarize needs a speaker model (the engine has none)")
    return await speakers.run(lambda encoder: diarize_transcript(encoder, audio, transcript))


def _consume(task: asyncio.Future[Transcript]) -> None:
    if not task.cancelled():
        task.exception()  # the cancelled caller's outcome: retrieved, so never logged


__all__ = ["Cancelled", "EngineDecoder", "diarize_offline", "transcribe_offline"]
