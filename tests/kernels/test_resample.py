"""Resampling to 16 kHz through soxr: length, frequency, streaming equivalence, errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kettle.kernels.resample import StreamResampler, resample

RATES = [8000, 11025, 22050, 24000, 32000, 44100, 48000]


def _sine(rate: int, freq: float, seconds: float) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return (0.5 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def _peak_hz(x: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(x * np.hanning(x.size)))
    return float(np.fft.rfftfreq(x.size, 1 / rate)[np.argmax(spectrum)])


@pytest.mark.parametrize("rate", RATES)
def test_resample_keeps_length_and_frequency(rate: int) -> None:
    x = _sine(rate, 440.0, 2.0)
    y = resample(x, rate)
    assert y.dtype == np.float32
    assert y.shape == (32000,)
    assert abs(_peak_hz(y, 16000) - 440.0) < 1.0
    # Amplitude preserved away from the edges (a pass-band tone).
    assert abs(np.abs(y[4000:-4000]).max() - 0.5) < 0.01


@pytest.mark.parametrize("rate", [22050, 44100, 48000])
def test_content_above_new_nyquist_is_removed(rate: int) -> None:
    y = resample(_sine(rate, 9000.0, 1.0), rate)  # 9 kHz cannot exist at 16 kHz
    assert np.sqrt(np.mean(y[2000:-2000] ** 2)) < 0.01


def test_same_rate_is_a_copy_and_upsampling_works() -> None:
    x = _sine(16000, 300.0, 0.5)
    y = resample(x, 16000)
    np.testing.assert_array_equal(y, x)
    assert y is not x
    up = resample(x, 16000, 48000)
    assert up.shape == (24000,) and abs(_peak_hz(up, 48000) - 300.0) < 2.0
    assert resample(np.zeros(0, np.float32), 44100).shape == (0,)
    assert resample(np.zeros(100, np.int16), 8000).dtype == np.float32


@settings(max_examples=30, deadline=None)
@given(
    data=st.data(),
    rate=st.sampled_from([8000, 16000, 22050, 44100, 48000]),
    length=st.integers(0, 20000),
)
def test_stream_equals_one_shot_for_any_chunking(
    data: st.DataObject, rate: int, length: int
) -> None:
    x = np.random.default_rng(length).standard_normal(length).astype(np.float32) * 0.1
    cuts = sorted(data.draw(st.lists(st.integers(0, length), max_size=8)))
    stream = StreamResampler(rate)
    pieces, start = [], 0
    for cut in [*cuts, length]:
        pieces.append(stream.process(x[start:cut]))
        start = cut
    pieces.append(stream.flush())
    np.testing.assert_array_equal(np.concatenate(pieces), resample(x, rate))


def test_stream_flush_resets_for_a_new_stream() -> None:
    stream = StreamResampler(44100)
    x = _sine(44100, 1000.0, 0.3)
    first = np.concatenate([stream.process(x), stream.flush()])
    second = np.concatenate([stream.process(x), stream.flush()])
    np.testing.assert_array_equal(first, second)
    assert stream.flush().shape == (0,)
    assert (stream.in_rate, stream.out_rate) == (44100, 16000)


# cast(Any, ...): a wrong type on purpose, which the kernels refuse at run time.
@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: resample(np.zeros(10, np.float32), 0), "in_rate"),
        (lambda: resample(np.zeros(10, np.float32), cast(Any, 16000.5)), "in_rate"),
        (lambda: resample(np.zeros(10, np.float32), 16000, -1), "out_rate"),
        (lambda: resample(np.zeros((10, 2), np.float32), 8000), "1-D"),
        (lambda: resample(cast(Any, [0.0]), 8000), "numpy array"),
        (lambda: StreamResampler(True), "in_rate"),
        (lambda: StreamResampler(8000).process(np.zeros((2, 2), np.float32)), "1-D"),
    ],
)
def test_bad_arguments_raise_value_error(call: Callable[[], object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()
