"""Live containerised audio (WebM/Ogg Opus, MP3, WAV with its header, whatever PyAV reads)
decoded as it arrives: bytes in any split -> float32 16 kHz samples, mono or one array per
channel.

FFmpeg's demuxers pull bytes and treat a short read as the end of the file, so the
demuxer runs in a worker thread whose reads block until more bytes come. `feed` hands the
bytes over and waits until the thread has used them all (it is blocked reading again), so
each call returns every sample those bytes complete, as `PcmStreamDecoder.feed` does.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import av
import numpy as np

TARGET_RATE = 16000
MAX_CHANNELS = 8
# How long `feed` waits for the decoder to use up its bytes; never reached in practice (a
# chunk decodes in well under a millisecond), it keeps a wedged decoder from wedging the loop.
FEED_WAIT_S = 5.0
CLOSE_WAIT_S = 10.0
# FFmpeg reads up to 5 s of audio to learn a stream's parameters before the first packet;
# live audio needs its first words sooner, and the header says enough for audio.
_OPEN_OPTIONS = {"probesize": "4096", "analyzeduration": "100000"}


class ContainerDecodeError(ValueError):
    """The bytes are not audio in a container PyAV can read (the message says why)."""


class _BlockingInput:
    """A file-like object whose reads wait for bytes until the input is closed."""

    def __init__(self) -> None:
        self._data = bytearray()
        self._closed = False
        self._starved = False  # the reader is waiting: every byte given so far is used
        self._cond = threading.Condition()
        self.total = 0

    def read(self, size: int = -1) -> bytes:
        with self._cond:
            while not self._data and not self._closed:
                self._starved = True
                self._cond.notify_all()
                self._cond.wait()
            n = len(self._data) if size < 0 else min(size, len(self._data))
            out = bytes(self._data[:n])
            del self._data[:n]
            return out

    def give(self, data: bytes) -> None:
        with self._cond:
            self._data += data
            self.total += len(data)
            self._starved = False
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def wait_starved(self, done: threading.Event, timeout: float) -> None:
        """Until the reader waits for more bytes, or the decoder has ended."""
        with self._cond:
            self._cond.wait_for(lambda: self._starved or done.is_set(), timeout)

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()


class ContainerStreamDecoder:
    """One session's container decoder. ``channels`` 1 mixes down to mono; more splits the
    audio into that many channels (the container's layout remixed to that count)."""

    def __init__(self, channels: int = 1) -> None:
        if isinstance(channels, bool) or not 1 <= channels <= MAX_CHANNELS:
            raise ValueError(f"channels must be within 1..{MAX_CHANNELS}, got {channels!r}")
        self._channels = channels
        self._input = _BlockingInput()
        self._lock = threading.Lock()
        self._ready: list[list[np.ndarray]] = [[] for _ in range(channels)]
        self._frames = 0  # 16 kHz sample frames decoded
        self._error: str | None = None
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def channels(self) -> int:
        return self._channels

    @property
    def sample_rate(self) -> int:
        """The rate `input_frames` counts at: the decoded output's, 16 kHz."""
        return TARGET_RATE

    @property
    def input_frames(self) -> int:
        with self._lock:
            return self._frames

    @property
    def leftover_bytes(self) -> int:
        return 0  # a container has no sample frames to split; a cut packet is dropped

    @property
    def frame_bytes(self) -> int:
        return 1

    def feed(self, data: bytes | bytearray | memoryview) -> np.ndarray:
        """`data` appended; the mono samples ready now (channels mixed down)."""
        return _mix(self.feed_channels(data))

    def feed_channels(self, data: bytes | bytearray | memoryview) -> list[np.ndarray]:
        """`data` appended; per channel, the samples ready now. ContainerDecodeError once
        the bytes cannot be read as audio."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="kettle-container", daemon=True)
            self._thread.start()
        if data:
            self._input.give(bytes(data))
            self._input.wait_starved(self._done, FEED_WAIT_S)
        return self._take()

    def flush(self) -> np.ndarray:
        return _mix(self.flush_channels())

    def flush_channels(self) -> list[np.ndarray]:
        """End of the input: what the decoder still holds, per channel."""
        self.close()
        return self._take(final=True)

    def close(self) -> None:
        """No more input; the worker ends (used on abort too)."""
        self._input.close()
        if self._thread is not None:
            self._thread.join(CLOSE_WAIT_S)

    def _take(self, final: bool = False) -> list[np.ndarray]:
        with self._lock:
            ready, self._ready = self._ready, [[] for _ in range(self._channels)]
            error = self._error
            self._error = None
        out = [np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32) for parts in ready]
        if error is not None and not (final and self._frames and self._error_at_end(error)):
            raise ContainerDecodeError(error)
        return out

    @staticmethod
    def _error_at_end(error: str) -> bool:
        # A stream cut mid-packet at the end ends with a truncation error: the rest counts.
        return "truncat" in error.lower() or "end of file" in error.lower()

    # -- the worker ---------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._decode()
        except (av.FFmpegError, ValueError, IndexError, OSError) as exc:
            with self._lock:
                self._error = str(exc) or type(exc).__name__
        finally:
            self._done.set()
            self._input.wake()

    def _decode(self) -> None:
        with av.open(self._input, mode="r", options=_OPEN_OPTIONS) as container:
            if not container.streams.audio:
                raise ContainerDecodeError("the container holds no audio stream")
            stream = container.streams.audio[0]
            layout = av.AudioLayout(f"{self._channels}c")  # FFmpeg's default layout of that many
            resampler = av.AudioResampler(format="fltp", layout=layout, rate=TARGET_RATE)
            for frame in _frames(container, stream):
                for out in resampler.resample(frame):
                    self._push(out)
            for out in resampler.resample(None):
                self._push(out)

    def _push(self, frame: Any) -> None:
        planes = np.asarray(frame.to_ndarray(), dtype=np.float32).reshape(self._channels, -1)
        with self._lock:
            for i in range(self._channels):
                self._ready[i].append(planes[i].copy())
            self._frames += planes.shape[1]


def _frames(container: Any, stream: Any) -> Iterator[Any]:
    for packet in container.demux(stream):
        yield from packet.decode()


def _mix(channels: list[np.ndarray]) -> np.ndarray:
    if len(channels) == 1:
        return channels[0]
    return np.asarray(np.mean(np.stack(channels), axis=0, dtype=np.float32))


__all__ = ["MAX_CHANNELS", "ContainerDecodeError", "ContainerStreamDecoder"]
