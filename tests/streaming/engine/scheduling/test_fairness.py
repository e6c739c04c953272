"""Fair shares across owners (start-time fair queueing) and yielding when ahead of real
time (pace), alone and inside the scheduler."""

from __future__ import annotations

import pytest
from kettle.streaming.engine.scheduling.cost_model import CostModel
from kettle.streaming.engine.scheduling.fairness import PRUNE_AT, FairShare
from kettle.streaming.engine.scheduling.pace import PaceMeter
from kettle.streaming.engine.scheduling.scheduler import Priority, Scheduler, SchedulerConfig
from kettle.transcribe.model.costs import CostProfile
from kettle.transcribe.types import DecodeKind

from tests.streaming.engine.scheduling.conftest import feed_realtime, final, ids, partial

# --- FairShare alone ---------------------------------------------------------------------


def test_an_owner_that_was_served_goes_after_one_that_was_not() -> None:
    fair = FairShare()
    assert fair.tag("a") == fair.tag("b") == 0.0
    fair.charge([("a", 1.0)])
    assert fair.tag("a") == 1.0 and fair.tag("b") == 0.0
    assert fair.ahead_s("a") == 1.0 and fair.ahead_s("b") == 0.0


def test_idleness_earns_no_credit() -> None:
    fair = FairShare()
    for _ in range(10):  # "a" alone keeps the model busy: virtual time follows it
        fair.charge([("a", 1.0)])
    assert fair.virtual == 9.0
    # "b" arrives after being idle: it starts at V, one turn ahead of "a", not ten.
    assert fair.tag("b") == 9.0 < fair.tag("a") == 10.0
    fair.charge([("b", 1.0)])
    assert fair.tag("b") == fair.tag("a") == 10.0


def test_costs_weigh_the_shares() -> None:
    fair = FairShare()
    fair.charge([("cheap", 0.1), ("dear", 1.0)])
    order = []
    for _ in range(6):
        who = min(("cheap", "dear"), key=fair.tag)
        order.append(who)
        fair.charge([(who, 0.1 if who == "cheap" else 1.0)])
    assert order == ["cheap"] * 6  # ten cheap turns fit in one dear one


def test_forgotten_and_stale_accounts_go() -> None:
    fair = FairShare()
    fair.charge([("a", 1.0)])
    fair.forget("a")
    assert len(fair) == 0 and fair.tag("a") == fair.virtual
    # Accounts that fell behind V are pruned once there are many: memory stays bounded.
    fair.charge([(i, 0.0) for i in range(PRUNE_AT)])
    assert len(fair) < PRUNE_AT


# --- in the scheduler --------------------------------------------------------------------


def test_a_live_final_goes_before_a_flooders_final_queued_earlier() -> None:
    s = Scheduler(SchedulerConfig(max_batch_size=1))
    # The flooder holds a backlog: each final it gets back, it asks for the next at once.
    for i in range(5):
        s.submit(final(f"flood{i}"), now=float(i), owner="flooder")
        assert ids(s.next_batch(float(i))) == [f"flood{i}"]
    s.submit(final("flood5"), now=5.0, owner="flooder")
    s.submit(final("live"), now=5.1, owner="live")  # an honest stream's endpoint
    assert ids(s.next_batch(5.2)) == ["live"]
    assert ids(s.next_batch(5.3)) == ["flood5"]  # still served: the model is free


def test_backlogged_owners_take_turns() -> None:
    s = Scheduler(SchedulerConfig(max_batch_size=1))
    for i in range(3):  # two uploads queued at once, "a" first
        s.submit(final(f"a{i}"), now=0.0, owner="a", priority=Priority.OFFLINE)
    for i in range(3):
        s.submit(final(f"b{i}"), now=0.0, owner="b", priority=Priority.OFFLINE)
    served = [ids(s.next_batch(1.0))[0] for _ in range(6)]
    assert served == ["a0", "b0", "a1", "b1", "a2", "b2"]


def test_without_history_the_order_is_oldest_first() -> None:
    s = Scheduler(SchedulerConfig(max_batch_size=4))
    for i, owner in enumerate("dcba"):
        s.submit(final(f"f{i}"), now=float(i), owner=owner)
    assert ids(s.next_batch(4.0)) == ["f0", "f1", "f2", "f3"]


def test_fair_order_uses_measured_costs() -> None:
    # Long finals cost more than short ones: the owner that had a long one waits for the
    # one that had a short one, though it queued first (by count alone it would go first).
    profile = CostProfile(((1, 0.3), (2, 0.6)), ((1, 0.01), (8, 0.08)))
    s = Scheduler(SchedulerConfig(max_batch_size=1), CostModel({DecodeKind.FINAL: profile}))
    assert s.charge_of(final("x", 20.0)) > 1.5 * s.charge_of(final("y", 1.0))
    s.submit(final("long", 20.0), now=0.0, owner="long")
    s.submit(final("short", 1.0), now=0.0, owner="short")
    assert ids(s.next_batch(0.0)) == ["long"]
    assert ids(s.next_batch(0.0)) == ["short"]
    s.submit(final("long2", 20.0), now=1.0, owner="long")
    s.submit(final("short2", 1.0), now=1.1, owner="short")
    assert ids(s.next_batch(1.2)) == ["short2"]


def test_fairness_orders_within_a_class_never_across() -> None:
    s = Scheduler(SchedulerConfig(max_batch_size=1, partial_budget_s=0.0))
    for i in range(3):
        s.submit(final(f"flood{i}"), now=float(i), owner="flooder")
        s.next_batch(float(i))
    s.submit(partial("live-partial"), now=3.0, owner="live")
    s.submit(final("flood3"), now=3.1, owner="flooder")
    assert ids(s.next_batch(3.2)) == ["flood3"]  # finals still outrank partials
    assert ids(s.next_batch(3.3)) == ["live-partial"]


def test_a_cancelled_owner_is_forgotten() -> None:
    s = Scheduler(SchedulerConfig(max_batch_size=1))
    s.submit(final("f"), now=0.0, owner="a")
    s.next_batch(0.0)
    assert s.fair.ahead_s("a") > 0
    s.cancel("a")
    assert s.fair.ahead_s("a") == 0 and len(s.fair) == 0


# --- ahead of real time ------------------------------------------------------------------


def test_pace_real_time_stays_behind_the_threshold_a_flood_does_not() -> None:
    live, flood = PaceMeter(0.0), PaceMeter(0.0)
    for i in range(600):  # a minute of 100 ms messages
        now = i * 0.1
        live.feed(0.1, now)
        flood.feed(0.2, now)  # twice real time
    assert live.ahead_s(60.0) <= 0.1 and not live.ahead(60.0)
    assert flood.ahead(60.0) and flood.ahead_s(60.0) > 40


def test_a_burst_is_forgiven_after_a_while() -> None:
    meter = PaceMeter(0.0)
    meter.feed(10.0, 0.0)  # a reconnect sends 10 s again at once
    assert meter.ahead(0.0)
    for i in range(1, 400):  # then real time
        meter.feed(0.1, i * 0.1)
        if i == 200:
            assert meter.ahead_s(20.0) == pytest.approx(5.0, abs=0.2)  # not at once
    assert not meter.ahead(40.0) and meter.ahead_s(40.0) <= 0.1


def test_a_stream_ahead_of_real_time_yields_to_live_ones_in_its_class() -> None:
    s = Scheduler(SchedulerConfig(max_batch_size=1))
    feed_realtime(s, "live", 0.0, 10.0)
    for i in range(100):  # the flooder sends 10 s of audio per second
        s.observe_audio("flooder", 1.0, i * 0.1)
    s.submit(final("flood"), now=9.0, owner="flooder")
    s.submit(final("live"), now=9.5, owner="live")
    # Though the live stream has had more of the model (its fair tag is higher).
    s.fair.charge([("live", 5.0)])
    assert s.ahead("flooder", 10.0) and not s.ahead("live", 10.0)
    assert ids(s.next_batch(10.0)) == ["live"]
    assert ids(s.next_batch(10.0)) == ["flood"]
    s.forget("flooder")
    assert not s.ahead("flooder", 10.0)


def test_a_waiting_final_of_a_stream_ahead_is_no_pressure() -> None:
    s = Scheduler()
    for i in range(100):
        s.observe_audio("flooder", 1.0, i * 0.1)
    s.submit(final("flood"), now=5.0, owner="flooder")
    assert s.oldest(Priority.FINAL) == 5.0
    assert s.oldest(Priority.FINAL, now=10.0) is None  # it yields by design
    s.submit(final("live"), now=9.0, owner="live")
    assert s.oldest(Priority.FINAL, now=10.0) == 9.0
