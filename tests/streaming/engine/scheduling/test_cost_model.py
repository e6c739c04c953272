"""CostModel's online correction of a measured profile."""

from __future__ import annotations

import numpy as np
import pytest
from kettle.streaming.engine.scheduling.cost_model import CostModel
from kettle.transcribe.model.costs import CostProfile
from kettle.transcribe.types import SAMPLE_RATE, DecodeKind, DecodeRequest

PARTIAL = DecodeRequest(
    audio=np.zeros(3 * SAMPLE_RATE, dtype=np.float32), kind=DecodeKind.PARTIAL, beam_size=1
)


def test_a_profile_measured_on_a_busy_machine_is_corrected_by_what_batches_take() -> None:
    # This machine's cached profile once read a 0.76 s encoder pass and 0.19 s a token, where
    # the model takes 0.17 s and 0.006 s: about 27x too slow for a partial.
    slow = CostModel({DecodeKind.PARTIAL: CostProfile(((1, 0.76),), ((1, 0.19),))})
    truth = CostProfile(((1, 0.17),), ((1, 0.006),)).batch([16])
    assert slow.predict([PARTIAL]) == pytest.approx(0.76 + 16 * 0.19)
    for _ in range(40):
        slow.observe([PARTIAL], truth)
    assert slow.predict([PARTIAL]) == pytest.approx(truth, rel=0.01)


def partials(seconds: float, n: int) -> list[DecodeRequest]:
    audio = np.zeros(int(seconds * SAMPLE_RATE), dtype=np.float32)
    return [DecodeRequest(audio=audio, kind=DecodeKind.PARTIAL, beam_size=1, encode_min_s=5.0)] * n


# This EPYC's measured profile (2 threads): a pass on 30 s is 13x one on 5 s.
ON_30_S = CostProfile(((1, 0.211), (2, 0.482)), ((1, 0.00266), (8, 0.00687)))
BY_LENGTH = CostProfile(
    ON_30_S.encode_s, ON_30_S.step_s, encode_frames_s=((500, 0.016), (1500, 0.052), (3000, 0.211))
)


def test_short_partials_are_batched_once_the_encoder_is_priced_by_window_length() -> None:
    by_length = CostModel({DecodeKind.PARTIAL: BY_LENGTH})
    assert by_length.best_batch(partials(3, 1), 8) == 1
    assert (by_length.best_batch(partials(3, 8), 8) or 0) >= 2  # decoder steps shared
    # Priced as 30 s windows, the encoder seemed to grow faster than the batch: never batched.
    on_30_s = CostModel({DecodeKind.PARTIAL: ON_30_S})
    assert on_30_s.best_batch(partials(3, 8), 8) == 1


def test_a_window_is_predicted_on_its_own_encoder_length() -> None:
    model = CostModel({DecodeKind.PARTIAL: BY_LENGTH})
    short, long = model.predict(partials(3, 1)), model.predict(partials(14, 1))
    assert short is not None and long is not None
    assert short == pytest.approx(0.016 + (4 + 12) * 0.00266)  # 3 s: encoded on 5 s
    assert long > short + 0.03  # 14 s: on 15 s, and more tokens
