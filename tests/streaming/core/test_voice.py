"""Voice signatures: equal for one voice, apart for another, none for a too short clip."""

from __future__ import annotations

import numpy as np
from kettle.streaming.core.voice import MIN_SIGNATURE_S, change, signature
from kettle.transcribe.model.fake import synth_voice
from kettle.transcribe.types import SAMPLE_RATE


def test_a_voice_is_near_itself_and_far_from_another() -> None:
    low, again, high = synth_voice(2.0), synth_voice(3.0), synth_voice(2.0, f0=260.0)
    a, b, c = signature(low), signature(again), signature(high)
    assert a is not None and b is not None and c is not None
    assert change(a, b) < 0.3 < 1.0 < change(a, c)


def test_level_does_not_change_the_signature() -> None:
    a, b = signature(synth_voice(2.0)), signature(synth_voice(2.0, amplitude=0.05))
    assert a is not None and b is not None
    assert change(a, b) < 0.3


def test_too_short_audio_has_no_signature() -> None:
    short = np.zeros(int(MIN_SIGNATURE_S * SAMPLE_RATE) - 1, dtype=np.float32)
    assert signature(short) is None


def test_pitch_of_a_voice() -> None:
    low, high = signature(synth_voice(2.0)), signature(synth_voice(2.0, f0=220.0))
    assert low is not None and high is not None
    assert low.pitch_hz is not None and abs(low.pitch_hz - 140.0) < 10.0
    assert high.pitch_hz is not None and abs(high.pitch_hz - 220.0) < 15.0
