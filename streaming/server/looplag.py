"""Event-loop lag: how late the loop wakes a task that asked to sleep. A stalled loop (a long
callback, CPU-bound work on the loop, a GIL held elsewhere) delays every stream's reads and
writes by as much, so this is the server's responsiveness in one number.

`LoopLagMonitor` sleeps `interval_s` over and over and reports each wake-up's delay beyond
what it asked for. Its clock and sleep are injected, so tests drive it without wall time.
`LagWindow` keeps the most recent samples for quantiles (bounded).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable

DEFAULT_INTERVAL_S = 0.05


class LagWindow:
    """The last `size` lag samples, for quantiles; bounded memory however long it runs."""

    def __init__(self, size: int = 10_000) -> None:
        self._samples: deque[float] = deque(maxlen=size)
        self.count = 0
        self.worst = 0.0

    def add(self, lag_s: float) -> None:
        self._samples.append(lag_s)
        self.count += 1
        self.worst = max(self.worst, lag_s)

    def samples(self) -> list[float]:
        """The window's samples, oldest first."""
        return list(self._samples)

    def quantile(self, q: float) -> float:
        """The nearest-rank q-quantile of the window (0 when empty)."""
        if not 0 <= q <= 1:
            raise ValueError("q must be within [0, 1]")
        if not self._samples:
            return 0.0
        ordered = sorted(self._samples)
        rank = max(1, math.ceil(q * len(ordered)))
        return ordered[rank - 1]

    def __len__(self) -> int:
        return len(self._samples)


class LoopLagMonitor:
    """Reports each wake-up's lateness to `observe` until cancelled."""

    def __init__(
        self,
        observe: Callable[[float], None],
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        if not interval_s > 0:
            raise ValueError("interval_s must be positive")
        self.observe = observe
        self.interval_s = interval_s
        self._clock = clock
        self._sleep = sleep
        self._task: asyncio.Task[None] | None = None

    async def run(self) -> None:
        while True:
            asked = self._clock()
            await self._sleep(self.interval_s)
            self.observe(max(0.0, self._clock() - asked - self.interval_s))

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self.run(), name="kettle-loop-lag")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
