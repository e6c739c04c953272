"""The connection's lifecycle, deadlines and rate, on a manual clock."""

from __future__ import annotations

from kettle.streaming.server.connection import ConnectionLimits, ConnectionState


def test_deadlines_follow_the_lifecycle() -> None:
    state = ConnectionState(ConnectionLimits(idle_timeout_s=5, max_session_s=12), now=100.0)
    assert state.deadline() == (105.0, "idle")
    assert state.on_message(104.0)
    assert state.deadline() == (109.0, "idle")
    state.on_message(108.0)
    assert state.deadline() == (112.0, "max_duration")
    assert state.stop(110.0) and not state.stop(111.0)
    assert state.deadline() == (110.0 + 300.0, "finish_timeout")
    assert not state.on_message(111.0)  # ignored after stop
    state.finished = True
    assert state.deadline() is None


def test_shutdown_closes_with_1001() -> None:
    state = ConnectionState(ConnectionLimits(), now=0.0)
    assert state.close_code == 1000
    state.shutting_down()
    assert state.close_code == 1001


def test_rate_gate_notifies_once_per_run() -> None:
    state = ConnectionState(ConnectionLimits(max_messages_per_second=1.0), now=0.0)  # burst 2
    verdicts = [state.rate_gate(0.0).check() for _ in range(5)]
    assert verdicts == ["allow", "allow", "notify", "drop", "drop"]
    assert state.rate_gate(1.0).check() == "allow"
    assert state.rate_gate(1.0).check() == "notify"
