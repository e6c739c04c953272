"""Containerised audio made at test time (PyAV's encoders), from float32 16 kHz samples:
WebM/Opus and Ogg/Opus as browsers and voice agents send them, MP3, WAV with its header."""

from __future__ import annotations

import io

import av
import numpy as np

# name -> (container format, codec, rate)
FORMATS = {
    "webm": ("webm", "libopus", 48000),
    "ogg": ("ogg", "libopus", 48000),
    "mp3": ("mp3", "libmp3lame", 44100),
    "wav": ("wav", "pcm_s16le", 16000),
}


def encode(channels: list[np.ndarray] | np.ndarray, kind: str) -> bytes:
    """One container's bytes holding ``channels`` (a 1-D array: mono), each 16 kHz float32."""
    planes = [channels] if isinstance(channels, np.ndarray) else channels
    length = max(len(p) for p in planes)
    data = np.zeros((len(planes), length), dtype=np.float32)
    for i, p in enumerate(planes):
        data[i, : len(p)] = p
    fmt, codec, rate = FORMATS[kind]
    layout = av.AudioLayout(f"{len(planes)}c").name
    buf = io.BytesIO()
    with av.open(buf, "w", format=fmt) as out:
        stream = out.add_stream(codec, rate=rate, layout=layout)
        assert isinstance(stream, av.AudioStream)  # an audio codec: PyAV types it by name only
        frame = av.AudioFrame.from_ndarray(np.clip(data, -1, 1), format="fltp", layout=layout)
        frame.sample_rate = 16000
        target = stream.codec_context.format.name
        resampler = av.AudioResampler(format=target, layout=layout, rate=rate)
        for f in [*resampler.resample(frame), *resampler.resample(None)]:
            for packet in stream.encode(f):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return buf.getvalue()


def chunks(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]
