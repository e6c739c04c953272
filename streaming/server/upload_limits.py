"""The rules an upload's body is read under, apart from any I/O: how fast it must come
(`BodyPace`) and how many body bytes all uploads together may hold (`ByteBudget`).

A body is cut (408) when it is not all in within ``deadline_s`` of its start, or when, after
the first ``grace_s``, it has come at less than ``min_rate`` bytes a second on average since
its start. The average, not the latest gap, is what is judged: a client may pause for as long
as what it sent before covers, so a link that stalls for a moment is not cut, and one that
dribbles a few bytes now and then is. A stall is the slow case's extreme: nothing arrives, and
the average falls until it crosses the minimum.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class BodyPace:
    """How fast a body must arrive (see the module's docstring); ``min_rate`` 0: any rate."""

    deadline_s: float = 1800.0
    grace_s: float = 10.0
    min_rate: float = 16384.0  # bytes/s

    def __post_init__(self) -> None:
        if not (self.deadline_s > 0 and math.isfinite(self.deadline_s)):
            raise ValueError("the body's deadline must be a positive number of seconds")
        if not (self.grace_s >= 0 and math.isfinite(self.grace_s)):
            raise ValueError("the body's grace period must not be negative")
        if not (self.min_rate >= 0 and math.isfinite(self.min_rate)):
            raise ValueError("the body's minimum rate must not be negative")

    def cutoff(self, received: int) -> tuple[float, str]:
        """When a body that has ``received`` bytes is cut if no more come (seconds after its
        start), and why then: "slow" or "deadline"."""
        if self.min_rate > 0:
            # received / t >= min_rate holds until t = received / min_rate.
            slow = max(self.grace_s, received / self.min_rate)
            if slow < self.deadline_s:
                return slow, "slow"
        return self.deadline_s, "deadline"


class ByteBudget:
    """Bytes of upload bodies held at once, all uploads together: taken as they arrive (a
    slow body holds only what it has sent) and given back when its upload ends. Nothing
    waits for room, so bodies cannot hold each other up: a chunk that does not fit is
    refused."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("the upload byte budget must be at least 1")
        self.limit = limit
        self._held = 0

    @property
    def held(self) -> int:
        return self._held

    @property
    def room(self) -> int:
        return self.limit - self._held

    @contextlib.contextmanager
    def share(self) -> Iterator[BudgetShare]:
        """One upload's part of the budget, given back whole when the block ends."""
        share = BudgetShare(self)
        try:
            yield share
        finally:
            self._held -= share.taken
            share.taken = 0


class BudgetShare:
    """What one upload holds of a `ByteBudget`."""

    def __init__(self, budget: ByteBudget) -> None:
        self._budget = budget
        self.taken = 0

    @property
    def room(self) -> int:
        return self._budget.room

    def take(self, count: int) -> bool:
        """Hold ``count`` more bytes, if the budget has room for them (else nothing)."""
        if count > self._budget.room:
            return False
        self._budget._held += count
        self.taken += count
        return True


__all__ = ["BodyPace", "BudgetShare", "ByteBudget"]
