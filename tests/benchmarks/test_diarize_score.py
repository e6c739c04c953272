import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from _diarize_score import best_mapping, der, share_right, true_speaker


def test_best_mapping_is_one_to_one_and_maximal():
    pairs = [(5, 0), (5, 0), (7, 1), (7, 0), (9, 1)]
    mapping = best_mapping(pairs)
    assert mapping[5] == 0
    assert mapping[7] != mapping[5]
    assert share_right(pairs) == (3, 5)  # 5->0, and only one of 7, 9 may take 1
    assert share_right([]) == (0, 0)


def test_labels_swapped_are_all_right():
    assert share_right([(1, 0), (0, 1), (1, 0)]) == (3, 3)


def test_true_speaker_by_overlap_then_nearest():
    turns = [(0.0, 2.0, 0), (2.5, 5.0, 1)]
    assert true_speaker(turns, 1.5, 3.5) == 1
    assert true_speaker(turns, 2.1, 2.2) == 0


def test_der_perfect_swapped_labels():
    ref = [(0.0, 1.0, 0), (1.5, 2.0, 1)]
    assert der(ref, [(0.0, 1.0, 1), (1.5, 2.0, 0)])["der"] == 0.0


def test_der_components():
    ref = [(0.0, 1.0, 0), (1.0, 2.0, 1)]
    hyp = [(0.0, 1.5, 0), (2.0, 2.5, 1)]
    result = der(ref, hyp)
    assert result["missed"] == pytest.approx(0.25)
    assert result["false_alarm"] == pytest.approx(0.25)
    assert result["confusion"] == pytest.approx(0.25)
    assert result["der"] == pytest.approx(0.75)
