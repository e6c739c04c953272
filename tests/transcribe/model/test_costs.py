"""The cost profile's predictions from its measured points."""

from __future__ import annotations

import pytest
from kettle.transcribe.model.costs import CostProfile


def test_interpolates_and_extrapolates_linearly() -> None:
    p = CostProfile(((2, 0.7), (1, 0.35)), ((1, 0.01), (8, 0.08)))
    assert p.encode_s == ((1, 0.35), (2, 0.7))  # sorted
    assert p.encode(1) == pytest.approx(0.35)
    assert p.encode(4) == pytest.approx(1.4)
    assert p.step(4) == pytest.approx(0.04)
    assert p.step(16) == pytest.approx(0.16)


def test_a_batch_runs_as_long_as_its_longest_request_and_beams_are_rows() -> None:
    p = CostProfile(((1, 0.3), (2, 0.6)), ((1, 0.01), (10, 0.1)))
    assert p.batch([]) == 0.0
    assert p.batch([5, 20]) == pytest.approx(0.6 + 20 * 0.02)
    assert p.batch([10], beam=5) == pytest.approx(0.3 + 10 * 0.05)
    assert p.batch([10], encoded=0) == pytest.approx(10 * 0.01)


def test_one_point_scales_proportionally_and_bad_points_are_refused() -> None:
    p = CostProfile(((1, 0.3),), ((1, 0.01),))
    assert p.encode(3) == pytest.approx(0.9)
    with pytest.raises(ValueError):
        CostProfile((), ((1, 0.01),))
    with pytest.raises(ValueError):
        CostProfile(((0, 0.3),), ((1, 0.01),))


def test_windows_cost_their_own_length_where_lengths_were_measured() -> None:
    lengths = ((500, 0.016), (1500, 0.052), (3000, 0.211))
    p = CostProfile(((1, 0.211), (2, 0.482)), ((1, 0.003),), encode_frames_s=lengths)
    assert p.encode_windows([]) == 0.0
    assert p.encode_windows([500]) == pytest.approx(0.016)
    assert p.encode_windows([1000]) == pytest.approx(0.034)  # between the measured lengths
    assert p.encode_windows([500, 1500]) == pytest.approx(0.068)  # each its own pass
    assert p.batch([10, 10], frames=[500, 500]) == pytest.approx(0.032 + 10 * 0.006)
    # Only the encoded windows pay the encoder: the longest ones, to err on the slow side.
    assert p.batch([10, 10], frames=[500, 1500], encoded=1) == pytest.approx(0.052 + 0.06)
    assert p.batch([10], frames=[3000]) == pytest.approx(p.batch([10]))  # 30 s: as before


def test_a_profile_without_window_lengths_prices_every_window_as_30_s() -> None:
    p = CostProfile(((1, 0.2), (2, 0.5)), ((1, 0.003),))
    assert p.encode_windows([500, 500]) == pytest.approx(0.5)
    assert p.batch([10, 10], frames=[500, 500]) == pytest.approx(p.batch([10, 10]))
    with pytest.raises(ValueError):
        CostProfile(((1, 0.2),), ((1, 0.003),), encode_frames_s=((0, 0.1),))


def test_a_stored_profile_without_window_lengths_still_loads() -> None:
    data = {"encode_s": {"1": 0.2}, "step_s": {"1": 0.003}, "device": "cpu"}
    assert CostProfile.from_dict(data).encode_frames_s == ()
    measured = CostProfile(((1, 0.2),), ((1, 0.003),), encode_frames_s=((500, 0.02),))
    assert CostProfile.from_dict(measured.to_dict()) == measured
