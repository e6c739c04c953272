"""transcribe.types: the encoder's input length for a window."""

from __future__ import annotations

import pytest
from kettle.transcribe.types import FULL_ENCODER_FRAMES, SAMPLE_RATE, encoder_frames


@pytest.mark.parametrize(
    ("seconds", "pad_s", "frames"),
    [
        (3.0, None, FULL_ENCODER_FRAMES),  # Whisper's 30 s
        (3.0, 1.0, 400),  # window + pad, whole seconds
        (3.2, 1.0, 500),  # rounded up, never cut
        (0.0, 0.0, 100),  # never empty
        (29.5, 1.0, FULL_ENCODER_FRAMES),  # never past 30 s
        (10.0, 30.0, FULL_ENCODER_FRAMES),
    ],
)
def test_window_plus_pad_in_whole_seconds(seconds: float, pad_s: float | None, frames: int) -> None:
    assert encoder_frames(int(seconds * SAMPLE_RATE), pad_s) == frames
