"""Outcomes: each request's result or failure routed to its stream or offline call; retries.

The outcome path of the request ledger (``ledger.py``): it consumes a ``BatchOutput`` record
(``update_from_output``) and the requests a ``Batch`` dropped (``route_dropped``), and
reports each request's next state to the ledger.

Each temperature-fallback round of a live final is a request of its own
(``DecodeRequest.fallback_round``): a final that needs a retry goes back in the queue and the
rest of its batch is delivered at once.

Failures: each request fails on its own. A failed partial is dropped quietly (the session asks
again later), and so is a failed refinement (the session skips it); a failed final or
offline request is retried alone ``RetryPolicy.retries`` times, then its stream gets a
non-fatal ``Error("internal")`` naming the utterance and goes on (an offline request gets a
result with ``error`` set).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from kettle.streaming.engine.clock import Clock
from kettle.streaming.engine.ledger import BatchOutput, Drop, Entry, Ledger, OfflineCall
from kettle.streaming.engine.load import LoadControl
from kettle.streaming.engine.stream import Stream
from kettle.streaming.engine.worker import RetryPolicy
from kettle.transcribe.errors import KettleError
from kettle.transcribe.model.decoding import pick_after_fallback
from kettle.transcribe.types import DecodeRequest, DecodeResult, Purpose

logger = logging.getLogger(__name__)

# A failed partial is asked for again later, and a failed refinement is skipped.
QUIET = frozenset({Purpose.PARTIAL, Purpose.REFINEMENT})


class OpenStreams(Protocol):
    """What the outcome path asks of the open streams (routing.Router)."""

    def is_open(self, stream: Stream) -> bool: ...

    def release(self, stream: Stream) -> None: ...


class Outcomes:
    """Routes results, failures and drops; the ledger records each request's next state."""

    def __init__(
        self,
        ledger: Ledger,
        clock: Clock,
        retry: RetryPolicy,
        streams: OpenStreams,
        load: LoadControl,
    ) -> None:
        self._ledger = ledger
        self._clock = clock
        self._retry = retry
        self._streams = streams
        self._load = load  # adjusts a live final's next round; the one overloaded notice

    def route_dropped(self, dropped: Sequence[Drop]) -> None:
        """Tell the sessions which of their requests the scheduler dropped."""
        for drop in dropped:
            stream = drop.entry.owner
            if not isinstance(stream, Stream) or not self._streams.is_open(stream):
                continue
            request_id = drop.entry.request.request_id
            overloaded = drop.reason == "overload"
            try:
                if overloaded and stream.in_flight == request_id:
                    self._load.partial_skipped(stream)  # before its session's own events
                stream.on_dropped(request_id, overloaded=overloaded)
            except Exception as exc:
                self.fail_stream(stream, exc)

    def update_from_output(self, output: BatchOutput) -> None:
        """Route each request's result, or the batch's failure, in batch order."""
        if output.results is None:
            error = output.error or "decode failed"
            for entry in output.entries:
                self._guarded(entry, functools.partial(self._on_failure, entry, error))
            return
        for entry, result in zip(output.entries, output.results, strict=True):
            self._guarded(entry, functools.partial(self._on_result, entry, result))

    def fail_stream(self, stream: Stream, exc: Exception) -> None:
        """End one stream after an internal error: a fatal Error, then Done; others go on."""
        try:
            logger.error("stream %s failed", stream.stream_id, exc_info=exc)
            stream.fail(f"internal error: {type(exc).__name__}")
        finally:
            self._streams.release(stream)

    def _on_result(self, entry: Entry, result: DecodeResult) -> None:
        if self._ledger.state(entry) is None:
            return  # its owner went away meanwhile
        if result.error is not None:
            self._on_failure(entry, result.error)
            return
        if result.next_round is not None and entry.purpose is not Purpose.REFINEMENT:
            # This temperature failed the checks: the next round is a request of its own.
            # (A refinement runs one round: one that fails it revises nothing.)
            request = dataclasses.replace(entry.request, fallback_round=result.next_round)
            if isinstance(entry.owner, Stream):
                request = self._load.adjust(request)
            self._ledger.next_round(entry, request, result, self._clock.now())
            return
        self._ledger.complete(entry)
        result = settle_rounds((*entry.rounds, result))
        if isinstance(entry.owner, OfflineCall):
            entry.owner.settle(entry.index, result)
            return
        entry.owner.on_result(result)

    def _on_failure(self, entry: Entry, error: str) -> None:
        if self._ledger.state(entry) is None:
            return  # its owner went away meanwhile
        owner = entry.owner
        if isinstance(owner, Stream) and entry.purpose in QUIET:
            self._ledger.drop(entry)
            owner.on_dropped(entry.request.request_id)
            return
        if entry.attempt < self._retry.retries:
            self._ledger.retry(entry, self._clock.now())
            return
        logger.error("request %r failed for good: %s", entry.request.request_id, error)
        self._ledger.fail(entry)
        if isinstance(owner, OfflineCall):
            owner.settle(entry.index, error_result(entry.request, error))
            return
        owner.on_failed(entry.request.request_id, error)

    def _guarded(self, entry: Entry, action: Callable[[], None]) -> None:
        """Run one request's handling; a bug there ends only that request's stream (or
        offline call), and the rest of the batch is still handled."""
        try:
            action()
        except Exception as exc:
            owner = entry.owner
            if isinstance(owner, OfflineCall):
                logger.exception("offline request failed")
                if not owner.future.done():
                    owner.future.set_exception(KettleError(f"internal error: {exc}"))
                return
            if self._streams.is_open(owner):
                self.fail_stream(owner, exc)


def settle_rounds(rounds: Sequence[DecodeResult]) -> DecodeResult:
    """A final's result from its fallback rounds: the last if it passed the checks, else
    Whisper's pick among them (``decoding.pick_after_fallback``)."""
    last = rounds[-1]
    if last.fallback is None:
        return last
    return pick_after_fallback(rounds, lambda r: r.fallback == "repetitive")


def error_result(request: DecodeRequest, error: str) -> DecodeResult:
    return DecodeResult(request.request_id, request.kind, "", error=error)
