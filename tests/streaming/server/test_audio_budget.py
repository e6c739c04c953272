"""Audio admission: a burst passes untouched, then the rate holds; pauses, not losses."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kettle.streaming.protocols.limits import Limits
from kettle.streaming.server.audio_budget import AudioAdmission
from kettle.transcribe.errors import ConfigError


def test_real_time_client_never_pauses() -> None:
    adm = AudioAdmission(Limits(), now=0.0)
    for i in range(1, 36_001):  # an hour of 100 ms messages, each on time
        assert adm.admit(0.1, now=i * 0.1) == 0.0
    assert adm.audio_s == pytest.approx(3600.0)
    assert adm.paused_s == 0.0


def test_initial_burst_passes_then_twice_real_time() -> None:
    adm = AudioAdmission(Limits(audio_rate=2.0, audio_burst_s=10.0), now=0.0)
    for _ in range(100):  # 10 s of audio at once
        assert adm.admit(0.1, now=0.0) == 0.0
    # Over the burst: the reader pauses so the next read comes at 2x real time.
    assert adm.admit(1.0, now=0.0) == pytest.approx(0.5)
    assert adm.pause_s(now=0.25) == pytest.approx(0.25)
    assert adm.pause_s(now=0.5) == 0.0


def test_flooding_client_is_held_to_the_rate() -> None:
    """A client sending 50x real time, whose reader obeys every pause, gets 2x on average."""
    adm = AudioAdmission(Limits(audio_rate=2.0, audio_burst_s=10.0), now=0.0)
    now = 0.0
    while adm.audio_s < 200.0:
        now += 0.1 / 50  # the client could send the next 100 ms this soon
        now += adm.admit(0.1, now)  # the reader waits as told
    # 10 s burst, then 190 s at 2x: 95 s of wall time.
    assert now == pytest.approx(95.0, abs=0.1)


def test_a_client_whose_backlog_grows_is_admitted_at_real_time() -> None:
    adm = AudioAdmission(Limits(audio_rate=2.0, max_backlog_s=120.0), now=0.0)
    assert adm.slow_backlog_s == pytest.approx(40.0)
    adm.set_overloaded(False, now=0.0, undecoded_s=40.0)
    assert adm.rate == 2.0
    adm.set_overloaded(False, now=0.0, undecoded_s=40.5)  # the model gives it less than 2x
    assert adm.rate == 1.0
    adm.set_overloaded(False, now=0.0, undecoded_s=10.0)  # caught up
    assert adm.rate == 2.0


def test_idle_refills_only_up_to_the_burst() -> None:
    adm = AudioAdmission(Limits(audio_rate=2.0, audio_burst_s=10.0), now=0.0)
    assert adm.admit(10.0, now=0.0) == 0.0
    assert adm.admit(10.0, now=1000.0) == 0.0  # a long pause refills to 10 s, not 2000 s
    assert adm.admit(1.0, now=1000.0) == pytest.approx(0.5)


def test_clock_going_back_is_harmless() -> None:
    adm = AudioAdmission(Limits(), now=5.0)
    adm.admit(12.0, now=5.0)
    assert adm.pause_s(now=4.0) == pytest.approx(1.0)


def test_length_in_audio_time_and_backlog() -> None:
    adm = AudioAdmission(Limits(max_session_s=3.0, max_backlog_s=2.0), now=0.0)
    adm.admit(2.9, now=10.0)
    assert not adm.over_length()
    adm.admit(0.1, now=10.0)
    assert adm.over_length()
    assert not adm.over_backlog(2.0) and adm.over_backlog(2.01)
    assert "2.5 s" in adm.backlog_message(2.5) and "limit of 2 s" in adm.backlog_message(2.5)


@pytest.mark.parametrize(
    "kwargs", [{"audio_rate": 0.0}, {"audio_burst_s": -1.0}, {"max_backlog_s": float("inf")}]
)
def test_bad_config_is_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        Limits(**kwargs)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 5), st.floats(0, 2)), min_size=1, max_size=50))
def test_admitted_audio_never_beats_burst_plus_rate(steps: list[tuple[float, float]]) -> None:
    """Whatever the client does, an obedient reader admits at most burst + rate * time."""
    config = Limits(audio_rate=2.0, audio_burst_s=10.0)
    adm = AudioAdmission(config, now=0.0)
    now = 0.0
    for audio, gap in steps:
        now += gap
        before = adm.audio_s
        now += adm.admit(audio, now)
        # Everything before this message respected the budget.
        assert before <= config.audio_burst_s + config.audio_rate * now + 1e-9


def test_overload_lowers_the_rate_to_real_time() -> None:
    adm = AudioAdmission(Limits(audio_rate=2.0, audio_burst_s=10.0), now=0.0)
    assert adm.admit(12.0, now=0.0) == pytest.approx(1.0)  # 2 s over, at 2x
    adm.set_overloaded(True, now=0.0)
    assert adm.rate == 1.0
    assert adm.pause_s(now=0.0) == pytest.approx(2.0)  # the same debt, at 1x
    assert adm.pause_s(now=1.0) == pytest.approx(1.0)
    adm.set_overloaded(False, now=1.0)  # one second refilled at 1x, the rest at 2x
    assert adm.pause_s(now=1.0) == pytest.approx(0.5)
    assert adm.pause_s(now=1.5) == 0.0
