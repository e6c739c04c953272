"""The scheduler's settings: batch sizes, batching budgets and when a partial is stale."""

from __future__ import annotations

from dataclasses import dataclass

from kettle.transcribe.errors import ConfigError


@dataclass(frozen=True)
class SchedulerConfig:
    max_batch_size: int = 8
    partial_budget_s: float = 0.05
    final_budget_s: float = 0.0
    partial_max_wait_s: float = 0.75
    max_final_batch_size: int | None = None  # None: max_batch_size
    # Without a measured cost profile (a test fake): cap on a batch's predicted decode time
    # (seconds per request, measured, times size). With one, batch sizes come from the cost
    # model (cost_model.py): small where batching buys little (a CPU), full on a GPU.
    max_batch_s: float | None = 0.75
    # A refinement that has waited this long is dropped (the stream counts it skipped): the
    # model has had no idle moment for it, and a revision is worth most soon after its final.
    refine_max_wait_s: float = 5.0
    # A refinement queued this long goes while live streams speak (not while one pauses:
    # its final is near), one at a time: a stream that talks without long gaps, or several
    # streams that take turns, leave no idle moment, and would never get their revisions.
    refine_urgent_s: float = 2.0
    # A live speculative final still queued this long after it was asked for (its pause has
    # lasted hush_ms plus this, so its utterance likely ended) goes before partials: else, on
    # a busy model, it waits for idle capacity that never comes and the final is decoded only
    # once the endpoint is due.
    speculative_urgent_s: float = 0.2

    def __post_init__(self) -> None:
        if not 1 <= self.max_batch_size <= 256:
            raise ConfigError(f"max_batch_size must be within 1..256, not {self.max_batch_size}")
        if self.max_final_batch_size is not None and not 1 <= self.max_final_batch_size <= 256:
            raise ConfigError("max_final_batch_size must be within 1..256")
        for name in ("partial_budget_s", "final_budget_s"):
            value = getattr(self, name)
            if not 0.0 <= value <= 10.0:
                raise ConfigError(f"{name} must be within 0..10 s, not {value}")
        if self.max_batch_s is not None and not 0.01 <= self.max_batch_s <= 600:
            raise ConfigError("max_batch_s must be within 0.01..600 s (or None)")
        if not 0.1 <= self.refine_max_wait_s <= 600:
            raise ConfigError(
                f"refine_max_wait_s must be within 0.1..600, not {self.refine_max_wait_s}"
            )
        if not 0.0 <= self.refine_urgent_s <= 600:
            raise ConfigError(f"refine_urgent_s must be within 0..600, not {self.refine_urgent_s}")
        if not 0.0 <= self.speculative_urgent_s <= 10.0:
            raise ConfigError(
                f"speculative_urgent_s must be within 0..10 s, not {self.speculative_urgent_s}"
            )
        if not self.partial_max_wait_s > self.partial_budget_s:
            raise ConfigError("partial_max_wait_s must exceed partial_budget_s")

    @property
    def final_batch_size(self) -> int:
        return self.max_final_batch_size or self.max_batch_size
