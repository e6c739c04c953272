"""The speculative final's state and the tail it fills when asked for at the pause's start."""

from __future__ import annotations

import numpy as np
from kettle.streaming.core.speculation import Speculation, fill_tail
from kettle.transcribe.types import DecodeKind, DecodeResult


def test_fill_tail_mirrors_the_pause_without_a_seam() -> None:
    window = np.arange(10, dtype=np.float32)
    out = fill_tail(window, silence=4, missing=3)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [*range(10), 8, 7, 6])


def test_fill_tail_reflects_back_and_forth_when_the_pause_is_short() -> None:
    out = fill_tail(np.arange(10, dtype=np.float32), silence=3, missing=7)
    # Only the pause (7, 8, 9) is mirrored: never the speech before it.
    np.testing.assert_array_equal(out[10:], [8, 7, 8, 9, 8, 7, 8])


def test_fill_tail_with_no_pause_to_mirror_holds_the_last_sample() -> None:
    np.testing.assert_array_equal(fill_tail(np.ones(4, np.float32), 0, 2), np.ones(6))
    np.testing.assert_array_equal(fill_tail(np.zeros(0, np.float32), 5, 2), np.zeros(2))
    window = np.arange(4, dtype=np.float32)
    assert fill_tail(window, 2, 0) is window


def test_a_speculation_is_ready_for_its_speech_ended_anywhere_in_its_silence() -> None:
    spec = Speculation()
    result = DecodeResult(request_id="r", kind=DecodeKind.FINAL, text="hi", words=(), language="en")
    spec.request(window_end=100, target=80, speech_end=60)
    assert spec.accept(100, result)
    assert spec.ready(80, 60) is result  # at its endpoint
    assert spec.ready(70, 60) is result  # finalized in the hush, before the pause
    assert spec.ready(80, 65) is None  # more speech came
    assert spec.ready(90, 60) is None and spec.ready(55, 60) is None
    assert not spec.accept(120, result)  # a stale answer
    spec.invalidate()
    assert spec.ready(80, 60) is None and not spec.requested
