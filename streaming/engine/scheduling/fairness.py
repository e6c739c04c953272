"""Fair shares of the model across owners (streams, offline calls): start-time fair queueing.

Within one priority class the scheduler serves the queued request whose owner has had the
least of the model lately, not simply the oldest. Each owner keeps a virtual finish time
``F``; the system keeps a virtual time ``V``, the start tag of the work last dispatched. An
owner's next request is tagged ``max(V, F)`` and requests go in tag order (ties: oldest
first); dispatching one charges its owner its cost (``F = tag + cost``) and moves ``V`` on.

So a client that is ahead of real time, or holds a deep backlog, and keeps the model busy
with its own work (a flooder admitted at twice real time) has a finish time far ahead of
``V``: a live stream's final, tagged ``V``, goes before its queued final, whatever their
submit times. An owner that was idle starts again at ``V``: idleness earns no credit, so a
quiet stream cannot save up a burst either. With equal costs and everyone backlogged this
is round robin; with costs in predicted decode seconds it shares decode time.

Pure: no clock (virtual time moves only by dispatching), no I/O. The scheduler owns one.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

# Accounts at or behind V hold no information (such an owner is tagged V anyway): they are
# pruned once there are this many, so memory stays bounded by the owners that are ahead.
PRUNE_AT = 256


class FairShare:
    def __init__(self) -> None:
        self.virtual = 0.0  # V
        self._finish: dict[Hashable, float] = {}  # owner -> F

    def __len__(self) -> int:
        return len(self._finish)

    def tag(self, owner: Hashable) -> float:
        """The start tag an owner's next request gets (lower goes first)."""
        return max(self.virtual, self._finish.get(owner, self.virtual))

    def ahead_s(self, owner: Hashable) -> float:
        """How far an owner's use runs ahead of the system's virtual time (0: not ahead)."""
        return self.tag(owner) - self.virtual

    def charge(self, dispatched: Iterable[tuple[Hashable, float]]) -> None:
        """One batch was dispatched: (owner, cost) per request, in batch order."""
        starts = []
        for owner, cost in dispatched:
            start = self.tag(owner)
            starts.append(start)
            self._finish[owner] = start + max(0.0, cost)
        if starts:
            # The least start in service: anyone tagged below it now has waited its turn.
            self.virtual = max(self.virtual, min(starts))
        if len(self._finish) >= PRUNE_AT:
            self._prune()

    def forget(self, owner: Hashable) -> None:
        """The owner is gone (its stream closed, its offline call ended)."""
        self._finish.pop(owner, None)

    def _prune(self) -> None:
        self._finish = {o: f for o, f in self._finish.items() if f > self.virtual}
