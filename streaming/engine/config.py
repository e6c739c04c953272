"""The engine's settings, checked when made."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kettle.streaming.engine.degrade import DegradeConfig
from kettle.streaming.engine.scheduling.scheduler import SchedulerConfig
from kettle.streaming.engine.worker import RetryPolicy
from kettle.transcribe.errors import ConfigError


@dataclass(frozen=True)
class EngineConfig:
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    # Events a stream may hold unread before it reports overflow. Stale partials are replaced
    # by newer ones; finals, errors and done are never dropped (backlog.py, as the outbox).
    event_queue_size: int = 256
    # Bounded shutdown: close() waits this long for open streams' finals.
    close_timeout_s: float = 30.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    # A folder where measured costs are kept per model, device, compute type, threads and
    # machine (transcribe/model/cost_cache.py), so a restart need not measure again; None: measure
    # at every start. ``remeasure_costs``: measure anyway and replace what is kept.
    cost_cache: Path | None = None
    remeasure_costs: bool = False
    # Partial cadence from the measured decode cost: each stream's partial interval is at
    # least what keeps the model's busy fraction from partials at busy_target. False: the
    # sessions' configured interval only (the cadence before scheduler v2).
    adaptive_cadence: bool = True
    busy_target: float = 0.6
    # The cost-based interval never exceeds this: past it partials stop being useful, and
    # when the model still cannot keep up the degradation steps take over.
    max_cadence_s: float = 1.5
    degrade: DegradeConfig = field(default_factory=DegradeConfig)
    # Seconds between returns of glibc's free heap to the OS after work: while idle, or
    # between batches when the model was busy the whole time (native_memory.py); None:
    # never (glibc's own policy; no-op off glibc anyway).
    release_memory_s: float | None = None

    def __post_init__(self) -> None:
        if not 8 <= self.event_queue_size <= 1_000_000:
            raise ConfigError(
                f"event_queue_size must be within 8..1e6, not {self.event_queue_size}"
            )
        if not 0.0 <= self.close_timeout_s <= 3600:
            raise ConfigError(f"close_timeout_s must be within 0..3600, not {self.close_timeout_s}")
        if not 0.1 <= self.max_cadence_s <= 10.0:
            raise ConfigError(f"max_cadence_s must be within 0.1..10, not {self.max_cadence_s}")
        if not 0.05 <= self.busy_target <= 1.0:
            raise ConfigError(f"busy_target must be within 0.05..1, not {self.busy_target}")
        if self.release_memory_s is not None and not self.release_memory_s > 0:
            raise ConfigError(f"release_memory_s must be positive, not {self.release_memory_s}")
