"""The scheduler's policy, with a manual clock."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from kettle.streaming.engine.scheduling.cost_model import CostModel
from kettle.streaming.engine.scheduling.queues import Ticket
from kettle.streaming.engine.scheduling.scheduler import Priority, Scheduler, SchedulerConfig
from kettle.transcribe.errors import ConfigError
from kettle.transcribe.model.costs import CostProfile
from kettle.transcribe.types import DecodeKind, DecodeRequest, Purpose

AUDIO = np.zeros(1600, dtype=np.float32)


def req(rid: str, kind: DecodeKind = DecodeKind.PARTIAL) -> DecodeRequest:
    return DecodeRequest(audio=AUDIO, kind=kind, request_id=rid)


def ids(batch: Sequence[Ticket] | None) -> list[str]:
    assert batch is not None
    out: list[str] = []
    for t in batch:
        assert isinstance(t.request.request_id, str)  # the tests name their requests
        out.append(t.request.request_id)
    return out


def test_lone_partial_waits_its_budget_then_goes() -> None:
    s = Scheduler(SchedulerConfig(partial_budget_s=0.05))
    s.submit(req("p1"), now=10.0, owner="a")
    assert s.next_batch(10.0) is None
    assert s.next_deadline(10.0) == pytest.approx(10.05)
    assert s.next_batch(10.049) is None
    assert ids(s.next_batch(10.05)) == ["p1"]
    assert s.next_deadline(10.05) is None and len(s) == 0


def test_full_batch_goes_at_once() -> None:
    s = Scheduler(SchedulerConfig(max_batch_size=3, partial_budget_s=1.0, partial_max_wait_s=5))
    for i in range(4):
        s.submit(req(f"p{i}"), now=0.0, owner=i)
    assert ids(s.next_batch(0.0)) == ["p0", "p1", "p2"]
    assert s.next_batch(0.0) is None
    assert ids(s.next_batch(1.0)) == ["p3"]


def test_finals_first_and_in_their_own_batch() -> None:
    s = Scheduler(SchedulerConfig(max_batch_size=4, partial_budget_s=0.0, partial_max_wait_s=5))
    s.submit(req("p1"), now=0.0, owner="a")
    s.submit(req("f1", DecodeKind.FINAL), now=0.5, owner="b")
    s.submit(req("p2"), now=0.6, owner="c")
    s.submit(req("f2", DecodeKind.FINAL), now=0.7, owner="d")
    assert ids(s.next_batch(1.0)) == ["f1", "f2"]
    assert ids(s.next_batch(1.0)) == ["p1", "p2"]


def test_final_budget_lets_finals_gather() -> None:
    s = Scheduler(SchedulerConfig(final_budget_s=0.1, partial_budget_s=0.5))
    s.submit(req("f1", DecodeKind.FINAL), now=0.0, owner="a")
    assert s.next_batch(0.05) is None
    assert s.next_deadline(0.05) == pytest.approx(0.1)
    s.submit(req("f2", DecodeKind.FINAL), now=0.08, owner="b")
    assert ids(s.next_batch(0.1)) == ["f1", "f2"]


def test_newer_partial_replaces_the_queued_one() -> None:
    s = Scheduler()
    s.submit(req("old"), now=0.0, owner="a")
    s.submit(req("other"), now=0.01, owner="b")
    s.submit(req("new"), now=0.02, owner="a")
    out = s.schedule(0.5)
    assert [(d.ticket.request.request_id, d.reason) for d in out.dropped] == [("old", "replaced")]
    assert ids(out.batch) == ["other", "new"]
    # Finals are never replaced.
    s.submit(req("f1", DecodeKind.FINAL), now=2.0, owner="a")
    s.submit(req("f2", DecodeKind.FINAL), now=2.0, owner="a")
    assert ids(s.next_batch(2.0)) == ["f1", "f2"]


def test_overload_thins_stale_partials_and_never_drops_finals() -> None:
    cfg = SchedulerConfig(max_batch_size=2, partial_budget_s=0.05, partial_max_wait_s=1.0)
    s = Scheduler(cfg)
    # A flood: 50 streams' partials and 5 finals at t=0, the model busy until t=1.2.
    for i in range(50):
        s.submit(req(f"p{i}"), now=0.0, owner=f"s{i}")
    for i in range(5):
        s.submit(req(f"f{i}", DecodeKind.FINAL), now=0.0, owner=f"s{i}")
    assert not s.overloaded(1.2)
    served: list[str] = []
    now = 1.2
    while (batch := s.next_batch(now)) is not None:
        served += ids(batch)
        now += 0.1
    assert served == ["f0", "f1", "f2", "f3", "f4"]
    dropped = s.schedule(now).dropped
    assert len(dropped) == 50 and {d.reason for d in dropped} == {"overload"}
    assert s.overloaded(now) and not s.overloaded(now + 10.0)
    assert s.skipped_total == 50


def test_partials_do_not_starve_finals() -> None:
    s = Scheduler(SchedulerConfig(max_batch_size=4, partial_budget_s=0.0))
    now = 0.0
    finals_served = []
    for step in range(100):
        for i in range(8):
            s.submit(req(f"p{step}-{i}"), now=now, owner=f"s{i}")
        if step % 10 == 0:
            s.submit(req(f"f{step}", DecodeKind.FINAL), now=now, owner="x")
        batch = s.next_batch(now)
        finals_served += [r for r in ids(batch) if r.startswith("f")]
        now += 0.1
    assert finals_served == [f"f{i}" for i in range(0, 100, 10)]


def test_cancel_removes_an_owners_requests() -> None:
    s = Scheduler()
    s.submit(req("a1"), now=0.0, owner="a")
    s.submit(req("a2", DecodeKind.FINAL), now=0.0, owner="a")
    s.submit(req("b1"), now=0.0, owner="b")
    assert sorted(ids(s.cancel("a"))) == ["a1", "a2"]
    assert ids(s.next_batch(0.5)) == ["b1"]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_batch_size": 0},
        {"partial_budget_s": -1.0},
        {"final_budget_s": 11.0},
        {"partial_max_wait_s": 0.01},
        {"max_final_batch_size": 0},
    ],
)
def test_bad_config_is_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        SchedulerConfig(**kwargs)


def test_batch_goes_at_once_when_no_one_else_could_join() -> None:
    s = Scheduler(SchedulerConfig(partial_budget_s=0.5))
    s.submit(req("p1"), now=0.0, owner="a")
    assert s.next_batch(0.0, sources=2) is None  # stream b may still submit
    s.submit(req("p2"), now=0.01, owner="b")
    assert ids(s.next_batch(0.01, sources=2)) == ["p1", "p2"]
    s.submit(req("p3"), now=1.0, owner="a")
    assert ids(s.next_batch(1.0, sources=1)) == ["p3"]


def profiled(encode: dict[int, float], step: dict[int, float]) -> Scheduler:
    kinds = (DecodeKind.PARTIAL, DecodeKind.FINAL)
    profile = CostProfile(tuple(encode.items()), tuple(step.items()))
    config = SchedulerConfig(max_batch_size=8, partial_budget_s=0.0, partial_max_wait_s=5)
    return Scheduler(config, CostModel(dict.fromkeys(kinds, profile)))


def test_where_a_batch_costs_the_sum_of_its_requests_they_go_one_by_one() -> None:
    # A CPU: the encoder pass grows with the batch, so the first result should not wait.
    s = profiled({1: 0.35, 2: 0.70}, {1: 0.005, 8: 0.04})
    for i in range(4):
        s.submit(req(f"p{i}"), now=0.0, owner=i)
    assert [ids(s.next_batch(0.0)) for _ in range(4)] == [["p0"], ["p1"], ["p2"], ["p3"]]


def test_where_batching_is_nearly_free_batches_fill_up() -> None:
    # A GPU: a batch of 8 costs little more than one request; no padded-audio cap applies.
    s = profiled({1: 0.02, 2: 0.021, 8: 0.025}, {1: 0.004, 8: 0.0045})
    long_audio = np.zeros(29 * 16000, dtype=np.float32)
    for i in range(10):
        s.submit(
            DecodeRequest(audio=long_audio, kind=DecodeKind.FINAL, request_id=f"f{i}"),
            now=0.0,
            owner=i,
        )
    assert len(ids(s.next_batch(0.0))) == 8
    assert len(ids(s.next_batch(0.0))) == 2


def test_batches_shrink_to_the_measured_decode_time_cap() -> None:
    s = Scheduler(SchedulerConfig(max_batch_size=8, max_batch_s=1.0, partial_budget_s=0.0))
    assert s.batch_limit(DecodeKind.PARTIAL) == 8  # nothing measured yet
    s.observe(DecodeKind.PARTIAL, 2, 0.8)  # 0.4 s per request: 2 fit in 1 s
    assert s.batch_limit(DecodeKind.PARTIAL) == 2
    assert s.batch_limit(DecodeKind.FINAL) == 8
    for i in range(5):
        s.submit(req(f"p{i}"), now=0.0, owner=i)
    assert ids(s.next_batch(0.0)) == ["p0", "p1"]
    s.observe(DecodeKind.PARTIAL, 8, 0.16)  # a fast device: the cap opens up again
    for _ in range(10):
        s.observe(DecodeKind.PARTIAL, 8, 0.16)
    assert s.batch_limit(DecodeKind.PARTIAL) == 8


# --- priority classes ---------------------------------------------------------------------


def spec(rid: str) -> DecodeRequest:
    return DecodeRequest(
        audio=AUDIO, kind=DecodeKind.FINAL, request_id=rid, purpose=Purpose.SPECULATIVE
    )


def test_classes_go_final_then_partial_then_speculative_then_offline() -> None:
    s = Scheduler(SchedulerConfig(max_batch_size=4, partial_budget_s=0.0, partial_max_wait_s=5))
    s.submit(req("o1", DecodeKind.FINAL), now=0.0, owner="file", priority=Priority.OFFLINE)
    s.submit(spec("s1"), now=0.1, owner="a")
    s.submit(req("p1"), now=0.15, owner="b")
    s.submit(req("f1", DecodeKind.FINAL), now=0.2, owner="c")
    # The speculation is younger than speculative_urgent_s (0.2 s): idle capacity only.
    assert [ids(s.next_batch(0.25)) for _ in range(4)] == [["f1"], ["p1"], ["s1"], ["o1"]]
    assert s.next_batch(0.25) is None


def test_a_speculation_that_has_waited_goes_before_partials_not_finals() -> None:
    config = SchedulerConfig(partial_budget_s=0.0, partial_max_wait_s=5, speculative_urgent_s=0.2)
    s = Scheduler(config)
    s.submit(spec("s1"), now=0.0, owner="a")
    assert s.next_deadline(0.0) == 0.0  # the model is idle: it may go at once
    s.submit(req("p1"), now=0.05, owner="b")
    assert ids(s.next_batch(0.1)) == ["p1"]  # young: the partial first
    s.submit(req("p2"), now=0.15, owner="b")
    s.submit(req("f1", DecodeKind.FINAL), now=0.15, owner="c")
    assert ids(s.next_batch(0.15)) == ["f1"]
    # Its pause has lasted: the utterance likely ended, and its final goes before partials.
    assert s.next_deadline(0.15) == pytest.approx(0.15)  # the queued partial is due already
    assert ids(s.next_batch(0.2)) == ["s1"]
    assert ids(s.next_batch(0.2)) == ["p2"]
    # Queued behind a partial that is not due yet, it says when it becomes urgent.
    s2 = Scheduler(SchedulerConfig(partial_budget_s=0.5, partial_max_wait_s=5))
    s2.submit(spec("s1"), now=0.0, owner="a")
    s2.submit(req("p1"), now=0.0, owner="b")
    assert s2.next_batch(0.1) is None
    assert s2.next_deadline(0.1) == pytest.approx(0.2)
    assert ids(s2.next_batch(0.2)) == ["s1"]
    with pytest.raises(ConfigError):
        SchedulerConfig(speculative_urgent_s=-1.0)


def test_idle_classes_wait_while_live_work_is_queued_even_before_it_is_due() -> None:
    config = SchedulerConfig(partial_budget_s=0.5, partial_max_wait_s=5, speculative_urgent_s=1.0)
    s = Scheduler(config)
    s.submit(spec("s1"), now=0.0, owner="a")
    s.submit(req("o1", DecodeKind.FINAL), now=0.0, owner="file", priority=Priority.OFFLINE)
    s.submit(req("p1"), now=0.0, owner="b")
    # The partial is not due yet, but a speculation now would delay it by a whole decode.
    assert s.next_batch(0.1) is None
    assert s.next_deadline(0.1) == pytest.approx(0.5)
    assert ids(s.next_batch(0.5)) == ["p1"]
    assert ids(s.next_batch(0.5)) == ["s1"]
    assert s.next_deadline(0.5) == 0.5  # offline work waits for nothing but the model
    assert ids(s.next_batch(0.5)) == ["o1"]


def test_offline_batches_hold_one_kind() -> None:
    s = Scheduler(SchedulerConfig(max_batch_size=8))
    for rid, kind in (("a", DecodeKind.FINAL), ("b", DecodeKind.PARTIAL), ("c", DecodeKind.FINAL)):
        s.submit(req(rid, kind), now=0.0, owner="file", priority=Priority.OFFLINE)
    assert ids(s.next_batch(0.0)) == ["a", "c"]
    assert ids(s.next_batch(0.0)) == ["b"]


def test_withdraw_takes_back_a_queued_request_only() -> None:
    s = Scheduler()
    s.submit(req("p1"), now=0.0, owner="a")
    assert s.withdraw("b", "p1") is None  # another owner's id
    ticket = s.withdraw("a", "p1")
    assert ticket is not None and ticket.request.request_id == "p1"
    assert len(s) == 0 and s.withdraw("a", "p1") is None
    assert s.schedule(0.0).dropped == ()  # withdrawn is not dropped: the caller tells the owner


def test_promote_moves_a_speculation_ahead_keeping_its_age() -> None:
    s = Scheduler(SchedulerConfig(partial_budget_s=0.0, partial_max_wait_s=5))
    s.submit(spec("s1"), now=0.0, owner="a")
    s.submit(req("p1"), now=0.1, owner="b")
    assert not s.promote("a", "p1", Priority.FINAL)  # not a's
    assert not s.promote("b", "p1", Priority.SPECULATIVE)  # never demotes
    assert s.promote("a", "s1", Priority.FINAL)
    batch = s.next_batch(0.2)
    assert ids(batch) == ["s1"] and batch is not None and batch[0].submitted == 0.0


def test_a_solo_ticket_is_a_batch_of_its_own() -> None:
    s = Scheduler(SchedulerConfig(max_batch_size=8))
    s.submit(req("f1", DecodeKind.FINAL), now=0.0, owner="a")
    s.submit(req("f2", DecodeKind.FINAL), now=0.0, owner="b", solo=True)
    s.submit(req("f3", DecodeKind.FINAL), now=0.0, owner="c")
    assert ids(s.next_batch(0.0)) == ["f1"]
    assert ids(s.next_batch(0.0)) == ["f2"]
    assert ids(s.next_batch(0.0)) == ["f3"]


# --- refinements ----------------------------------------------------------------------------
def refinement(rid: str) -> DecodeRequest:
    return DecodeRequest(
        audio=AUDIO, kind=DecodeKind.FINAL, request_id=rid, purpose=Purpose.REFINEMENT
    )


def test_refinements_go_after_every_live_class_and_never_count_as_live() -> None:
    s = Scheduler(SchedulerConfig(max_batch_size=4, partial_budget_s=0.0, partial_max_wait_s=5))
    s.submit(refinement("r1"), now=0.0, owner="a")
    s.submit(spec("s1"), now=0.1, owner="a")
    s.submit(req("p1"), now=0.15, owner="b")
    s.submit(req("f1", DecodeKind.FINAL), now=0.2, owner="c")
    assert s.queued(Priority.REFINE) == 1 and s.live_queued == 3
    assert [ids(s.next_batch(0.25)) for _ in range(4)] == [["f1"], ["p1"], ["s1"], ["r1"]]


def test_refinements_and_offline_work_share_idle_time_fairly() -> None:
    s = Scheduler(SchedulerConfig(max_batch_size=1))
    for i in range(3):
        s.submit(req(f"o{i}", DecodeKind.FINAL), now=0.0, owner="file", priority=Priority.OFFLINE)
        s.submit(refinement(f"r{i}"), now=0.0, owner="stream")
    order = [ids(s.next_batch(0.1))[0] for _ in range(6)]
    assert sorted(order[:2]) == ["o0", "r0"] and sorted(order[2:4]) == ["o1", "r1"]


def test_refinements_wait_while_a_live_stream_speaks_or_pauses_or_partials_are_skipped() -> None:
    s = Scheduler(
        SchedulerConfig(partial_max_wait_s=0.5, refine_max_wait_s=10.0, refine_urgent_s=10.0)
    )
    s.submit(refinement("r1"), now=0.0, owner="a")
    assert s.next_batch(0.0, live_pausing=True) is None
    assert s.next_deadline(0.0, live_pausing=True) == pytest.approx(0.05)  # looks again soon
    # Inside an utterance, with no cost known to fit before its final: it waits too.
    assert s.next_batch(0.0, final_headroom_s=0.5) is None
    assert s.next_deadline(0.0, final_headroom_s=0.5) == pytest.approx(0.05)
    s.submit(req("p1"), now=0.0, owner="b")
    assert s.next_batch(0.6) is None  # the partial went stale: partials are being skipped
    assert s.overloaded(0.6)
    assert s.next_batch(1.0) is None
    assert ids(s.next_batch(5.7)) == ["r1"]  # calm again, 5 s after the skip


def test_a_refinement_that_waits_too_long_is_dropped_as_stale_and_counted() -> None:
    s = Scheduler(SchedulerConfig(refine_max_wait_s=2.0))
    s.submit(refinement("r1"), now=0.0, owner="a")
    assert s.next_batch(1.0, live_pausing=True) is None
    assert s.next_deadline(1.0) == 1.0  # not held now: it would go
    out = s.schedule(2.0, live_pausing=True)
    assert out.batch == ()
    (dropped,) = out.dropped
    assert (dropped.ticket.request.request_id, dropped.reason) == ("r1", "stale")
    assert s.refinements_skipped == 1 and len(s) == 0


def test_a_refinement_runs_while_someone_speaks_when_it_fits_before_their_final() -> None:
    s = Scheduler(SchedulerConfig(refine_max_wait_s=10.0, refine_urgent_s=3.0))
    s.costs.observe([refinement("measured")], 0.3)  # a refinement costs about 0.3 s
    s.submit(refinement("r1"), now=0.0, owner="a")
    s.submit(refinement("r2"), now=0.0, owner="b")
    assert s.next_batch(0.0, final_headroom_s=0.2) is None  # the final could be due first
    batch = s.next_batch(0.0, final_headroom_s=0.5)
    assert batch is not None and len(batch) == 1  # one at a time while someone speaks
    assert s.next_batch(0.0, final_headroom_s=0.0, live_pausing=True) is None


def test_a_refinement_that_waited_goes_while_streams_keep_talking() -> None:
    s = Scheduler(SchedulerConfig(refine_max_wait_s=5.0, refine_urgent_s=2.0))
    s.submit(refinement("r1"), now=0.0, owner="a")
    s.submit(refinement("r2"), now=1.0, owner="b")
    assert s.next_batch(1.9, final_headroom_s=0.1) is None  # no cost known: held
    assert ids(s.next_batch(2.0, final_headroom_s=0.1)) == ["r1"]  # the oldest, alone
    assert s.next_batch(2.0, live_pausing=True, final_headroom_s=0.0) is None  # a pause holds
    assert ids(s.next_batch(3.0, final_headroom_s=0.1)) == ["r2"]


# --- a request's purpose ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("purpose", "kind", "priority"),
    [
        (None, DecodeKind.PARTIAL, Priority.PARTIAL),
        (None, DecodeKind.FINAL, Priority.FINAL),
        (Purpose.PARTIAL, DecodeKind.PARTIAL, Priority.PARTIAL),
        (Purpose.FINAL, DecodeKind.FINAL, Priority.FINAL),
        (Purpose.SPECULATIVE, DecodeKind.FINAL, Priority.SPECULATIVE),
        (Purpose.REFINEMENT, DecodeKind.FINAL, Priority.REFINE),
        (Purpose.UPLOAD, DecodeKind.FINAL, Priority.OFFLINE),
        (Purpose.UPLOAD, DecodeKind.PARTIAL, Priority.OFFLINE),
    ],
)
def test_a_request_is_ranked_by_its_purpose_alone(
    purpose: Purpose | None, kind: DecodeKind, priority: Priority
) -> None:
    request = DecodeRequest(audio=AUDIO, kind=kind, purpose=purpose)
    assert Priority.of(request) is priority
    assert request.kind is kind  # what the model sees


@pytest.mark.parametrize(
    ("purpose", "kind"),
    [
        (Purpose.PARTIAL, DecodeKind.FINAL),
        (Purpose.FINAL, DecodeKind.PARTIAL),
        (Purpose.SPECULATIVE, DecodeKind.PARTIAL),
        (Purpose.REFINEMENT, DecodeKind.PARTIAL),
    ],
)
def test_a_purpose_must_fit_the_kind(purpose: Purpose, kind: DecodeKind) -> None:
    with pytest.raises(ValueError):
        DecodeRequest(audio=AUDIO, kind=kind, purpose=purpose)
