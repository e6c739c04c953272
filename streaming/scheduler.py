"""Decode-request queue shared by all streams: which requests form the next batch, and when.

Pure policy, every call given ``now`` (seconds on any monotonic clock):

- finals first: when finals are due they form the batch, oldest first; partials never delay
  them and a final is never dropped;
- a batch goes out when it is full or its oldest request has waited its budget
  (``final_budget_s`` / ``partial_budget_s``), so a lone request still goes promptly while
  simultaneous ones share one model call;
- a newer partial of an owner (a stream) replaces its queued one (reported as dropped with
  reason ``"replaced"``);
- overload thinning: a partial that has waited ``partial_max_wait_s`` is stale before it could
  be served and is dropped (reason ``"overload"``); the owner is told and stretches its partial
  interval, so under load each stream asks less often instead of everyone waiting longer.

Batches hold one kind only (all finals or all partials): finals use beam search and possibly a
different model, partials are greedy.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable
from dataclasses import dataclass

from kettle.transcribe.errors import ConfigError
from kettle.transcribe.types import SAMPLE_RATE, DecodeKind, DecodeRequest

OVERLOAD_WINDOW_S = 5.0


@dataclass(frozen=True)
class SchedulerConfig:
    max_batch_size: int = 8
    partial_budget_s: float = 0.05
    final_budget_s: float = 0.0
    partial_max_wait_s: float = 0.75
    max_final_batch_size: int | None = None  # None: max_batch_size
    # Cap on the padded audio of one batch (size x longest window, seconds; one request always
    # goes): on a CPU the encoder's cost grows with it, so one huge batch delays all of it.
    max_batch_audio_s: float | None = 30.0
    # Cap on a batch's predicted decode time (seconds per request, measured, times size):
    # where batching buys little (a CPU) batches stay small so no request waits behind a
    # long one; where it is cheap per request (a GPU) they fill up to max_batch_size.
    max_batch_s: float | None = 0.75

    def __post_init__(self) -> None:
        if not 1 <= self.max_batch_size <= 256:
            raise ConfigError(f"max_batch_size must be within 1..256, not {self.max_batch_size}")
        if self.max_final_batch_size is not None and not 1 <= self.max_final_batch_size <= 256:
            raise ConfigError("max_final_batch_size must be within 1..256")
        for name in ("partial_budget_s", "final_budget_s"):
            value = getattr(self, name)
            if not 0.0 <= value <= 10.0:
                raise ConfigError(f"{name} must be within 0..10 s, not {value}")
        if self.max_batch_audio_s is not None and not 1.0 <= self.max_batch_audio_s <= 3600:
            raise ConfigError("max_batch_audio_s must be within 1..3600 s (or None)")
        if self.max_batch_s is not None and not 0.01 <= self.max_batch_s <= 600:
            raise ConfigError("max_batch_s must be within 0.01..600 s (or None)")
        if not self.partial_max_wait_s > self.partial_budget_s:
            raise ConfigError("partial_max_wait_s must exceed partial_budget_s")

    @property
    def final_batch_size(self) -> int:
        return self.max_final_batch_size or self.max_batch_size


@dataclass(frozen=True)
class Ticket:
    request: DecodeRequest
    owner: Hashable
    submitted: float
    seq: int

    @property
    def kind(self) -> DecodeKind:
        return self.request.kind


@dataclass(frozen=True)
class Dropped:
    ticket: Ticket
    reason: str  # "replaced" or "overload"


class Scheduler:
    def __init__(self, config: SchedulerConfig | None = None) -> None:
        self.config = config or SchedulerConfig()
        self._finals: list[Ticket] = []
        self._partials: list[Ticket] = []
        self._dropped: list[Dropped] = []
        self._seq = itertools.count()
        self._last_overload: float | None = None
        self._per_request_s: dict[DecodeKind, float] = {}  # EMA of decode s per request
        self.skipped_total = 0

    # --- queries -------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._finals) + len(self._partials)

    @property
    def queued_finals(self) -> int:
        return len(self._finals)

    @property
    def queued_partials(self) -> int:
        return len(self._partials)

    def overloaded(self, now: float) -> bool:
        """True while partials have been skipped within the last few seconds."""
        return self._last_overload is not None and now - self._last_overload < OVERLOAD_WINDOW_S

    def observe(self, kind: DecodeKind, size: int, seconds: float) -> None:
        """Record how long a batch of ``size`` requests took (feeds the max_batch_s cap)."""
        if size <= 0 or seconds < 0:
            return
        per = seconds / size
        old = self._per_request_s.get(kind)
        self._per_request_s[kind] = per if old is None else 0.7 * old + 0.3 * per

    def batch_limit(self, kind: DecodeKind) -> int:
        cfg = self.config
        size = cfg.final_batch_size if kind is DecodeKind.FINAL else cfg.max_batch_size
        per = self._per_request_s.get(kind)
        if cfg.max_batch_s is not None and per:
            size = min(size, max(1, int(cfg.max_batch_s / per)))
        return size

    def take_dropped(self) -> list[Dropped]:
        out, self._dropped = self._dropped, []
        return out

    # --- input ---------------------------------------------------------------------------
    def submit(self, request: DecodeRequest, now: float, owner: Hashable | None = None) -> None:
        """Queue a request. ``owner`` (a stream) scopes replacement; default: no replacement."""
        ticket = Ticket(request, owner, now, next(self._seq))
        if request.kind is DecodeKind.FINAL:
            self._finals.append(ticket)
            return
        if owner is not None:
            for i, old in enumerate(self._partials):
                if old.owner == owner:
                    self._dropped.append(Dropped(old, "replaced"))
                    del self._partials[i]
                    break
        self._partials.append(ticket)

    def cancel(self, owner: Hashable) -> list[Ticket]:
        """Remove every queued request of an owner (it went away); returns them."""
        gone = [t for t in self._finals + self._partials if t.owner == owner]
        self._finals = [t for t in self._finals if t.owner != owner]
        self._partials = [t for t in self._partials if t.owner != owner]
        return gone

    # --- policy --------------------------------------------------------------------------
    def next_batch(self, now: float, *, sources: int | None = None) -> list[Ticket] | None:
        """The batch to run now, or None if nothing is due yet (see next_deadline).

        ``sources``: how many owners could submit at all (the open streams, each with at
        most one request pending). When all of them are queued already, waiting longer
        cannot grow the batch, so it goes at once.
        """
        self._expire(now)
        cfg = self.config
        if sources is not None and len(self) >= sources:
            now = math.inf  # every budget has elapsed
        final_size = self.batch_limit(DecodeKind.FINAL)
        partial_size = self.batch_limit(DecodeKind.PARTIAL)
        if self._finals and (
            len(self._finals) >= final_size or now - self._finals[0].submitted >= cfg.final_budget_s
        ):
            return self._take(self._finals, final_size)
        if self._partials and (
            len(self._partials) >= partial_size
            or now - self._partials[0].submitted >= cfg.partial_budget_s
        ):
            return self._take(self._partials, partial_size)
        return None

    def _take(self, queue: list[Ticket], size: int) -> list[Ticket]:
        """Pop the oldest requests of a queue, up to size and the audio cap."""
        cap = self.config.max_batch_audio_s
        limit = math.inf if cap is None else cap * SAMPLE_RATE
        n, longest = 0, 0
        for ticket in queue[:size]:
            # The batch is padded to its longest window: that is what the encoder pays for.
            longest = max(longest, len(ticket.request.audio))
            if n and (n + 1) * longest > limit:
                break
            n += 1
        batch = queue[:n]
        del queue[:n]
        return batch

    def next_deadline(self, now: float) -> float | None:
        """When next_batch will have something to do without new submissions (or None)."""
        times = []
        if self._finals:
            times.append(self._finals[0].submitted + self.config.final_budget_s)
        if self._partials:
            times.append(self._partials[0].submitted + self.config.partial_budget_s)
        return min(times) if times else None

    def _expire(self, now: float) -> None:
        limit = self.config.partial_max_wait_s
        keep = []
        for t in self._partials:
            if now - t.submitted >= limit:
                self._dropped.append(Dropped(t, "overload"))
                self._last_overload = now
                self.skipped_total += 1
            else:
                keep.append(t)
        self._partials = keep
