"""The one bounded-queue policy for messages waiting for a slow reader.

Used by the engine's streams (events waiting for their reader) and by the server's outbox
(encoded messages waiting for the socket), so both drop the same things:

- a partial replaces every partial still waiting for the same or an earlier utterance (they
  are stale: the reader would overwrite them at once), and a final drops waiting partials of
  its utterance; so at most a partial or two wait, however slow the reader;
- finals, errors and `done` are never dropped; they are few (one per utterance), but a reader
  that takes nothing at all would let them grow, so past `limit` items the backlog reports
  ``overflowed`` and its owner decides (the server ends that session).
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

PARTIAL = "partial"
FINAL = "final"
REVISION = "revision"  # kept like OTHER; the server measures its delay
OTHER = "other"

T = TypeVar("T")


class Backlog(Generic[T]):
    """A FIFO of items with the policy above. ``classify(item)`` gives (kind, utterance)."""

    def __init__(self, limit: int, classify: Callable[[T], tuple[str, int]]) -> None:
        if limit < 1:
            raise ValueError("a backlog limit must be at least 1")
        self.limit = limit
        self._classify = classify
        self._items: collections.deque[T] = collections.deque()
        self._partials = 0  # partials waiting (to skip the scan when there are none)
        self.dropped_partials = 0
        self.overflowed = False

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[T]:
        return iter(self._items)

    def put(self, item: T) -> bool:
        """Queue an item, dropping what it makes stale; False once past the limit."""
        kind, utterance = self._classify(item)
        if kind == PARTIAL:
            self._drop_partials(lambda u: u <= utterance)
        elif kind == FINAL:
            self._drop_partials(lambda u: u == utterance)
        self._items.append(item)
        self._partials += kind == PARTIAL
        if len(self._items) > self.limit:
            self.overflowed = True
        return not self.overflowed

    def popleft(self) -> T | None:
        if not self._items:
            return None
        item = self._items.popleft()
        self._partials -= self._classify(item)[0] == PARTIAL
        return item

    def clear(self) -> None:
        self._items.clear()
        self._partials = 0

    def _drop_partials(self, stale: Callable[[int], bool]) -> None:
        if not self._partials:
            return
        kept: collections.deque[T] = collections.deque()
        for item in self._items:
            kind, utterance = self._classify(item)
            if kind == PARTIAL and stale(utterance):
                self.dropped_partials += 1
                self._partials -= 1
            else:
                kept.append(item)
        self._items = kept
