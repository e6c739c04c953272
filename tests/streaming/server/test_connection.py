"""The connection's lifecycle (its phases' transition table), deadlines and rate, on a manual
clock."""

from __future__ import annotations

import itertools

import pytest
from kettle.streaming.protocols.limits import Limits
from kettle.streaming.server.connection import (
    ConnectionState,
    IllegalTransition,
    Phase,
)

OPEN, STOPPED, FINISHED = Phase.OPEN, Phase.STOPPED, Phase.FINISHED
ALLOWED = {(OPEN, STOPPED), (OPEN, FINISHED), (STOPPED, FINISHED)}
# The way from OPEN to each phase, by allowed steps only.
ROUTE_TO = {OPEN: [], STOPPED: [STOPPED], FINISHED: [STOPPED, FINISHED]}


def state_in(phase: Phase) -> ConnectionState:
    state = ConnectionState(Limits(), now=0.0)
    for step in ROUTE_TO[phase]:
        state.enter(step)
    assert state.phase is phase
    return state


@pytest.mark.parametrize(("old", "new"), sorted(ALLOWED, key=str))
def test_allowed_transitions(old: Phase, new: Phase) -> None:
    state = state_in(old)
    state.enter(new)
    assert state.phase is new


@pytest.mark.parametrize(
    ("old", "new"),
    sorted(set(itertools.product(Phase, Phase)) - ALLOWED, key=str),
)
def test_refused_transitions_raise(old: Phase, new: Phase) -> None:
    state = state_in(old)
    with pytest.raises(IllegalTransition, match=f"from {old.value} to {new.value}"):
        state.enter(new)
    assert state.phase is old  # nothing changed


def test_stop_and_finish_happen_once() -> None:
    state = ConnectionState(Limits(), now=0.0)
    assert state.open and state.stop(1.0) and not state.open
    assert not state.stop(2.0) and state.stopped_at == 1.0
    assert state.finish() and not state.finish()
    assert not state.stop(3.0) and state.phase is FINISHED
    # Finished without a stop (a close at once, a failure): input is ignored from then on.
    released = ConnectionState(Limits(), now=0.0)
    assert released.finish() and not released.stop(1.0) and not released.on_message(1.0)
    assert released.deadline() is None


def test_deadlines_follow_the_lifecycle() -> None:
    state = ConnectionState(Limits(idle_timeout_s=5, max_session_s=12), now=100.0)
    assert state.deadline() == (105.0, "idle")
    assert state.on_message(104.0)
    assert state.deadline() == (109.0, "idle")
    state.on_message(108.0)
    assert state.deadline() == (112.0, "max_duration")
    assert state.stop(110.0) and not state.stop(111.0)
    assert state.deadline() == (110.0 + 300.0, "finish_timeout")
    assert not state.on_message(111.0)  # ignored after stop
    assert state.finish()
    assert state.deadline() is None


def test_shutdown_closes_with_1001() -> None:
    state = ConnectionState(Limits(), now=0.0)
    assert state.close_code == 1000
    state.shutting_down()
    assert state.close_code == 1001


def test_rate_gate_notifies_once_per_run() -> None:
    state = ConnectionState(Limits(max_messages_per_second=1.0), now=0.0)  # burst 2
    verdicts = [state.rate_gate(0.0).check() for _ in range(5)]
    assert verdicts == ["allow", "allow", "notify", "drop", "drop"]
    assert state.rate_gate(1.0).check() == "allow"
    assert state.rate_gate(1.0).check() == "notify"
