"""PCM decoding: s16le / f32le / u-law, mix-down, and the per-session stream decoder."""

from __future__ import annotations

import importlib
import importlib.util
import warnings
from collections.abc import Callable
from typing import Any, cast

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kettle.kernels.pcm import (
    PcmStreamDecoder,
    alaw_table,
    decode_alaw,
    decode_f32le,
    decode_mulaw,
    decode_s16le,
    mix_down,
    mulaw_table,
)
from kettle.kernels.resample import resample


def test_decode_s16le_values() -> None:
    data = np.array([0, 1, -1, 32767, -32768, 16384], dtype="<i2").tobytes()
    out = decode_s16le(data)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [0, 1 / 32768, -1 / 32768, 32767 / 32768, -1.0, 0.5])
    assert decode_s16le(b"").shape == (0,)
    # Explicitly little-endian whatever the host: 0x0100 is 256 / 32768.
    assert decode_s16le(b"\x00\x01")[0] == 256 / 32768
    assert decode_s16le(bytearray(b"\x00\x40"))[0] == 0.5
    assert decode_s16le(memoryview(b"\x00\x40"))[0] == 0.5


def test_decode_f32le_values_clipped_and_non_finite() -> None:
    values = np.array([0.0, 0.25, -1.0, 1.0], dtype="<f4")
    np.testing.assert_array_equal(decode_f32le(values.tobytes()), values)
    loud = np.array([-1.5, 3.0, -6.8e15, 0.5], dtype="<f4")
    np.testing.assert_array_equal(decode_f32le(loud.tobytes()), [-1.0, 1.0, -1.0, 0.5])
    bad = np.array([np.nan, np.inf, -np.inf, 0.5], dtype="<f4").tobytes()
    np.testing.assert_array_equal(decode_f32le(bad), [0.0, 1.0, -1.0, 0.5])


# cast(Any, ...): a wrong type on purpose, which the kernels refuse at run time.
@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: decode_s16le(b"\x00"), "2-byte"),
        (lambda: decode_f32le(b"\x00" * 6), "4-byte"),
        (lambda: decode_s16le(cast(Any, "abc")), "bytes"),
        (lambda: decode_mulaw(cast(Any, [1, 2])), "bytes"),
        (lambda: mix_down(np.zeros(5, np.float32), 2), "2-channel"),
        (lambda: mix_down(np.zeros(4, np.float32), 0), "channels"),
        (lambda: mix_down(np.zeros((2, 2), np.float32), 2), "1-D"),
        (lambda: PcmStreamDecoder("opus", 16000, 1), "encoding"),
        (lambda: PcmStreamDecoder("pcm_s16le", 7999, 1), "sample_rate"),
        (lambda: PcmStreamDecoder("pcm_s16le", 48001, 1), "sample_rate"),
        (lambda: PcmStreamDecoder("pcm_s16le", cast(Any, 16000.0), 1), "sample_rate"),
        (lambda: PcmStreamDecoder("pcm_s16le", 16000, 9), "channels"),
        (lambda: PcmStreamDecoder("pcm_s16le", 16000, 0), "channels"),
        (lambda: PcmStreamDecoder("mulaw", 8000, 1).feed(cast(Any, "text")), "bytes"),
    ],
)
def test_bad_arguments_raise_value_error(call: Callable[[], object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()


def _g711_reference(code: int) -> int:
    """G.711 u-law expansion (16-bit) written from the standard's segment table, independently
    of the kernel's shift formula: the code is stored bit-inverted; bit 7 set (after inverting)
    means negative; segment s (bits 4-6) starts at 33 * (2**s - 1) in 14-bit units with steps of
    2**(s + 1); step q is the low nibble; 16-bit output is 4x the 14-bit value."""
    inverted = 0xFF - code
    negative = inverted >= 128
    segment = (inverted % 128) // 16
    step = inverted % 16
    magnitude = 4 * (33 * (2**segment - 1) + step * 2 ** (segment + 1))
    return -magnitude if negative else magnitude


def test_mulaw_table_against_references() -> None:
    table = mulaw_table()
    assert table.shape == (256,) and table.dtype == np.float32 and not table.flags.writeable
    ref = np.array([_g711_reference(c) for c in range(256)], dtype=np.float64) / 32768
    np.testing.assert_array_equal(table, ref.astype(np.float32))
    # Known values: 0xFF and 0x7F are the two zeros, 0x00 / 0x80 the extremes.
    assert table[0xFF] == 0.0 and table[0x7F] == 0.0
    assert table[0x00] == -32124 / 32768 and table[0x80] == 32124 / 32768
    assert table[0xFE] == 8 / 32768 and table[0x7E] == -8 / 32768
    # Segment starts, magnitudes 132 * (2**s - 1) in 16-bit units.
    for segment, value in enumerate([0, 132, 396, 924, 1980, 4092, 8316, 16764]):
        code = 0xFF - segment * 16
        assert table[code] * 32768 == value and table[code & 0x7F] * 32768 == -value
    # Python's own C implementation (audioop, present up to 3.12), when available.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        audioop = importlib.util.find_spec("audioop") and importlib.import_module("audioop")
    if audioop:
        want = np.frombuffer(audioop.ulaw2lin(bytes(range(256)), 2), dtype="<i2") / 32768
        np.testing.assert_array_equal(table, want.astype(np.float32))
    # The continuous u-law curve (mu = 255) that the segments approximate: compressing each
    # decoded value lands within two code steps of the code itself.
    inverted = 0xFF - np.arange(256)
    x = np.abs(table.astype(np.float64)) / (32124 / 32768)
    position = np.log1p(255 * x) / np.log(256) * 127
    assert np.abs(position - inverted % 128).max() < 2.0
    # Antisymmetric halves; magnitude falls strictly towards 0x7F and 0xFF.
    np.testing.assert_array_equal(table[:128], -table[128:])
    assert np.all(np.diff(table[:128]) > 0) and np.all(np.diff(table[128:]) < 0)
    np.testing.assert_array_equal(decode_mulaw(bytes([0xFF, 0x00, 0x80])), table[[0xFF, 0, 0x80]])


def test_alaw_table_against_references() -> None:
    table = alaw_table()
    assert table.shape == (256,) and table.dtype == np.float32 and not table.flags.writeable
    # G.711 A-law: 0xD5 / 0x55 are the smallest magnitudes (+-8), 0xAA / 0x2A the largest.
    assert table[0xD5] * 32768 == 8 and table[0x55] * 32768 == -8
    assert table[0xAA] * 32768 == 32256 and table[0x2A] * 32768 == -32256
    # Segment starts (step 0 of each segment): 8, 264, 528, 1056, ... in 16-bit units.
    for segment, value in enumerate([8, 264, 528, 1056, 2112, 4224, 8448, 16896]):
        code = (0x80 | segment << 4) ^ 0x55
        assert table[code] * 32768 == value and table[code ^ 0x80] * 32768 == -value
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        audioop = importlib.util.find_spec("audioop") and importlib.import_module("audioop")
    if audioop:
        want = np.frombuffer(audioop.alaw2lin(bytes(range(256)), 2), dtype="<i2") / 32768
        np.testing.assert_array_equal(table, want.astype(np.float32))
    np.testing.assert_array_equal(decode_alaw(bytes([0xD5, 0x2A])), table[[0xD5, 0x2A]])
    decoder = PcmStreamDecoder("alaw", 8000, 1)
    out = np.concatenate([decoder.feed(bytes([0xD5] * 800)), decoder.flush()])
    assert abs(len(out) - 1600) <= 2  # 100 ms at 8 kHz -> 16 kHz


def test_mix_down() -> None:
    stereo = np.array([1.0, 0.0, 0.5, -0.5, -1.0, -1.0], dtype=np.float32)
    np.testing.assert_array_equal(mix_down(stereo, 2), [0.5, 0.0, -1.0])
    mono = np.array([0.1, 0.2], dtype=np.float32)
    out = mix_down(mono, 1)
    np.testing.assert_array_equal(out, mono)
    assert out is not mono
    assert mix_down(np.zeros(0, np.float32), 2).shape == (0,)


ENCODINGS = {"pcm_s16le": "<i2", "pcm_f32le": "<f4", "mulaw": "u1"}


def _payload(encoding: str, channels: int, frames: int, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    n = frames * channels
    if encoding == "pcm_s16le":
        return rng.integers(-20000, 20000, n).astype("<i2").tobytes()
    if encoding == "pcm_f32le":
        return (rng.standard_normal(n) * 0.3).astype("<f4").tobytes()
    return rng.integers(0, 256, n).astype("u1").tobytes()


@settings(max_examples=60, deadline=None)
@given(
    data=st.data(),
    encoding=st.sampled_from(sorted(ENCODINGS)),
    rate=st.sampled_from([8000, 11025, 16000, 22050, 44100, 48000]),
    channels=st.sampled_from([1, 2]),
    frames=st.integers(0, 3000),
    extra=st.integers(0, 7),
)
def test_stream_decoder_invariant_under_byte_splits(
    data: st.DataObject, encoding: str, rate: int, channels: int, frames: int, extra: int
) -> None:
    payload = _payload(encoding, channels, frames, seed=frames) + b"\x01" * extra
    cuts = sorted(data.draw(st.lists(st.integers(0, len(payload)), max_size=10)))
    one = PcmStreamDecoder(encoding, rate, channels)
    whole = np.concatenate([one.feed(payload), one.flush()])
    split = PcmStreamDecoder(encoding, rate, channels)
    pieces, start = [], 0
    for cut in [*cuts, len(payload)]:
        pieces.append(split.feed(payload[start:cut]))
        start = cut
    pieces.append(split.flush())
    np.testing.assert_array_equal(np.concatenate(pieces), whole)
    frame_bytes = {"pcm_s16le": 2, "pcm_f32le": 4, "mulaw": 1}[encoding] * channels
    total_frames = len(payload) // frame_bytes
    assert split.input_frames == one.input_frames == total_frames
    assert split.leftover_bytes == one.leftover_bytes == len(payload) % frame_bytes


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
@pytest.mark.parametrize("channels", [1, 2])
def test_stream_decoder_equals_decode_mix_resample(encoding: str, channels: int) -> None:
    payload = _payload(encoding, channels, 22050, seed=1)
    decoder = PcmStreamDecoder(encoding, 22050, channels)
    got = np.concatenate([decoder.feed(payload), decoder.flush()])
    decode = {"pcm_s16le": decode_s16le, "pcm_f32le": decode_f32le, "mulaw": decode_mulaw}
    want = resample(mix_down(decode[encoding](payload), channels), 22050)
    np.testing.assert_array_equal(got, want)
    assert got.shape == (16000,) and got.dtype == np.float32


def test_stream_decoder_16k_passthrough_is_immediate() -> None:
    decoder = PcmStreamDecoder("pcm_s16le", 16000, 1)
    out = decoder.feed(np.arange(-5, 5, dtype="<i2").tobytes() + b"\x07")
    np.testing.assert_array_equal(out, np.arange(-5, 5) / 32768)
    assert decoder.leftover_bytes == 1 and decoder.input_frames == 10
    assert decoder.flush().shape == (0,)
    assert decoder.feed(b"\x00").shape == (1,) and decoder.leftover_bytes == 0


def test_stream_decoder_stereo_mixdown_cancels_opposite_channels() -> None:
    left = (np.sin(np.arange(4800) * 0.05) * 10000).astype(np.int16)
    stereo = np.stack([left, -left], axis=1).reshape(-1).astype("<i2").tobytes()
    decoder = PcmStreamDecoder("pcm_s16le", 48000, 2)
    out = np.concatenate([decoder.feed(stereo), decoder.flush()])
    assert out.shape == (1600,) and np.abs(out).max() < 1e-6


@pytest.mark.parametrize("channels", [1, 2, 3])
def test_stream_decoder_split_gives_each_channel_as_its_own_mono_decode(channels: int) -> None:
    payload = _payload("pcm_s16le", channels, 22050, seed=2)
    split = PcmStreamDecoder("pcm_s16le", 22050, channels)
    cut = 1001  # mid-frame: the split keeps the partial frame as feed does
    parts = [split.feed_channels(payload[:cut]), split.feed_channels(payload[cut:])]
    parts.append(split.flush_channels())
    frames = decode_s16le(payload).reshape(-1, channels)
    for i in range(channels):
        got = np.concatenate([p[i] for p in parts])
        np.testing.assert_array_equal(got, resample(np.ascontiguousarray(frames[:, i]), 22050))
    assert split.input_frames == 22050
