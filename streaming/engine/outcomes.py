"""Outcomes: each request's result or failure routed to its stream or offline call; retries.

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

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Protocol

from kettle.streaming.engine.clock import Clock
from kettle.streaming.engine.records import StreamRecord
from kettle.streaming.engine.scheduling.scheduler import Priority, Scheduler, Ticket
from kettle.streaming.engine.stream import Stream
from kettle.streaming.engine.worker import RetryPolicy
from kettle.transcribe.errors import KettleError
from kettle.transcribe.types import DecodeKind, DecodeRequest, DecodeResult

logger = logging.getLogger(__name__)


@dataclass(eq=False)
class OfflineCall:
    """One decode_offline call: its results by position, filled as batches finish."""

    results: list[DecodeResult | None]
    future: asyncio.Future[list[DecodeResult]]
    remaining: int

    def settle(self, index: int, result: DecodeResult) -> None:
        if self.results[index] is not None or self.future.done():
            return
        self.results[index] = result
        self.remaining -= 1
        if self.remaining == 0:
            self.future.set_result([r for r in self.results if r is not None])


@dataclass(frozen=True)
class Tag:
    """What travels with a request through retries and fallback rounds."""

    index: int = 0  # position in an offline call
    attempt: int = 0  # retries so far
    rounds: tuple[DecodeResult, ...] = ()  # earlier fallback rounds' results


class Submit(Protocol):
    """The engine's way in to the scheduler (it adjusts live requests to the load)."""

    def __call__(
        self,
        request: DecodeRequest,
        now: float,
        owner: Hashable,
        priority: Priority | None = None,
        tag: Tag | None = None,
    ) -> None: ...


class Outcomes:
    """Routes results and failures; reads and updates the tags that routing.py sets."""

    def __init__(
        self,
        scheduler: Scheduler,
        clock: Clock,
        retry: RetryPolicy,
        records: dict[str, StreamRecord],
        offline: set[OfflineCall],
        tags: dict[int, Tag],
        *,
        submit: Submit,
        changed: Callable[[Stream], None],
        release: Callable[[Stream], None],
    ) -> None:
        self._scheduler = scheduler
        self._clock = clock
        self._retry = retry
        self._records = records  # the engine's own dict and set, shared
        self._offline = offline
        self._submit = submit
        self._changed = changed
        self._release = release
        self._tags = tags  # ticket seq -> tag, for tickets queued or running

    def route_dropped(self) -> None:
        """Tell the sessions which of their requests the scheduler dropped."""
        for dropped in self._scheduler.take_dropped():
            self._tags.pop(dropped.ticket.seq, None)
            record = self._records.get(str(dropped.ticket.owner))
            if record is None:
                continue
            try:
                record.stream.session.on_dropped(
                    dropped.ticket.request.request_id, overloaded=dropped.reason == "overload"
                )
                self._changed(record.stream)
            except Exception as exc:
                self.fail_stream(record.stream, exc)

    def decoded(self, batch: Sequence[Ticket], results: Sequence[DecodeResult]) -> None:
        for ticket, result in zip(batch, results, strict=True):
            self._guarded(ticket, functools.partial(self._on_result, ticket, result))

    def failed(self, batch: Sequence[Ticket], error: str) -> None:
        for ticket in batch:
            self._guarded(ticket, functools.partial(self._on_failure, ticket, error))

    def fail_stream(self, stream: Stream, exc: Exception) -> None:
        """End one stream after an internal error: a fatal Error, then Done; others go on."""
        try:
            logger.error("stream %s failed", stream.stream_id, exc_info=exc)
            stream.fail(f"internal error: {type(exc).__name__}")
        finally:
            self._release(stream)

    def _on_result(self, ticket: Ticket, result: DecodeResult) -> None:
        tag = self._tags.pop(ticket.seq, Tag())
        if result.error is not None:
            self._tags[ticket.seq] = tag
            self._on_failure(ticket, result.error)
            return
        if result.next_round is not None and ticket.priority is not Priority.REFINE:
            # This temperature failed the checks: the next round is a request of its own.
            # (A refinement runs one round: one that fails it revises nothing.)
            retry = dataclasses.replace(ticket.request, fallback_round=result.next_round)
            again = dataclasses.replace(tag, rounds=(*tag.rounds, result))
            self._submit(retry, self._clock.now(), ticket.owner, ticket.priority, again)
            return
        if tag.rounds:
            result = pick_after_fallback((*tag.rounds, result))
        self._complete(ticket, tag, result)

    def _on_failure(self, ticket: Ticket, error: str) -> None:
        tag = self._tags.pop(ticket.seq, Tag())
        if not self._owner_alive(ticket.owner):
            return
        quiet = ticket.kind is DecodeKind.PARTIAL or ticket.priority is Priority.REFINE
        if quiet and not isinstance(ticket.owner, OfflineCall):
            # The session asks for a partial again later; a refinement is skipped.
            stream = self._records[str(ticket.owner)].stream
            stream.session.on_dropped(ticket.request.request_id)
            self._changed(stream)
            return
        if tag.attempt < self._retry.retries:
            # Alone, so a request that breaks the model cannot fail the others again.
            again = dataclasses.replace(tag, attempt=tag.attempt + 1)
            self._submit_solo(ticket, again)
            return
        logger.error("request %r failed for good: %s", ticket.request.request_id, error)
        if isinstance(ticket.owner, OfflineCall):
            ticket.owner.settle(tag.index, error_result(ticket.request, error))
            return
        stream = self._records[str(ticket.owner)].stream
        stream.session.on_failed(ticket.request.request_id, error)
        self._changed(stream)

    def _submit_solo(self, ticket: Ticket, tag: Tag) -> None:
        retry = self._scheduler.submit(
            ticket.request,
            self._clock.now(),
            owner=ticket.owner,
            priority=ticket.priority,
            solo=True,
        )
        self._tags[retry.seq] = tag

    def _complete(self, ticket: Ticket, tag: Tag, result: DecodeResult) -> None:
        owner = ticket.owner
        if isinstance(owner, OfflineCall):
            owner.settle(tag.index, result)
            return
        record = self._records.get(str(owner))
        if record is None:
            return  # aborted meanwhile
        record.stream.session.on_result(result)
        self._changed(record.stream)

    def _owner_alive(self, owner: Hashable) -> bool:
        if isinstance(owner, OfflineCall):
            return owner in self._offline
        return str(owner) in self._records

    def _guarded(self, ticket: Ticket, action: Callable[[], None]) -> None:
        """Run one request's handling; a bug there ends only that request's stream (or
        offline call), and the rest of the batch is still handled."""
        try:
            action()
        except Exception as exc:
            owner = ticket.owner
            if isinstance(owner, OfflineCall):
                logger.exception("offline request failed")
                if not owner.future.done():
                    owner.future.set_exception(KettleError(f"internal error: {exc}"))
                return
            record = self._records.get(str(owner))
            if record is not None:
                self.fail_stream(record.stream, exc)


def pick_after_fallback(rounds: Sequence[DecodeResult]) -> DecodeResult:
    """Whisper's rule when every temperature failed: the most likely attempt that is not too
    repetitive; if the last round passed, it is the one."""
    last = rounds[-1]
    if last.fallback is None:
        return last
    candidates = [r for r in rounds if r.fallback != "repetitive"] or list(rounds)
    return max(candidates, key=lambda r: r.avg_logprob)


def error_result(request: DecodeRequest, error: str) -> DecodeResult:
    return DecodeResult(request.request_id, request.kind, "", error=error)
