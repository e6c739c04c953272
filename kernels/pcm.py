"""PCM decoding at the server edge: s16le / f32le / G.711 u-law and A-law bytes to float32
mono 16 kHz.

`PcmStreamDecoder` is the per-session decoder: WebSocket messages may split a sample frame
anywhere, so it keeps the incomplete frame's bytes and the resampler's history between calls.
"""

from __future__ import annotations

import numpy as np

from .resample import StreamResampler

__all__ = [
    "ENCODINGS",
    "MAX_CHANNELS",
    "MAX_SAMPLE_RATE",
    "MIN_SAMPLE_RATE",
    "PcmStreamDecoder",
    "alaw_table",
    "decode_alaw",
    "decode_f32le",
    "decode_mulaw",
    "decode_s16le",
    "mix_down",
    "mulaw_table",
]

ENCODINGS: dict[str, int] = {
    "pcm_s16le": 2,
    "pcm_f32le": 4,
    "mulaw": 1,
    "alaw": 1,
}  # bytes per sample
MIN_SAMPLE_RATE = 8000
MAX_SAMPLE_RATE = 48000
MAX_CHANNELS = 8
TARGET_RATE = 16000

_S16_SCALE = np.float32(1.0 / 32768.0)


def _mulaw_table() -> np.ndarray:
    # ITU-T G.711 u-law expansion: bits are stored inverted; sign, 3-bit segment, 4-bit step.
    codes = np.arange(256, dtype=np.int32)
    inverted = ~codes & 0xFF
    exponent = (inverted >> 4) & 0x07
    mantissa = inverted & 0x0F
    magnitude = (((mantissa << 3) + 0x84) << exponent) - 0x84
    linear = np.where(inverted & 0x80, -magnitude, magnitude)
    table = (linear.astype(np.float32) * _S16_SCALE).astype(np.float32)
    table.setflags(write=False)
    return table


_MULAW = _mulaw_table()


def mulaw_table() -> np.ndarray:
    """The 256-entry u-law -> float32 table (16-bit linear value / 32768), read-only."""
    return _MULAW


def _alaw_table() -> np.ndarray:
    # ITU-T G.711 A-law expansion: even bits inverted (xor 0x55); sign set means positive.
    codes = np.arange(256, dtype=np.int32) ^ 0x55
    segment = (codes >> 4) & 0x07
    step = ((codes & 0x0F) << 4) + 8
    magnitude = np.where(segment == 0, step, (step + 0x100) << np.maximum(segment - 1, 0))
    linear = np.where(codes & 0x80, magnitude, -magnitude)
    table = (linear.astype(np.float32) * _S16_SCALE).astype(np.float32)
    table.setflags(write=False)
    return table


_ALAW = _alaw_table()


def alaw_table() -> np.ndarray:
    """The 256-entry A-law -> float32 table (16-bit linear value / 32768), read-only."""
    return _ALAW


def _as_bytes(data: object) -> memoryview:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ValueError(f"audio data must be bytes, got {type(data).__name__}")
    view = memoryview(data)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def decode_s16le(data: bytes | bytearray | memoryview) -> np.ndarray:
    """Little-endian signed 16-bit PCM to float32 in [-1, 1)."""
    view = _as_bytes(data)
    if len(view) % 2:
        raise ValueError(f"s16le data must hold whole 2-byte samples, got {len(view)} bytes")
    return np.frombuffer(view, dtype="<i2").astype(np.float32) * _S16_SCALE


def decode_f32le(data: bytes | bytearray | memoryview) -> np.ndarray:
    """Little-endian float32 PCM to float32 within [-1, 1], as 16-bit PCM is: NaN becomes 0,
    and anything past full scale is clipped (one sample of 1e15 would otherwise ring through
    the resampler and set the level every log-mel frame is measured against)."""
    view = _as_bytes(data)
    if len(view) % 4:
        raise ValueError(f"f32le data must hold whole 4-byte samples, got {len(view)} bytes")
    samples = np.frombuffer(view, dtype="<f4").astype(np.float32)
    if samples.size and not np.isfinite(samples).all():
        np.nan_to_num(samples, copy=False, nan=0.0, posinf=1.0, neginf=-1.0)
    np.clip(samples, -1.0, 1.0, out=samples)
    return samples


def decode_mulaw(data: bytes | bytearray | memoryview) -> np.ndarray:
    """G.711 u-law bytes to float32 through a 256-entry table."""
    return _MULAW[np.frombuffer(_as_bytes(data), dtype=np.uint8)]


def mix_down(interleaved: np.ndarray, channels: int) -> np.ndarray:
    """Average interleaved channels into mono float32 (1-D input of frames * channels)."""
    if not isinstance(channels, (int, np.integer)) or isinstance(channels, bool) or channels < 1:
        raise ValueError(f"channels must be a positive integer, got {channels!r}")
    if not isinstance(interleaved, np.ndarray) or interleaved.ndim != 1:
        raise ValueError("interleaved must be a 1-D numpy array")
    samples = interleaved.astype(np.float32, copy=False)
    if channels == 1:
        return samples.copy() if samples is interleaved else samples
    if samples.shape[0] % channels:
        raise ValueError(
            f"{samples.shape[0]} samples is not a whole number of {channels}-channel frames"
        )
    return samples.reshape(-1, channels).mean(axis=1, dtype=np.float32)


def decode_alaw(data: bytes | bytearray | memoryview) -> np.ndarray:
    """G.711 A-law bytes to float32 through a 256-entry table."""
    return _ALAW[np.frombuffer(_as_bytes(data), dtype=np.uint8)]


_DECODERS = {
    "pcm_s16le": decode_s16le,
    "pcm_f32le": decode_f32le,
    "mulaw": decode_mulaw,
    "alaw": decode_alaw,
}


class PcmStreamDecoder:
    """One session's audio decoder: bytes in any split -> float32 mono 16 kHz.

    Concatenating every `feed` output and `flush()` gives the same samples for any split of the
    byte stream (soxr's stream output does not depend on chunking).
    """

    def __init__(self, encoding: str, sample_rate: int, channels: int) -> None:
        if encoding not in ENCODINGS:
            raise ValueError(f"encoding must be one of {sorted(ENCODINGS)}, got {encoding!r}")
        if (
            not isinstance(sample_rate, (int, np.integer))
            or isinstance(sample_rate, bool)
            or not MIN_SAMPLE_RATE <= sample_rate <= MAX_SAMPLE_RATE
        ):
            raise ValueError(
                f"sample_rate must be an integer from {MIN_SAMPLE_RATE} to {MAX_SAMPLE_RATE},"
                f" got {sample_rate!r}"
            )
        if (
            not isinstance(channels, (int, np.integer))
            or isinstance(channels, bool)
            or not 1 <= channels <= MAX_CHANNELS
        ):
            raise ValueError(f"channels must be within 1..{MAX_CHANNELS}, got {channels!r}")
        self._encoding = encoding
        self._sample_rate = int(sample_rate)
        self._channels = int(channels)
        self._frame_bytes = ENCODINGS[encoding] * self._channels
        self._decode = _DECODERS[encoding]
        self._pending = bytearray()
        self._input_frames = 0
        self._resampler = StreamResampler(self._sample_rate, TARGET_RATE)
        self._split: list[StreamResampler] | None = None  # per channel, made by feed_channels

    @property
    def encoding(self) -> str:
        return self._encoding

    @property
    def sample_rate(self) -> int:
        return self._sample_rate

    @property
    def channels(self) -> int:
        return self._channels

    @property
    def frame_bytes(self) -> int:
        """Bytes in one sample frame (one sample of every channel)."""
        return self._frame_bytes

    @property
    def leftover_bytes(self) -> int:
        """Bytes of an incomplete sample frame held for the next `feed`."""
        return len(self._pending)

    @property
    def input_frames(self) -> int:
        """Whole sample frames received so far, at the input rate."""
        return self._input_frames

    def _whole_frames(self, data: bytes | bytearray | memoryview) -> np.ndarray:
        """The interleaved samples of the whole frames `data` completes."""
        view = _as_bytes(data)
        if self._pending:
            self._pending += view
            view = memoryview(bytes(self._pending))
        whole = len(view) - len(view) % self._frame_bytes
        decoded = self._decode(view[:whole])
        self._pending = bytearray(view[whole:])
        self._input_frames += whole // self._frame_bytes
        return decoded

    def feed(self, data: bytes | bytearray | memoryview) -> np.ndarray:
        """Decode `data` (any length) and return the float32 mono 16 kHz samples ready now."""
        mono = mix_down(self._whole_frames(data), self._channels)
        return self._resampler.process(mono)

    def flush(self) -> np.ndarray:
        """End of stream: drain the resampler tail. An incomplete frame (see `leftover_bytes`)
        is kept, not decoded; the caller reports it."""
        return self._resampler.flush()

    def feed_channels(self, data: bytes | bytearray | memoryview) -> list[np.ndarray]:
        """As `feed`, but each channel on its own (one float32 16 kHz array per channel); a
        decoder is used either this way or mixed down, not both."""
        if self._split is None:
            self._split = [
                StreamResampler(self._sample_rate, TARGET_RATE) for _ in range(self._channels)
            ]
        frames = self._whole_frames(data).reshape(-1, self._channels)
        return [r.process(np.ascontiguousarray(frames[:, i])) for i, r in enumerate(self._split)]

    def flush_channels(self) -> list[np.ndarray]:
        """As `flush`, per channel."""
        if self._split is None:
            return [np.zeros(0, dtype=np.float32) for _ in range(self._channels)]
        return [r.flush() for r in self._split]

    def close(self) -> None:
        """Nothing to release (the container decoder's counterpart has a worker)."""
