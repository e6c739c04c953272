"""Where the model's time goes in a scheduler scenario: every model call, every batch's waits.

``Recorder`` wraps the decoder (it records each ``decode_batch`` call: when, how long, what
kind of requests) and is the engine's observer (each batch's queue waits, degradation steps).
``breakdown`` sums a window of it by class: finals, their fallback rounds, speculative finals,
partials, and the idle rest; queue wait and decode time of finals, P50/P95.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from kettle.streaming.engine.report import BatchReport


@dataclass(frozen=True)
class Call:
    start: float  # time.monotonic()
    end: float
    classes: tuple[str, ...]  # one per request: final, fallback, speculative, partial
    requests: tuple[Any, ...] = ()  # the DecodeRequests themselves (to replay them)


@dataclass
class Recorder:
    inner: Any
    calls: list[Call] = field(default_factory=list)
    final_waits: list[float] = field(default_factory=list)
    final_decodes: list[float] = field(default_factory=list)
    levels: list[tuple[float, str]] = field(default_factory=list)
    started: float = 0.0  # monotonic time the recorded run started (its streams' zero)

    # -- the decoder side (runs on the inference thread) ----------------------------------
    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def decode_batch(self, requests: Sequence[Any]) -> Any:
        t0 = time.monotonic()
        try:
            return self.inner.decode_batch(requests)
        finally:
            classes = tuple(_class(r) for r in requests)
            self.calls.append(Call(t0, time.monotonic(), classes, tuple(requests)))

    # -- the observer side ----------------------------------------------------------------
    def on_batch(self, report: BatchReport) -> None:
        if report.finals:
            self.final_waits += list(report.queue_waits_s)
            self.final_decodes += [report.decode_s] * report.size

    def on_batch_failed(self, size: int, error: str) -> None:
        pass

    def on_degradation(self, level: str) -> None:
        self.levels.append((time.monotonic(), level))

    def reset(self) -> None:
        self.calls.clear()
        self.final_waits.clear()
        self.final_decodes.clear()
        self.levels.clear()

    def calls_within(self, start: float, end: float) -> list[Call]:
        """The model calls that ran (at least partly) within [start, end]."""
        return [c for c in self.calls if c.end > start and c.start < end]


def _class(request: Any) -> str:
    if request.kind.name == "PARTIAL":
        return "partial"
    if request.speculative:
        return "speculative"
    return "fallback" if (request.fallback_round or 0) > 0 else "final"


def breakdown(rec: Recorder, start: float, end: float) -> dict[str, Any]:
    """Model seconds by class within [start, end] (monotonic times), idle, batch sizes,
    and the finals' queue wait and decode time over the whole run."""
    busy: dict[str, float] = dict.fromkeys(_CLASSES, 0.0)
    sizes: Counter[str] = Counter()
    for call in rec.calls:
        overlap = min(call.end, end) - max(call.start, start)
        if overlap <= 0:
            continue
        kind = Counter(call.classes).most_common(1)[0][0]
        busy[kind] += overlap
        sizes[f"{kind}x{len(call.classes)}"] += 1
    window = max(0.0, end - start)
    out: dict[str, Any] = {f"{k}_s": round(v, 3) for k, v in busy.items()}
    out["idle_s"] = round(max(0.0, window - sum(busy.values())), 3)
    out["batches"] = dict(sorted(sizes.items()))
    out["final_wait_p50_p95"] = _p50_p95(rec.final_waits)
    out["final_decode_p50_p95"] = _p50_p95(rec.final_decodes)
    out["levels"] = sorted({level for _, level in rec.levels})
    return out


_CLASSES = ("final", "fallback", "speculative", "partial")


def _p50_p95(values: list[float]) -> list[float] | None:
    if not values:
        return None
    return [round(float(np.percentile(values, q)), 3) for q in (50, 95)]
