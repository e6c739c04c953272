"""A batch split across the model's CPU replicas, decoded at once.

The file pipeline loads the model as one single-threaded replica per core (CTranslate2's
``inter_threads``, which share one copy of the weights), not as one replica on every core: a
decode steps token by token through small matrices, and each step's parallel regions can
cost more to synchronise than they save (on a 2-core Xeon, a 12 s window's 31 tokens at beam
5 took 145 ms on one thread, 535 ms on two). The cores are used by giving each replica a
part of the batch: concurrent calls from several Python threads run on different replicas
(CTranslate2 releases the GIL), and every row is decoded on its own window as it would be
in any batch. The live server keeps one replica: with two it served 4 real-time streams
where one served 8, with about one core busy (benchmarks/RESULTS.md, rejected experiments).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def split(items: Sequence[T], parts: int) -> list[Sequence[T]]:
    """``items`` in at most ``parts`` contiguous, non-empty runs whose sizes differ by one at
    most (the longer ones first)."""
    n = min(parts, len(items))
    if n <= 1:
        return [items] if items else []
    size, extra = divmod(len(items), n)
    out, start = [], 0
    for k in range(n):
        end = start + size + (1 if k < extra else 0)
        out.append(items[start:end])
        start = end
    return out


class Replicas:
    """Runs a batch function over parts of a batch on ``count`` replicas at once."""

    def __init__(self, count: int) -> None:
        if count < 1:
            raise ValueError(f"replicas must be at least 1, not {count}")
        self.count = count
        # The calling thread runs the first part; the pool's threads the others.
        self._pool = None
        if count > 1:
            self._pool = ThreadPoolExecutor(count - 1, thread_name_prefix="kettle-replica")

    def map(self, fn: Callable[[Sequence[T]], list[R]], items: Sequence[T]) -> list[R]:
        """``fn(items)``, computed as ``fn`` of each part of ``items`` concurrently."""
        parts = split(items, self.count)
        if self._pool is None or len(parts) <= 1:
            return fn(items)
        futures = [self._pool.submit(fn, part) for part in parts[1:]]
        try:
            out = list(fn(parts[0]))
        finally:
            wait(futures)  # no part outlives the call, even when one fails
        for future in futures:
            out.extend(future.result())
        return out

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False)
