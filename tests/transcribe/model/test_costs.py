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
