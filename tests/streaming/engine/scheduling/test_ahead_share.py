"""The model-time share of streams ahead of real time: alone, and inside the scheduler."""

from __future__ import annotations

import pytest
from kettle.streaming.engine.scheduling.ahead_share import AheadShare
from kettle.streaming.engine.scheduling.scheduler import Priority, Scheduler, SchedulerConfig
from kettle.transcribe.types import DecodeKind

from tests.streaming.engine.scheduling.conftest import feed_realtime, final, ids, partial


def test_the_bucket_opens_once_the_share_has_paid_for_the_time_used() -> None:
    share = AheadShare(0.25)
    assert share.open(0.0) and share.opens_at(0.0) == 0.0
    share.used(1.0, now=11.0)  # one second of the model, from 10 s to 11 s
    assert not share.open(11.0)
    assert share.opens_at(11.0) == pytest.approx(14.0)  # 1 s is a quarter of 10..14 s
    assert not share.open(13.9) and share.open(14.0)
    share.used(0.5, now=20.0)  # idle time earns no credit: 0.5 s costs 2 s again
    assert share.opens_at(20.0) == pytest.approx(21.5)


@pytest.mark.parametrize("share", [0.0, -0.1, 1.5])
def test_a_share_outside_zero_to_one_is_refused(share: float) -> None:
    with pytest.raises(ValueError, match="share"):
        AheadShare(share)


def flooded(s: Scheduler, until: float) -> None:
    """The flooder sends 10 s of audio per second until ``until``."""
    for i in range(int(until * 10)):
        s.observe_audio("flooder", 1.0, i * 0.1)


def beside_a_live_stream(partial_budget_s: float = SchedulerConfig.partial_budget_s) -> Scheduler:
    """A scheduler (batches of one) that has seen a live stream send 10 s in real time and a
    flooder send 10 s of audio per second, both until 10 s."""
    s = Scheduler(SchedulerConfig(max_batch_size=1, partial_budget_s=partial_budget_s))
    feed_realtime(s, "live", 0.0, 10.0)
    flooded(s, 10.0)
    return s


def served(s: Scheduler, now: float, seconds: float) -> list[str]:
    """Run the next batch at ``now``, taking ``seconds`` of the model; its request ids."""
    batch = s.next_batch(now)
    if not batch:
        return []
    s.observe_batch(batch, seconds, now + seconds)
    return ids(batch)


def test_a_stream_ahead_gets_a_quarter_of_the_model_while_a_live_one_is_open() -> None:
    s = beside_a_live_stream()
    for i in range(3):
        s.submit(final(f"flood{i}"), now=10.0, owner="flooder")
    assert served(s, 10.0, 1.0) == ["flood0"]  # the model was idle: it goes
    assert s.holding_ahead(11.0)
    assert s.next_batch(11.0) is None  # its next one waits for its share...
    assert s.next_deadline(11.0) == pytest.approx(14.0)  # ...until 1 s is a quarter of 4 s
    s.submit(final("live"), now=12.0, owner="live")
    assert served(s, 12.0, 0.5) == ["live"]  # a live stream's request is never held
    feed_realtime(s, "live", 10.0, 4.0)
    flooded(s, 14.0)
    assert served(s, 14.0, 1.0) == ["flood1"]


def test_with_no_live_stream_open_a_stream_ahead_has_the_whole_model() -> None:
    s = Scheduler(SchedulerConfig(max_batch_size=1))
    flooded(s, 10.0)
    for i in range(3):
        s.submit(final(f"flood{i}"), now=10.0, owner="flooder")
    assert served(s, 10.0, 1.0) == ["flood0"]
    assert not s.holding_ahead(11.0)
    assert served(s, 11.0, 1.0) == ["flood1"]
    s.forget("flooder")  # a live stream that closed protects nothing either
    feed_realtime(s, "gone", 0.0, 10.0)
    s.forget("gone")
    assert served(s, 12.0, 1.0) == ["flood2"]


def test_a_held_partial_that_goes_stale_is_dropped_without_declaring_overload() -> None:
    s = beside_a_live_stream()
    s.submit(final("flood0"), now=10.0, owner="flooder")
    assert served(s, 10.0, 2.0) == ["flood0"]
    s.submit(partial("flood-p"), now=12.0, owner="flooder")
    out = s.schedule(13.0)
    assert out.batch == ()
    dropped = out.dropped
    assert [d.ticket.request.request_id for d in dropped] == ["flood-p"]
    assert dropped[0].reason == "overload"  # its session stretches its partial interval
    assert not s.overloaded(13.0)  # but readiness and admission see no overload
    assert s.queued(Priority.PARTIAL) == 0


def test_a_held_speculation_does_not_take_the_idle_model_either() -> None:
    s = beside_a_live_stream()
    s.submit(final("flood0"), now=10.0, owner="flooder")
    assert served(s, 10.0, 1.0) == ["flood0"]
    spec = final("flood-spec")
    s.submit(spec, now=11.0, owner="flooder", priority=Priority.SPECULATIVE)
    assert s.next_batch(11.0) is None and s.next_deadline(11.0) == pytest.approx(14.0)
    assert spec.kind is DecodeKind.FINAL


def test_a_live_speculation_goes_before_a_final_of_a_stream_ahead() -> None:
    """A live stream's speculative final is its user's final about to be due: the final of a
    stream ahead of real time, though of a more urgent class, waits for it."""
    s = beside_a_live_stream()
    s.submit(final("flood"), now=9.0, owner="flooder")
    s.submit(final("live-spec"), now=10.0, owner="live", priority=Priority.SPECULATIVE)
    assert served(s, 10.0, 0.3) == ["live-spec"]
    assert served(s, 10.3, 0.3) == ["flood"]


def test_requests_of_a_stream_ahead_wait_for_live_partials_but_not_for_offline_work() -> None:
    s = beside_a_live_stream(partial_budget_s=0.0)
    s.submit(final("upload"), now=8.0, owner="call", priority=Priority.OFFLINE)
    s.submit(final("flood"), now=9.0, owner="flooder")
    s.submit(partial("live-p"), now=10.0, owner="live")
    assert served(s, 10.0, 0.1) == ["live-p"]
    assert served(s, 10.1, 0.1) == ["flood"]
    assert served(s, 10.2, 0.1) == ["upload"]


def test_requests_of_a_stream_ahead_do_not_start_while_a_live_stream_pauses() -> None:
    s = beside_a_live_stream()
    s.submit(final("flood"), now=10.0, owner="flooder")
    # The live stream's utterance is pausing: its final may be asked for any moment.
    assert s.next_batch(10.0, live_pausing=True) is None
    assert s.next_deadline(10.0, live_pausing=True) == pytest.approx(10.05)  # look again
    assert ids(s.next_batch(10.05, live_pausing=False)) == ["flood"]


def test_work_of_a_stream_ahead_is_not_starved_by_pauses_that_never_end() -> None:
    """With many live streams one is nearly always pausing: after a while it goes anyway."""
    s = beside_a_live_stream()
    s.submit(final("flood0"), now=10.0, owner="flooder")
    s.submit(final("flood1"), now=10.0, owner="flooder")
    assert s.next_batch(11.9, live_pausing=True) is None
    assert ids(s.next_batch(12.0, live_pausing=True)) == ["flood0"]  # waited 2 s
    feed_realtime(s, "live", 10.0, 10.0)
    flooded(s, 20.0)
    assert s.next_batch(13.9, live_pausing=True) is None  # 2 s since its last batch, again
    assert ids(s.next_batch(14.0, live_pausing=True)) == ["flood1"]
