"""SLO-aware degradation: under pressure the engine gives up quality in a fixed order.

Levels (``Level``), each a step further:

1. ``partials_stretched``: every stream's partial interval is doubled, and partials that
   asked for a beam decode greedy;
2. ``partials_paused``: no partials at all (finals only);
3. ``finals_greedy``: finals decode greedy instead of beam search.

Pressure is read from what requests experienced: a batch whose oldest request waited (plus
the batch's own decode time) past its share of the latency target (``partial_target_s`` for
partials, ``final_target_s`` for finals), having spent at least half of that share queued
(degrading cannot shorten a decode, only the queue), is pressure; ``streak`` such batches in a
row step the level up, as does a final still queued past its share (the engine checks). The
controller steps up at most once per ``step_s`` while pressure lasts, and steps down one level
after ``calm_s`` without any, so full quality returns when the load falls. Pure: every call is
given ``now``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from kettle.transcribe.errors import ConfigError
from kettle.transcribe.types import DecodeKind


class Level(enum.IntEnum):
    FULL = 0
    PARTIALS_STRETCHED = 1
    PARTIALS_PAUSED = 2
    FINALS_GREEDY = 3

    @property
    def label(self) -> str:
        return self.name.lower()

    @property
    def notice(self) -> str:
        return _NOTICES[self]


_NOTICES = {
    Level.FULL: "full quality again",
    Level.PARTIALS_STRETCHED: "the server is busy: partials come less often for now",
    Level.PARTIALS_PAUSED: "the server is busy: partials are paused for now; finals follow",
    Level.FINALS_GREEDY: "the server is busy: finals use a faster, less exact decode for now",
}

STRETCH = 2.0  # the partial interval's factor at PARTIALS_STRETCHED


@dataclass(frozen=True)
class DegradeConfig:
    enabled: bool = True
    partial_target_s: float = 1.0  # partial lag P95 to keep
    final_target_s: float = 1.5  # final lag P95 to keep
    # A request's wait plus decode beyond this share of its target is pressure: the rest of
    # the target is the audio chunking and the socket.
    share: float = 0.8
    step_s: float = 2.0
    calm_s: float = 5.0
    streak: int = 2  # pressured batches in a row that count as pressure
    max_level: Level = Level.FINALS_GREEDY

    def __post_init__(self) -> None:
        if not 0.05 <= self.partial_target_s <= 60 or not 0.05 <= self.final_target_s <= 60:
            raise ConfigError("latency targets must be within 0.05..60 s")
        if not 0.1 <= self.share <= 1.0:
            raise ConfigError("share must be within 0.1..1")
        if not 1 <= self.streak <= 100:
            raise ConfigError("streak must be within 1..100")
        if not 0.0 <= self.step_s <= 600 or not 0.0 <= self.calm_s <= 3600:
            raise ConfigError("step_s and calm_s must be within 0..600 / 0..3600 s")


class Degrader:
    def __init__(self, config: DegradeConfig | None = None) -> None:
        self.config = config or DegradeConfig()
        self.level = Level.FULL
        self._changed_at: float | None = None
        self._last_pressure: float | None = None
        self._streak = 0

    def observe(self, now: float, kind: DecodeKind, oldest_wait_s: float, decode_s: float) -> bool:
        """A live batch finished; True if the level changed."""
        cfg = self.config
        budget = cfg.share * (
            cfg.final_target_s if kind is DecodeKind.FINAL else cfg.partial_target_s
        )
        if oldest_wait_s + decode_s > budget and oldest_wait_s >= budget / 2:
            self._streak += 1
            if self._streak >= cfg.streak:
                return self.pressure(now)
            return False
        self._streak = 0
        return self.tick(now)

    def pressure(self, now: float) -> bool:
        """Something waited too long (e.g. a final still queued past its target)."""
        cfg = self.config
        self._last_pressure = now
        if not cfg.enabled or self.level >= cfg.max_level:
            return False
        if self._changed_at is not None and now - self._changed_at < cfg.step_s:
            return False
        self.level = Level(self.level + 1)
        self._changed_at = now
        return True

    def tick(self, now: float) -> bool:
        """Time passes without pressure; True if the level stepped down."""
        if self.level is Level.FULL:
            return False
        since = max(t for t in (self._last_pressure, self._changed_at) if t is not None)
        if now - since < self.config.calm_s:
            return False
        self.level = Level(self.level - 1)
        self._changed_at = now
        return True
