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
