"""What the engine tells its observers after each batch, and its own bounded counters."""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchReport:
    """One decoded batch, as observers see it."""

    size: int  # requests in the batch
    finals: int  # of them finals (the whole batch, or none)
    queue_waits_s: tuple[float, ...]  # each request's wait in the queue, in batch order
    decode_s: float  # the model's time for the batch
    cache_hits: int  # requests whose encoder output came from the adapter's cache


class EngineObserver(Protocol):
    """Hooks for metrics; called on the event loop's thread."""

    def on_batch(self, report: BatchReport) -> None: ...

    def on_batch_failed(self, size: int, error: str) -> None: ...

    # Optional: ``on_degradation(level: str)`` when the degradation level changes (one of
    # degrade.Level's labels); observers without it are not told.


@dataclass
class BatchStats:
    """The engine's own counters (an observer): bounded, however long the engine runs."""

    batches: int = 0
    requests: int = 0
    failed_batches: int = 0
    decode_s: float = 0.0
    sizes: Counter[int] = field(default_factory=Counter)  # batch size -> batches

    def on_batch(self, report: BatchReport) -> None:
        self.batches += 1
        self.requests += report.size
        self.decode_s += report.decode_s
        self.sizes[report.size] += 1

    def on_batch_failed(self, size: int, error: str) -> None:
        self.failed_batches += 1

    def copy(self) -> BatchStats:
        return dataclasses.replace(self, sizes=Counter(self.sizes))

    def since(self, earlier: BatchStats) -> BatchStats:
        """What happened after ``earlier`` (a copy taken before)."""
        return BatchStats(
            self.batches - earlier.batches,
            self.requests - earlier.requests,
            self.failed_batches - earlier.failed_batches,
            self.decode_s - earlier.decode_s,
            self.sizes - earlier.sizes,
        )


def notify(
    observers: Iterable[EngineObserver | None], call: Callable[[EngineObserver], None]
) -> None:
    """Call each observer; one that raises is logged and the others still hear."""
    for observer in observers:
        if observer is None:
            continue
        try:
            call(observer)
        except Exception:  # a metrics hook must not take the engine down
            logger.exception("engine observer failed")


def notify_degradation(observer: EngineObserver | None, level: str) -> None:
    """Tell an observer that has ``on_degradation`` the new level's label."""
    hook = getattr(observer, "on_degradation", None)
    if hook is not None:
        try:
            hook(level)
        except Exception:  # a metrics hook must not take the engine down
            logger.exception("engine observer failed")
