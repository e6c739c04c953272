"""The engine's time source: the monotonic clock in production, a manual one in tests.

Every timer of the engine goes through a ``Clock``: ``now()`` for timestamps and
``wait(event, deadline)`` for "sleep until this event is set or the clock reaches the
deadline". A test drives a ``ManualClock`` with ``advance()`` and so asserts on timing without
any wall-clock sleep.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float: ...

    async def wait(self, event: asyncio.Event, deadline: float | None) -> bool:
        """Until ``event`` is set (True) or ``now() >= deadline`` (False); None: no deadline."""
        ...


class MonotonicClock:
    """``time.monotonic`` and asyncio's own timers."""

    def now(self) -> float:
        return time.monotonic()

    async def wait(self, event: asyncio.Event, deadline: float | None) -> bool:
        if event.is_set():
            return True
        timeout = None if deadline is None else max(0.0, deadline - self.now())
        # asyncio.TimeoutError, not the builtin: on 3.10 wait_for raises only the former.
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)
        return event.is_set()


class ManualClock:
    """A clock that moves only when told to (tests). ``advance`` wakes the waiters it passes."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._waiters: list[tuple[float, int, asyncio.Event]] = []
        self._ids = itertools.count()

    def now(self) -> float:
        return self._now

    async def wait(self, event: asyncio.Event, deadline: float | None) -> bool:
        if event.is_set():
            return True
        if deadline is not None and deadline <= self._now:
            await asyncio.sleep(0)  # a loop that waits for nothing still lets others run
            return event.is_set()
        alarm = asyncio.Event()
        if deadline is not None:
            heapq.heappush(self._waiters, (deadline, next(self._ids), alarm))
        either = [asyncio.ensure_future(event.wait()), asyncio.ensure_future(alarm.wait())]
        try:
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for fut in either:
                fut.cancel()
        return event.is_set()

    @property
    def next_deadline(self) -> float | None:
        """The earliest deadline someone waits for (a test may advance exactly to it)."""
        return self._waiters[0][0] if self._waiters else None

    async def advance(self, seconds: float) -> None:
        """Move time forward and let the woken tasks run."""
        if seconds < 0:
            raise ValueError("a clock does not go back")
        self._now += seconds
        while self._waiters and self._waiters[0][0] <= self._now:
            heapq.heappop(self._waiters)[2].set()
        for _ in range(5):  # a few loop turns so woken tasks reach their next await
            await asyncio.sleep(0)
