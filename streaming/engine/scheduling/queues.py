"""The scheduler's queues: one list of tickets per priority class, in submit order.

Who is queued, not who goes (that is ``scheduler.py``'s policy). A newer partial of an owner
replaces its queued one; an owner's request may be withdrawn, promoted to a more urgent
class, or all of them cancelled.
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
from collections.abc import Hashable, Iterable, Iterator
from dataclasses import dataclass

from kettle.transcribe.types import DecodeKind, DecodeRequest, Purpose


class Priority(enum.IntEnum):
    """Scheduling classes, most urgent first."""

    FINAL = 0
    PARTIAL = 1
    SPECULATIVE = 2
    REFINE = 3
    OFFLINE = 4

    @classmethod
    def of(cls, request: DecodeRequest) -> Priority:
        """The class a request's purpose puts it in (the one place the engine reads it)."""
        assert request.purpose is not None  # DecodeRequest fills it in
        return _CLASS_OF[request.purpose]


_CLASS_OF = {
    Purpose.FINAL: Priority.FINAL,
    Purpose.PARTIAL: Priority.PARTIAL,
    Purpose.SPECULATIVE: Priority.SPECULATIVE,
    Purpose.REFINEMENT: Priority.REFINE,
    Purpose.UPLOAD: Priority.OFFLINE,
}


@dataclass(frozen=True)
class Ticket:
    request: DecodeRequest
    owner: Hashable
    submitted: float
    seq: int
    priority: Priority = Priority.FINAL
    solo: bool = False  # runs in a batch of its own (a retry after a failed batch)

    @property
    def kind(self) -> DecodeKind:
        return self.request.kind


@dataclass(frozen=True)
class Dropped:
    ticket: Ticket
    reason: str  # "replaced", "overload" or "stale" (a refinement that waited too long)


class Queues:
    """The queued tickets by class; each list in submit order."""

    def __init__(self) -> None:
        self._queues: dict[Priority, list[Ticket]] = {p: [] for p in Priority}
        self._seq = itertools.count()

    def __len__(self) -> int:
        return sum(len(q) for q in self._queues.values())

    def __getitem__(self, priority: Priority) -> list[Ticket]:
        """A class's queue, oldest first (read it; change it through the methods below)."""
        return self._queues[priority]

    def __iter__(self) -> Iterator[Ticket]:
        for queue in self._queues.values():
            yield from queue

    def add(
        self, request: DecodeRequest, now: float, owner: Hashable, priority: Priority, solo: bool
    ) -> tuple[Ticket, Ticket | None]:
        """Queue a request; returns its ticket and the owner's partial it replaced, if any."""
        ticket = Ticket(request, owner, now, next(self._seq), priority, solo)
        queue = self._queues[priority]
        replaced = None
        if priority is Priority.PARTIAL and owner is not None:
            for i, old in enumerate(queue):
                if old.owner == owner:
                    replaced = queue.pop(i)
                    break
        queue.append(ticket)
        return ticket, replaced

    def remove(self, priority: Priority, tickets: Iterable[Ticket]) -> None:
        """Take these tickets out of a class's queue (a batch, or expired ones)."""
        gone = {t.seq for t in tickets}
        queue = self._queues[priority]
        queue[:] = [t for t in queue if t.seq not in gone]

    def cancel(self, owner: Hashable) -> list[Ticket]:
        """Remove every queued ticket of an owner; returns them."""
        gone = [t for t in self if t.owner == owner]
        for queue in self._queues.values():
            queue[:] = [t for t in queue if t.owner != owner]
        return gone

    def withdraw(self, owner: Hashable, request_id: Hashable) -> Ticket | None:
        """Take back one queued ticket; None if it is not queued."""
        for queue in self._queues.values():
            for i, t in enumerate(queue):
                if t.owner == owner and t.request.request_id == request_id:
                    return queue.pop(i)
        return None

    def promote(self, owner: Hashable, request_id: Hashable, priority: Priority) -> Ticket | None:
        """Move a queued ticket of a less urgent class to ``priority``, keeping its submit
        time and its place by age; returns the moved ticket (None: there is no such one)."""
        found = [
            t
            for p, queue in self._queues.items()
            if p > priority
            for t in queue
            if t.owner == owner and t.request.request_id == request_id
        ]
        if not found:
            return None
        ticket = found[0]
        self._queues[ticket.priority].remove(ticket)
        moved = dataclasses.replace(ticket, priority=priority)
        queue = self._queues[priority]
        queue.append(moved)
        queue.sort(key=lambda t: t.seq)
        return moved
