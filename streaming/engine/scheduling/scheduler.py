"""Decode-request queue shared by all streams: which requests form the next batch, and when.

Pure policy, every call given ``now`` (seconds on any monotonic clock). Four priority classes,
highest first (``Priority``):

- finals: when finals are due they form the batch; partials never delay them and a final is
  never dropped;
- partials;
- speculative finals (a final decoded during a pause, discarded if speech resumes) use only
  idle capacity (they go when no final or partial is queued at all) until they have waited
  ``speculative_urgent_s``: a pause that long has likely ended its utterance, and they go
  before partials (on a busy model idle capacity never comes, and the final would be decoded
  only once the endpoint is due);
- refinements (a second decode of an earlier final with the audio after it, which may
  revise it) and offline work (files and uploads) go only when nothing live is queued, so a
  long upload never delays a live final by more than the one batch already running. The two
  share that idle time in fair order across owners. Refinements also wait while a live
  stream is pausing (its final may come due while one runs, and a decode cannot be
  preempted) or partials were skipped lately. While live streams speak, a refinement goes
  (one at a time) when its predicted cost fits before any of their finals can be due
  (``final_headroom_s``: the endpoint's silence still to come), or once it has waited
  ``refine_urgent_s``, so a stream that talks without long gaps still gets its revisions;
  one that has waited ``refine_max_wait_s`` is dropped (reason ``"stale"``, counted in
  ``refinements_skipped``): a late revision is worth less than a prompt final.

Streams ahead of real time (``pace.py``: a client that sent audio faster than real time, a
flooder admitted at twice real time, a file pushed at full speed; the engine reports each
stream's audio with ``observe_audio``) hold a backlog that no user is waiting on word by
word. Their requests, whatever their class, run only when no live final or partial is
queued, after live speculative finals (a live user's final is about to be due) and before
offline work; not while a live stream's utterance is pausing (its final may be asked for at
any moment), unless they have waited ``AHEAD_STARVE_S``; and while a live stream is open,
only within a share of the model's time (``ahead_share.py``). A decode cannot be preempted,
so a flooder filling every idle gap would make each live final that arrives wait for the
flooder's.

Within a class, requests go in fair order across owners (``fairness.py``, start-time fair
queueing on predicted decode seconds: the owner that has had the least of the model lately
goes first), then oldest first.

And within the live classes:

- a batch's size (``batch_size.py``) comes from the cost model measured at start-up
  (``cost_model.py``: small on a CPU, where batching buys little, full on a GPU), else from
  the measured time per request (``max_batch_s``);
- a batch goes out when it is full or its oldest request has waited its budget
  (``final_budget_s`` / ``partial_budget_s``), so a lone request still goes promptly while
  simultaneous ones share one model call;
- a newer partial of an owner (a stream) replaces its queued one (reported as dropped with
  reason ``"replaced"``);
- overload thinning: a partial that has waited ``partial_max_wait_s`` is stale before it could
  be served and is dropped (reason ``"overload"``); the owner is told and stretches its partial
  interval, so under load each stream asks less often instead of everyone waiting longer.

Batches hold one kind and one class only: finals use beam search and possibly a different
model, partials are greedy.

An owner's queued request may be ``withdraw``n (its session found something more urgent) or
``promote``d (a speculative final whose utterance just ended is now the real final).

``schedule`` is the engine's call: a ``SchedulerOutput`` record with the batch to run and the
requests let go since the last call (replaced, expired), the way vLLM's scheduler reports
finished requests in its output.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from kettle.streaming.engine.scheduling.ahead import AHEAD_STARVE_S, AheadOfRealTime
from kettle.streaming.engine.scheduling.batch_size import BatchSizer
from kettle.streaming.engine.scheduling.config import SchedulerConfig
from kettle.streaming.engine.scheduling.cost_model import CostModel
from kettle.streaming.engine.scheduling.fairness import FairShare
from kettle.streaming.engine.scheduling.queues import Dropped, Priority, Queues, Ticket
from kettle.transcribe.types import DecodeKind, DecodeRequest

__all__ = [
    "AHEAD_STARVE_S",
    "Dropped",
    "Priority",
    "Scheduler",
    "SchedulerConfig",
    "SchedulerOutput",
    "Ticket",
]

OVERLOAD_WINDOW_S = 5.0
PAUSE_RECHECK_S = 0.05  # work held for a live stream's pause looks again this often


@dataclass(frozen=True)
class SchedulerOutput:
    """One ``schedule`` call's record: the batch to run now (empty: none is due) and the
    requests let go since the previous call, which will have no result."""

    batch: tuple[Ticket, ...]
    dropped: tuple[Dropped, ...]


class Scheduler:
    def __init__(
        self, config: SchedulerConfig | None = None, cost_model: CostModel | None = None
    ) -> None:
        self.config = config or SchedulerConfig()
        self.costs = cost_model or CostModel()
        self._queues = Queues()
        self._dropped: list[Dropped] = []  # let go since the last schedule()
        self._last_overload: float | None = None
        self.sizer = BatchSizer(self.config, self.costs)
        self.fair = FairShare()
        self._ahead = AheadOfRealTime()
        self.skipped_total = 0
        self.refinements_skipped = 0

    # --- queries -------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._queues)

    def queued(self, priority: Priority) -> int:
        return len(self._queues[priority])

    @property
    def live_queued(self) -> int:
        """Queued requests of live streams that a user waits on (not refinements, not
        offline work)."""
        return len(self) - self.queued(Priority.OFFLINE) - self.queued(Priority.REFINE)

    def oldest(self, priority: Priority, now: float | None = None) -> float | None:
        """When the oldest queued request of a class was submitted (None: none queued).
        Given ``now``, only requests of owners not ahead of real time count: a flooder's
        final that waits because it yields is no sign that live streams wait."""
        queue = self._queues[priority] if now is None else self._live(priority, now)
        return min(t.submitted for t in queue) if queue else None

    def overloaded(self, now: float) -> bool:
        """True while partials have been skipped within the last few seconds."""
        return self._last_overload is not None and now - self._last_overload < OVERLOAD_WINDOW_S

    def observe(self, kind: DecodeKind, size: int, seconds: float) -> None:
        """Record how long a batch of ``size`` requests took (feeds the max_batch_s cap)."""
        self.sizer.observe(kind, size, seconds)

    def observe_batch(self, batch: Sequence[Ticket], seconds: float, now: float) -> None:
        """Record a batch that finished at ``now``: the cap's average, the cost model's
        correction, and the model time of streams ahead of real time (their share)."""
        if not batch:
            return
        requests = [t.request for t in batch]
        self.observe(requests[0].kind, len(requests), seconds)
        self.costs.observe(requests, seconds)
        ahead = sum(1 for t in batch if self.ahead(t.owner, now))
        if ahead:
            self._ahead.used(seconds * ahead / len(batch), now)

    def batch_limit(self, kind: DecodeKind, queue: Sequence[Ticket] = ()) -> int:
        """How many of ``queue`` (in serving order) the next batch of this kind takes at most."""
        return self.sizer.limit(kind, [t.request for t in queue])

    # --- input ---------------------------------------------------------------------------
    def submit(
        self,
        request: DecodeRequest,
        now: float,
        owner: Hashable | None = None,
        priority: Priority | None = None,
        *,
        solo: bool = False,
    ) -> Ticket:
        """Queue a request. ``owner`` (a stream) scopes replacement; default: no replacement.
        ``priority`` defaults to the class of the request's purpose (``Priority.of``);
        ``solo`` makes it a batch of its own."""
        prio = Priority.of(request) if priority is None else priority
        ticket, replaced = self._queues.add(request, now, owner, prio, solo)
        if replaced is not None:
            self._dropped.append(Dropped(replaced, "replaced"))
        return ticket

    def cancel(self, owner: Hashable) -> list[Ticket]:
        """Remove every queued request of an owner (it went away); returns them."""
        gone = self._queues.cancel(owner)
        self.forget(owner)
        return gone

    def forget(self, owner: Hashable) -> None:
        """The owner is gone: drop its fair-share account and pace (``cancel`` does both)."""
        self.fair.forget(owner)
        self._ahead.forget(owner)

    def observe_audio(self, owner: Hashable, audio_s: float, now: float) -> None:
        """A live owner's client sent ``audio_s`` seconds of audio (its pace, ``pace.py``)."""
        self._ahead.observe_audio(owner, audio_s, now)

    def ahead(self, owner: Hashable, now: float) -> bool:
        """Whether an owner's client runs ahead of real time (its requests yield)."""
        return self._ahead.ahead(owner, now)

    def holding_ahead(self, now: float) -> bool:
        """Whether requests of owners ahead of real time wait for their share of the model
        (``ahead_share.py``): it is used up, and a live stream is open to protect."""
        return self._ahead.holding(now)

    def withdraw(self, owner: Hashable, request_id: Hashable) -> Ticket | None:
        """Take back one queued request (not yet in a batch); None if it is not queued."""
        return self._queues.withdraw(owner, request_id)

    def promote(self, owner: Hashable, request_id: Hashable, priority: Priority) -> Ticket | None:
        """Move a queued request of a less urgent class to ``priority`` (keeping its submit
        time); returns the moved ticket, None if there is no such request."""
        return self._queues.promote(owner, request_id, priority)

    # --- policy --------------------------------------------------------------------------
    def schedule(
        self,
        now: float,
        *,
        sources: int | None = None,
        live_pausing: bool = False,
        final_headroom_s: float = math.inf,
    ) -> SchedulerOutput:
        """The batch to run now (``next_batch``, which takes the same arguments) and what
        was let go since the last call."""
        batch = self.next_batch(
            now, sources=sources, live_pausing=live_pausing, final_headroom_s=final_headroom_s
        )
        dropped, self._dropped = self._dropped, []
        return SchedulerOutput(tuple(batch or ()), tuple(dropped))

    def next_batch(
        self,
        now: float,
        *,
        sources: int | None = None,
        live_pausing: bool = False,
        final_headroom_s: float = math.inf,
    ) -> list[Ticket] | None:
        """The batch to run now, or None if nothing is due yet (see next_deadline).

        ``sources``: how many owners could submit live requests at all (the open streams,
        each with at most one request pending): with all of them queued, waiting cannot
        grow the batch, so it goes at once. ``live_pausing``: a live stream's utterance is
        pausing, its final may be asked for any moment (``ahead.py``, ``_refinable``).
        ``final_headroom_s``: seconds before the first final of a live stream inside an
        utterance can be due (math.inf: none speaks; ``_refinable``).
        """
        self._expire(now)
        clock = now
        if sources is not None and self.live_queued >= sources:
            now = math.inf  # every budget has elapsed
        finals = self._live(Priority.FINAL, clock)
        partials = self._live(Priority.PARTIAL, clock)
        if finals and self._due(finals, now, self.config.final_budget_s, DecodeKind.FINAL):
            return self._take(Priority.FINAL, finals, clock)
        if urgent := self._urgent_speculative(clock):
            return self._take(Priority.SPECULATIVE, urgent, clock)
        if partials and self._due(partials, now, self.config.partial_budget_s, DecodeKind.PARTIAL):
            return self._take(Priority.PARTIAL, partials, clock)
        if finals or partials:
            return None  # live work is waiting for its budget: the model is not idle
        work = self._idle_work(clock, live_pausing, final_headroom_s)
        return self._take(*work[0], clock) if work else None

    def _urgent_speculative(self, now: float) -> list[Ticket]:
        """Live speculative finals queued at least ``speculative_urgent_s``: they go before
        partials (the utterance has likely ended; its final is due at the endpoint)."""
        wait = self.config.speculative_urgent_s
        return [t for t in self._live(Priority.SPECULATIVE, now) if now - t.submitted >= wait]

    def _live(self, priority: Priority, now: float) -> list[Ticket]:
        """A class's requests (in submit order) of owners not ahead of real time."""
        return [t for t in self._queues[priority] if not self.ahead(t.owner, now)]

    def _ahead_requests(self, priority: Priority, now: float) -> list[Ticket]:
        return [t for t in self._queues[priority] if self.ahead(t.owner, now)]

    def _idle_work(
        self, now: float, live_pausing: bool = False, final_headroom_s: float = math.inf
    ) -> list[tuple[Priority, list[Ticket]]]:
        """What may run when no live final or partial is queued, most urgent first: live
        streams' speculative finals (a live user's final is about to be due); requests of
        streams ahead of real time, within their share of the model (``ahead_share.py``);
        offline work."""
        work = []
        if speculative := self._live(Priority.SPECULATIVE, now):
            work.append((Priority.SPECULATIVE, speculative))
        if not (self._held_for_pause(now, live_pausing) or self.holding_ahead(now)):
            for prio in (Priority.FINAL, Priority.PARTIAL, Priority.SPECULATIVE):
                if ahead := self._ahead_requests(prio, now):
                    work.append((prio, ahead))
        refine = self._refinable(now, live_pausing, final_headroom_s)
        offline = self._queues[Priority.OFFLINE]
        # Refinements and offline work share what is left, in fair order across owners.
        shared = [(Priority.REFINE, refine), (Priority.OFFLINE, offline)]
        shared = [(p, q) for p, q in shared if q]
        shared.sort(key=lambda item: self.fair.tag(self.in_order(item[1])[0].owner))
        work += shared
        return work

    def _refinable(self, now: float, live_pausing: bool, headroom: float) -> list[Ticket]:
        """The refinements that may start now (see ``next_batch``)."""
        queue = self._queues[Priority.REFINE]
        if not queue or live_pausing or self.overloaded(now):
            return []  # a final may be due any moment, or live work is already late
        if math.isinf(headroom):
            return queue
        oldest = min(queue, key=lambda t: t.seq)
        if now - oldest.submitted >= self.config.refine_urgent_s:
            return [oldest]
        first = self.in_order(queue)[0]
        predicted = self.costs.predict([first.request])
        return [first] if predicted is not None and predicted <= headroom else []

    def in_order(self, tickets: Sequence[Ticket]) -> list[Ticket]:
        """Tickets in the order they would be served: the owner's fair tag, then age. (Owners
        ahead of real time never share a batch with live ones: ``_live``, ``_idle_work``.)"""
        return sorted(tickets, key=lambda t: (self.fair.tag(t.owner), t.seq))

    def charge_of(self, request: DecodeRequest) -> float:
        """What serving a request costs its owner's fair share (``CostModel.charge``)."""
        return self.costs.charge(request)

    def _due(self, queue: list[Ticket], now: float, budget: float, kind: DecodeKind) -> bool:
        return len(queue) >= self.batch_limit(kind, queue) or now - queue[0].submitted >= budget

    def _held_for_pause(self, now: float, live_pausing: bool) -> bool:
        """Whether a live stream's pause holds back work of streams ahead of real time
        (``ahead.py``)."""
        if not live_pausing:
            return False
        waiting = [t.submitted for p in Priority for t in self._ahead_requests(p, now)]
        return self._ahead.held_for_pause(now, live_pausing, waiting)

    def _take(self, priority: Priority, eligible: list[Ticket], now: float) -> list[Ticket]:
        """Pop the next batch of a class from its (non-empty) eligible requests: in order
        (``in_order``), of the first ticket's kind, up to the batch limit; a solo ticket goes
        alone. Owners are charged."""
        ordered = self.in_order(eligible)
        kind = ordered[0].kind
        candidates = [t for t in ordered if t.kind is kind]
        batch: list[Ticket] = []
        for ticket in candidates[: self.batch_limit(kind, candidates)]:
            if batch and ticket.solo:
                break
            batch.append(ticket)
            if ticket.solo:
                break
        self._queues.remove(priority, batch)
        self.fair.charge((t.owner, self.charge_of(t.request)) for t in batch)
        if any(self.ahead(t.owner, now) for t in batch):
            self._ahead.served(now)
        return batch

    def next_deadline(
        self, now: float, *, live_pausing: bool = False, final_headroom_s: float = math.inf
    ) -> float | None:
        """When next_batch will have something to do without new submissions (or None)."""
        times = []
        finals = self._live(Priority.FINAL, now)
        partials = self._live(Priority.PARTIAL, now)
        if finals:
            times.append(finals[0].submitted + self.config.final_budget_s)
        if partials:
            times.append(partials[0].submitted + self.config.partial_budget_s)
        if speculative := self._live(Priority.SPECULATIVE, now):
            times.append(speculative[0].submitted + self.config.speculative_urgent_s)
        if waiting := self._queues[Priority.PARTIAL]:
            # Stale partials expire (and their owners are told) even if nothing else runs.
            times.append(waiting[0].submitted + self.config.partial_max_wait_s)
        if refine := self._queues[Priority.REFINE]:
            times.append(refine[0].submitted + self.config.refine_max_wait_s)
        if not (finals or partials):
            if self._queues[Priority.REFINE] and self._last_overload is not None:
                times.append(self._last_overload + OVERLOAD_WINDOW_S)  # held until calm
            held = live_pausing or not math.isinf(final_headroom_s)
            if self._queues[Priority.REFINE] and held:
                times.append(now + PAUSE_RECHECK_S)  # held for live speech: look again soon
            if self._idle_work(now, live_pausing, final_headroom_s):
                times.append(now)
            elif any(self._ahead_requests(p, now) for p in Priority):
                # Held: for their share until it opens; for a pause until it ends or becomes
                # an endpoint (no request may come of it, so look again soon).
                opens = self._ahead.opens_at(now)
                times.append(max(opens, now + PAUSE_RECHECK_S) if live_pausing else opens)
        return min(times) if times else None

    def _expire(self, now: float) -> None:
        wait = self.config.refine_max_wait_s
        stale = [t for t in self._queues[Priority.REFINE] if now - t.submitted >= wait]
        self._queues.remove(Priority.REFINE, stale)
        self._dropped += [Dropped(t, "stale") for t in stale]
        self.refinements_skipped += len(stale)
        limit = self.config.partial_max_wait_s
        late = [t for t in self._queues[Priority.PARTIAL] if now - t.submitted >= limit]
        self._queues.remove(Priority.PARTIAL, late)
        for t in late:
            self._dropped.append(Dropped(t, "overload"))
            if not self.ahead(t.owner, now):  # one ahead of real time waits by design
                self._last_overload = now
        self.skipped_total += len(late)
