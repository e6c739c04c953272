"""transcribe.types: the encoder's input length for a window."""

from __future__ import annotations

import pytest
from kettle.transcribe.types import (
    FULL_ENCODER_FRAMES,
    SAMPLE_RATE,
    encoder_frames,
    encoder_window_limit,
)


@pytest.mark.parametrize(
    ("seconds", "min_s", "frames"),
    [
        (3.0, None, FULL_ENCODER_FRAMES),  # Whisper's 30 s
        (3.0, 10.0, 1000),  # at least min_s
        (12.0, 10.0, 1300),  # else the window and a second of silence
        (12.2, 10.0, 1400),  # in whole seconds, rounded up
        (0.0, 0.0, 100),  # never empty
        (29.5, 10.0, FULL_ENCODER_FRAMES),  # never past 30 s
        (3.0, 30.0, FULL_ENCODER_FRAMES),
    ],
)
def test_at_least_min_s_else_window_and_a_second(
    seconds: float, min_s: float | None, frames: int
) -> None:
    assert encoder_frames(int(seconds * SAMPLE_RATE), min_s) == frames


@pytest.mark.parametrize("min_s", [10.0, 12.0, 1.0])  # whole seconds, as encoded
def test_the_window_limit_is_the_longest_window_encoded_on_min_s(min_s: float) -> None:
    limit = encoder_window_limit(min_s)
    assert encoder_frames(limit, min_s) == round(min_s * 100)
    assert encoder_frames(limit + 160, min_s) > round(min_s * 100)  # one 10 ms frame more
    assert encoder_window_limit(None) == 30 * SAMPLE_RATE
