"""The request ledger: every decode request the engine holds, from submit to its outcome.

One entry per request, owned by a live stream or a ``decode_offline`` call, in one of the
states below. Only the ledger moves an entry, and only along ``TRANSITIONS``:

- pending: queued in the scheduler;
- in flight: in the batch the model runs;
- superseded: withdrawn while queued, its session having found something more useful;
- dropped: let go without a result (the scheduler replaced or expired it, or it failed
  quietly: a partial or a refinement, which its session asks for again or skips);
- cancelled: its owner went away (a stream released, an offline call settled or cancelled);
- failed: failed for good, after its retries;
- done: its result was delivered.

A live final's temperature-fallback rounds (``DecodeRequest.fallback_round``) and a failed
request's retries are the same entry going from in flight back to pending with a new ticket
(``next_round``, ``retry``); the entry keeps the earlier rounds' results and its retry count.

The ledger is vLLM's scheduler split in two: the order stays in ``scheduling/``, and
``schedule`` hands the engine a ``Batch`` record (vLLM's ``SchedulerOutput``); the outcome
path (``outcomes.py``) consumes a ``BatchOutput`` record (vLLM's ``update_from_output``) and
reports each request back here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import itertools
import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import TypeAlias

from kettle.streaming.engine.scheduling.scheduler import Priority, Scheduler, Ticket
from kettle.streaming.engine.stream import Stream
from kettle.transcribe.types import DecodeRequest, DecodeResult, Purpose


class State(enum.Enum):
    PENDING = "pending"
    IN_FLIGHT = "in flight"
    SUPERSEDED = "superseded"
    DROPPED = "dropped"
    CANCELLED = "cancelled"
    FAILED = "failed"
    DONE = "done"


_ENDED: frozenset[State] = frozenset()
TRANSITIONS: Mapping[State, frozenset[State]] = {
    State.PENDING: frozenset({State.IN_FLIGHT, State.SUPERSEDED, State.DROPPED, State.CANCELLED}),
    # Back to pending: the next temperature-fallback round, or a retry after a failure.
    State.IN_FLIGHT: frozenset(
        {State.PENDING, State.DONE, State.DROPPED, State.FAILED, State.CANCELLED}
    ),
    State.SUPERSEDED: _ENDED,
    State.DROPPED: _ENDED,
    State.CANCELLED: _ENDED,
    State.FAILED: _ENDED,
    State.DONE: _ENDED,
}


class RefusedTransition(RuntimeError):
    """An entry was asked to move where its state does not lead (a bug in the caller)."""


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


Owner: TypeAlias = Stream | OfflineCall


@dataclass(frozen=True)
class Entry:
    """One request as the ledger handed it out; the ledger holds the current one."""

    id: int
    owner: Owner  # where its outcome goes
    ticket: Ticket  # its place in the scheduler: a new one for each round or retry
    state: State = State.PENDING
    index: int = 0  # position in an offline call
    attempt: int = 0  # retries so far
    rounds: tuple[DecodeResult, ...] = ()  # earlier fallback rounds' results

    @property
    def request(self) -> DecodeRequest:
        return self.ticket.request

    @property
    def purpose(self) -> Purpose:
        assert self.request.purpose is not None  # DecodeRequest fills it in
        return self.request.purpose


@dataclass(frozen=True)
class Drop:
    entry: Entry
    reason: str  # the scheduler's: "replaced", "overload" or "stale"


@dataclass(frozen=True)
class Batch:
    """One turn of the engine's loop: the requests to run now (in flight from here) and
    those the scheduler let go since the last turn (dropped: they get no result)."""

    entries: tuple[Entry, ...]
    dropped: tuple[Drop, ...]


@dataclass(frozen=True)
class BatchOutput:
    """What came of running a batch: a result per entry, in order, or the batch's error."""

    entries: tuple[Entry, ...]
    results: tuple[DecodeResult, ...] | None
    error: str | None = None


def owner_key(owner: Owner) -> Hashable:
    """Who a request belongs to in the scheduler (fairness, pace, replacement)."""
    return owner.stream_id if isinstance(owner, Stream) else owner


class Ledger:
    """Every request pending or in flight, keyed by its current ticket. An outcome
    (``complete``, ``drop``, ``fail``, ``next_round``, ``retry``) is only for one in flight."""

    def __init__(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler
        self._held: dict[int, Entry] = {}  # ticket seq -> entry, while pending or in flight
        self._ids = itertools.count()

    def __len__(self) -> int:
        return len(self._held)

    def state(self, entry: Entry) -> State | None:
        """The entry's state now; None once it has ended (ended entries are not kept)."""
        held = self._held.get(entry.ticket.seq)
        return held.state if held is not None and held.id == entry.id else None

    # --- from submit to a batch ----------------------------------------------------------
    def submit(
        self,
        request: DecodeRequest,
        now: float,
        owner: Owner,
        *,
        index: int = 0,
    ) -> Entry:
        """A new request, pending in the class of its purpose (``Priority.of``)."""
        ticket = self._scheduler.submit(request, now, owner=owner_key(owner))
        entry = Entry(next(self._ids), owner, ticket, index=index)
        self._held[ticket.seq] = entry
        return entry

    def schedule(
        self,
        now: float,
        *,
        sources: int | None = None,
        live_pausing: bool = False,
        final_headroom_s: float = math.inf,
    ) -> Batch:
        """The scheduler's next batch, now in flight, and what it let go, now dropped."""
        out = self._scheduler.schedule(
            now, sources=sources, live_pausing=live_pausing, final_headroom_s=final_headroom_s
        )
        dropped = []
        for gone in out.dropped:
            held = self._held.get(gone.ticket.seq)
            if held is not None:  # else cancelled meanwhile: its owner is gone
                dropped.append(Drop(self._move(held, State.DROPPED), gone.reason))
        # The scheduler's ticket: its class may have changed since (``promote``).
        entries = tuple(self._move(self._held[t.seq], State.IN_FLIGHT, ticket=t) for t in out.batch)
        return Batch(entries, tuple(dropped))

    def withdraw(self, owner: Owner, request_id: Hashable) -> Entry | None:
        """Supersede an owner's queued request; None if it is not queued (it may be in
        flight: its result then comes back as usual)."""
        ticket = self._scheduler.withdraw(owner_key(owner), request_id)
        if ticket is None:
            return None
        return self._move(self._held[ticket.seq], State.SUPERSEDED)

    def promote(self, owner: Owner, request_id: Hashable, priority: Priority) -> bool:
        """Move an owner's queued request to a more urgent class (a speculative final that
        is now the final); False if there is no such request queued."""
        ticket = self._scheduler.promote(owner_key(owner), request_id, priority)
        if ticket is None:
            return False
        held = self._held[ticket.seq]
        self._held[ticket.seq] = dataclasses.replace(held, ticket=ticket)
        return True

    def cancel(self, owner: Owner) -> list[Entry]:
        """The owner went away: its requests, queued or in flight, end here."""
        self._scheduler.cancel(owner_key(owner))
        gone = [e for e in self._held.values() if e.owner is owner]
        return [self._move(e, State.CANCELLED) for e in gone]

    # --- outcomes (outcomes.py) ----------------------------------------------------------
    def complete(self, entry: Entry) -> Entry:
        """Its result goes to its owner."""
        return self._move(entry, State.DONE, ran=True)

    def drop(self, entry: Entry) -> Entry:
        """It failed, and its owner is told it was not run (a partial or a refinement)."""
        return self._move(entry, State.DROPPED, ran=True)

    def fail(self, entry: Entry) -> Entry:
        """It failed for good; its owner is told."""
        return self._move(entry, State.FAILED, ran=True)

    def next_round(
        self, entry: Entry, request: DecodeRequest, result: DecodeResult, now: float
    ) -> Entry:
        """Its round failed the checks: ``request`` (the next round) is pending, in its class."""
        self._check(entry, State.PENDING, ran=True)
        ticket = self._scheduler.submit(
            request, now, owner=owner_key(entry.owner), priority=entry.ticket.priority
        )
        return self._move(entry, State.PENDING, ticket=ticket, rounds=(*entry.rounds, result))

    def retry(self, entry: Entry, now: float) -> Entry:
        """It failed: it is pending again, alone in a batch, so a request that breaks the
        model cannot fail the others again."""
        self._check(entry, State.PENDING, ran=True)
        ticket = self._scheduler.submit(
            entry.request,
            now,
            owner=owner_key(entry.owner),
            priority=entry.ticket.priority,
            solo=True,
        )
        return self._move(entry, State.PENDING, ticket=ticket, attempt=entry.attempt + 1)

    def _move(
        self,
        entry: Entry,
        to: State,
        *,
        ticket: Ticket | None = None,
        attempt: int | None = None,
        rounds: tuple[DecodeResult, ...] | None = None,
        ran: bool = False,
    ) -> Entry:
        """The one place an entry's state changes (``ran``: an outcome, so it must have
        been in flight)."""
        held = self._check(entry, to, ran=ran)
        moved = dataclasses.replace(
            held,
            state=to,
            ticket=held.ticket if ticket is None else ticket,
            attempt=held.attempt if attempt is None else attempt,
            rounds=held.rounds if rounds is None else rounds,
        )
        del self._held[held.ticket.seq]
        if to in (State.PENDING, State.IN_FLIGHT):
            self._held[moved.ticket.seq] = moved
        return moved

    def _check(self, entry: Entry, to: State, *, ran: bool = False) -> Entry:
        """The entry as held now, if it may move to ``to``; else RefusedTransition."""
        held = self._held.get(entry.ticket.seq)
        if held is None or held.id != entry.id:
            raise RefusedTransition(f"request {entry.request.request_id!r} has ended")
        if to not in TRANSITIONS[held.state] or (ran and held.state is not State.IN_FLIGHT):
            raise RefusedTransition(
                f"request {entry.request.request_id!r}: {held.state.value} -> {to.value}"
            )
        return held
