"""upload_limits.py: when a body is cut (pace) and how the bodies share their byte budget."""

from __future__ import annotations

import pytest
from kettle.streaming.server.upload_limits import BodyPace, ByteBudget


def test_a_body_is_cut_after_the_grace_when_its_average_falls_under_the_rate() -> None:
    pace = BodyPace(deadline_s=100.0, grace_s=10.0, min_rate=1000.0)
    assert pace.cutoff(0) == (10.0, "slow")  # nothing sent: cut when the grace ends
    assert pace.cutoff(5_000) == (10.0, "slow")  # 500 B/s over the grace: still cut then
    assert pace.cutoff(20_000) == (20.0, "slow")  # what it sent covers a pause until 20 s
    assert pace.cutoff(200_000) == (100.0, "deadline")  # fast enough: the deadline binds


def test_without_a_rate_only_the_deadline_cuts() -> None:
    assert BodyPace(deadline_s=3.0, grace_s=1.0, min_rate=0).cutoff(0) == (3.0, "deadline")
    assert BodyPace(deadline_s=3.0, grace_s=5.0, min_rate=1.0).cutoff(0) == (3.0, "deadline")


def test_defaults_ask_for_16_kib_a_second_after_10_s_within_30_minutes() -> None:
    pace = BodyPace()
    assert (pace.deadline_s, pace.grace_s, pace.min_rate) == (1800.0, 10.0, 16384.0)


@pytest.mark.parametrize(
    "fields",
    [{"deadline_s": 0}, {"grace_s": -1}, {"min_rate": -1}, {"deadline_s": float("inf")}],
)
def test_pace_is_validated(fields: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        BodyPace(**fields)


def test_the_budget_is_taken_as_bytes_arrive_and_given_back_whole() -> None:
    budget = ByteBudget(10)
    with budget.share() as first:
        assert first.take(4) and first.take(4) and budget.held == 8
        with budget.share() as second:
            assert second.room == 2
            assert not second.take(3)  # refused whole, nothing taken, nothing waited for
            assert second.take(2) and budget.room == 0
        assert budget.held == 8  # the second upload ended: its bytes are free again
    assert budget.held == 0
    with pytest.raises(RuntimeError), budget.share() as share:
        share.take(5)
        raise RuntimeError  # however the upload ends, its share comes back
    assert budget.held == 0
    with pytest.raises(ValueError):
        ByteBudget(0)
