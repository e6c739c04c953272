"""Batch sizing: how many requests the next batch of a kind may take."""

from __future__ import annotations

from collections.abc import Sequence

from kettle.streaming.engine.scheduling.config import SchedulerConfig
from kettle.streaming.engine.scheduling.cost_model import CostModel
from kettle.transcribe.types import DecodeKind, DecodeRequest


class BatchSizer:
    """The cost model's best size where costs were measured; else the configured size,
    capped by ``max_batch_s`` over the measured decode time per request."""

    def __init__(self, config: SchedulerConfig, costs: CostModel) -> None:
        self.config = config
        self.costs = costs
        self._per_request_s: dict[DecodeKind, float] = {}  # EMA of decode s per request

    def observe(self, kind: DecodeKind, size: int, seconds: float) -> None:
        """Record how long a batch of ``size`` requests took (feeds the max_batch_s cap)."""
        if size <= 0 or seconds < 0:
            return
        per = seconds / size
        old = self._per_request_s.get(kind)
        self._per_request_s[kind] = per if old is None else 0.7 * old + 0.3 * per

    def limit(self, kind: DecodeKind, queue: Sequence[DecodeRequest] = ()) -> int:
        """How many of ``queue`` (in serving order) the next batch of this kind takes at most."""
        cfg = self.config
        size = cfg.final_batch_size if kind is DecodeKind.FINAL else cfg.max_batch_size
        best = self.costs.best_batch(list(queue), size) if queue else None
        if best is not None:
            return max(1, best)
        per = self._per_request_s.get(kind)
        if cfg.max_batch_s is not None and per:
            size = min(size, max(1, int(cfg.max_batch_s / per)))
        return size
