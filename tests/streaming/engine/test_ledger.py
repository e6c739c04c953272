"""The request ledger: its state transitions as a table (allowed and refused), fallback rounds
and retries as one entry, and the batch record's drops."""

from __future__ import annotations

from collections.abc import Callable, Hashable

import numpy as np
import pytest
from kettle.streaming.core.session import Session
from kettle.streaming.engine.ledger import TRANSITIONS, Entry, Ledger, RefusedTransition, State
from kettle.streaming.engine.scheduling.scheduler import Priority, Scheduler, SchedulerConfig
from kettle.streaming.engine.stream import Stream, StreamChange
from kettle.transcribe.types import DecodeKind, DecodeRequest, DecodeResult, Purpose

AUDIO = np.zeros(1600, dtype=np.float32)
REFUSED = "refused"


class Host:
    def is_open(self, stream: Stream) -> bool:
        return True

    def withdraw(self, stream: Stream, request_id: Hashable) -> bool:
        return False

    def stream_changed(self, stream: Stream, change: StreamChange) -> None:
        pass

    def stream_aborted(self, stream: Stream) -> None:
        pass


def request(rid: str, kind: DecodeKind = DecodeKind.PARTIAL) -> DecodeRequest:
    return DecodeRequest(audio=AUDIO, kind=kind, request_id=rid)


def result(rid: str, **kw: object) -> DecodeResult:
    return DecodeResult(rid, DecodeKind.FINAL, "text", **kw)  # type: ignore[arg-type]


class Case:
    """A ledger holding one stream's request ``r1``, brought to a given state."""

    def __init__(self, state: State) -> None:
        self.ledger = Ledger(Scheduler(SchedulerConfig(partial_budget_s=0.0)))
        self.stream = Stream(Host(), "s1", Session(session_id="s1"), 8)
        self.entry = self.ledger.submit(request("r1"), 0.0, self.stream)
        ledger = self.ledger
        if state is State.SUPERSEDED:
            self.entry = self._some(ledger.withdraw(self.stream, "r1"))
        elif state is State.CANCELLED:
            (self.entry,) = ledger.cancel(self.stream)
        elif state is not State.PENDING:
            (self.entry,) = ledger.schedule(0.0).entries
            ends: dict[State, Callable[[Entry], Entry]] = {
                State.DONE: ledger.complete,
                State.DROPPED: ledger.drop,
                State.FAILED: ledger.fail,
            }
            if state in ends:
                self.entry = ends[state](self.entry)
        assert self.entry.state is state

    @staticmethod
    def _some(entry: Entry | None) -> Entry:
        assert entry is not None
        return entry

    def act(self, action: str) -> State | None:
        """Do ``action`` to ``r1``: the state the ledger reports it in (None: untouched)."""
        ledger, entry, now = self.ledger, self.entry, 0.5
        if action == "schedule":
            moved = [e for e in ledger.schedule(now).entries if e.id == entry.id]
        elif action == "replaced":  # a newer partial of the stream replaces a queued one
            ledger.submit(request("r2"), now, self.stream)
            moved = [d.entry for d in ledger.schedule(now).dropped if d.entry.id == entry.id]
        elif action == "withdraw":
            moved = [e for e in [ledger.withdraw(self.stream, "r1")] if e is not None]
        elif action == "cancel":
            moved = ledger.cancel(self.stream)
        elif action == "next_round":
            moved = [ledger.next_round(entry, entry.request, result("r1"), now)]
        elif action == "retry":
            moved = [ledger.retry(entry, now)]
        else:
            moved = [getattr(ledger, action)(entry)]
        return moved[0].state if moved else None


ACTIONS = (
    "schedule",
    "replaced",
    "withdraw",
    "cancel",
    "complete",
    "drop",
    "fail",
    "next_round",
    "retry",
)
P, F = State.PENDING, State.IN_FLIGHT
ENDED = (State.SUPERSEDED, State.DROPPED, State.CANCELLED, State.FAILED, State.DONE)
# (from, action) -> the state it leads to; None: nothing happens; REFUSED: a bug, raised.
TABLE: dict[tuple[State, str], State | str | None] = {
    (P, "schedule"): F,
    (P, "replaced"): State.DROPPED,
    (P, "withdraw"): State.SUPERSEDED,
    (P, "cancel"): State.CANCELLED,
    (P, "complete"): REFUSED,
    (P, "drop"): REFUSED,
    (P, "fail"): REFUSED,
    (P, "next_round"): REFUSED,
    (P, "retry"): REFUSED,
    (F, "schedule"): None,
    (F, "replaced"): None,  # no longer queued: nothing to replace
    (F, "withdraw"): None,  # running: its result comes back as usual
    (F, "cancel"): State.CANCELLED,
    (F, "complete"): State.DONE,
    (F, "drop"): State.DROPPED,
    (F, "fail"): State.FAILED,
    (F, "next_round"): P,
    (F, "retry"): P,
    **{(end, a): None for end in ENDED for a in ("schedule", "replaced", "withdraw", "cancel")},
    **{
        (end, a): REFUSED
        for end in ENDED
        for a in ("complete", "drop", "fail", "next_round", "retry")
    },
}


def test_the_table_covers_every_state_and_action() -> None:
    assert set(TABLE) == {(s, a) for s in State for a in ACTIONS}


# Sorted outside the decorator, where mypy would read the keys as object.
CASES = sorted(TABLE, key=lambda k: (k[0].value, k[1]))


@pytest.mark.parametrize(("start", "action"), CASES)
def test_transition(start: State, action: str) -> None:
    case = Case(start)
    expected = TABLE[start, action]
    if expected == REFUSED:
        with pytest.raises(RefusedTransition):
            case.act(action)
        return
    got = case.act(action)
    assert got is expected
    if isinstance(expected, State):
        assert expected in TRANSITIONS[start]


def test_only_pending_and_in_flight_lead_anywhere() -> None:
    assert {s for s, to in TRANSITIONS.items() if to} == {P, F}
    assert State.DONE not in TRANSITIONS[P] and P not in TRANSITIONS[State.DONE]


def test_fallback_rounds_and_retries_are_one_entry() -> None:
    case = Case(F)
    ledger, first = case.ledger, case.entry
    tried = result("r1", fallback="unlikely", next_round=1)
    again = ledger.next_round(first, request("r1", DecodeKind.FINAL), tried, 1.0)
    assert (again.id, again.rounds, again.attempt) == (first.id, (tried,), 0)
    assert again.ticket.seq != first.ticket.seq and ledger.state(first) is None
    assert ledger.state(again) is P
    (running,) = ledger.schedule(1.0).entries
    retried = ledger.retry(running, 2.0)
    assert (retried.id, retried.rounds, retried.attempt) == (first.id, (tried,), 1)
    assert retried.ticket.solo and retried.ticket.priority is running.ticket.priority


def test_a_promoted_request_runs_in_its_new_class() -> None:
    case = Case(P)
    ledger = case.ledger
    spec = DecodeRequest(
        audio=AUDIO, kind=DecodeKind.FINAL, request_id="s", purpose=Purpose.SPECULATIVE
    )
    entry = ledger.submit(spec, 0.0, case.stream)
    assert entry.ticket.priority is Priority.SPECULATIVE
    assert ledger.promote(case.stream, "s", Priority.FINAL)
    assert not ledger.promote(case.stream, "missing", Priority.FINAL)
    (running,) = ledger.schedule(0.0).entries
    assert running.id == entry.id and running.ticket.priority is Priority.FINAL


def test_what_the_scheduler_drops_is_reported_once_with_its_reason() -> None:
    ledger = Ledger(Scheduler(SchedulerConfig(partial_budget_s=0.5, partial_max_wait_s=1.0)))
    stream = Stream(Host(), "s1", Session(session_id="s1"), 8)
    entry = ledger.submit(request("p1"), 0.0, stream)
    batch = ledger.schedule(1.0)
    assert batch.entries == () and [(d.entry.id, d.reason) for d in batch.dropped] == [
        (entry.id, "overload")
    ]
    assert ledger.schedule(2.0).dropped == () and len(ledger) == 0


def test_a_drop_of_an_owner_gone_meanwhile_is_not_reported() -> None:
    ledger = Ledger(Scheduler())
    stream = Stream(Host(), "s1", Session(session_id="s1"), 8)
    ledger.submit(request("p1"), 0.0, stream)
    ledger.submit(request("p2"), 0.0, stream)  # replaces p1
    ledger.cancel(stream)
    assert ledger.schedule(0.0).dropped == () and len(ledger) == 0
