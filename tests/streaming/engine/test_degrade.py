"""The degradation controller, on a manual timeline."""

from __future__ import annotations

from kettle.streaming.engine.degrade import DegradeConfig, Degrader, Level
from kettle.transcribe.types import DecodeKind

P, F = DecodeKind.PARTIAL, DecodeKind.FINAL


def test_steps_up_in_order_at_most_once_per_step_and_stops_at_the_top() -> None:
    d = Degrader(DegradeConfig(partial_target_s=1.0, share=0.8, step_s=2.0, calm_s=5.0))
    assert not d.observe(0.0, P, 0.3, 0.4)  # 0.7 s <= 0.8 s: fine
    assert not d.observe(0.5, P, 0.5, 0.4)  # over, but one batch is no streak
    assert d.observe(1.0, P, 0.5, 0.4) and d.level is Level.PARTIALS_STRETCHED
    assert not d.observe(2.0, P, 0.5, 0.4)  # within step_s of the last change
    assert d.observe(3.0, F, 1.0, 0.3) and d.level is Level.PARTIALS_PAUSED
    assert d.pressure(5.0) and d.level is Level.FINALS_GREEDY
    assert not d.pressure(8.0) and d.level is Level.FINALS_GREEDY
    assert [lv.label for lv in Level] == [
        "full",
        "partials_stretched",
        "partials_paused",
        "finals_greedy",
    ]


def test_a_slow_decode_without_queueing_is_no_pressure() -> None:
    d = Degrader(DegradeConfig(partial_target_s=1.0, share=0.8, streak=1))
    assert not d.observe(0.0, P, 0.1, 2.0)  # degrading partials would not shorten this
    assert d.observe(0.0, P, 0.4, 0.5) and d.level is Level.PARTIALS_STRETCHED


def test_full_quality_returns_one_step_per_calm_period() -> None:
    d = Degrader(DegradeConfig(step_s=0.0, calm_s=5.0))
    d.pressure(0.0)
    d.pressure(0.0)
    assert d.level is Level.PARTIALS_PAUSED
    assert not d.tick(4.9)
    assert d.observe(5.0, P, 0.0, 0.1) and d.level is Level.PARTIALS_STRETCHED
    assert not d.tick(9.0)
    assert d.tick(10.0) and d.level is Level.FULL
    assert not d.tick(100.0)


def test_disabled_never_degrades() -> None:
    d = Degrader(DegradeConfig(enabled=False))
    assert not d.pressure(0.0) and d.level is Level.FULL


def test_server_metrics_label_the_current_step() -> None:
    from kettle.streaming.server.metrics import ServerMetrics

    m = ServerMetrics()
    assert m.value("kettle_degradation", {"step": "full"}) == 1
    m.on_degradation(Level.PARTIALS_PAUSED.label)
    assert m.value("kettle_degradation", {"step": "partials_paused"}) == 1
    assert m.value("kettle_degradation", {"step": "full"}) == 0
    assert m.value("kettle_degradation_changes_total", {"step": "partials_paused"}) == 1
