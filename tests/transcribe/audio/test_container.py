"""The live container decoder: WebM/Ogg Opus, MP3 and WAV bytes in any split -> 16 kHz."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from kettle.transcribe.audio.container import ContainerDecodeError, ContainerStreamDecoder
from kettle.transcribe.audio.read import load_audio

from tests.containers import FORMATS, chunks, encode

CLIP = (
    Path(__file__).resolve().parents[2] / "data" / "speech" / "audio" / "ls__1089-134686-0001.flac"
)


@pytest.fixture(scope="module")
def speech() -> np.ndarray:
    return load_audio(CLIP)


def correlation(a: np.ndarray, b: np.ndarray) -> float:
    n = min(len(a), len(b))
    # Codecs delay the signal a little (Opus pre-skip is removed, MP3's is not): best lag.
    best = 0.0
    for lag in range(0, 1200, 8):
        x, y = a[lag:n], b[: n - lag]
        best = max(best, float(np.corrcoef(x, y)[0, 1]))
    return best


@pytest.mark.parametrize("kind", sorted(FORMATS))
def test_chunked_container_decodes_to_the_speech(kind: str, speech: np.ndarray) -> None:
    data = encode(speech, kind)
    decoder = ContainerStreamDecoder()
    pieces = [decoder.feed(c) for c in chunks(data, 997)]  # splits anywhere, mid-page too
    pieces.append(decoder.flush())
    out = np.concatenate(pieces)
    assert out.dtype == np.float32
    assert abs(len(out) - len(speech)) < 0.1 * 16000  # the same length, give or take padding
    assert decoder.input_frames == len(out) and decoder.sample_rate == 16000
    assert correlation(out, speech) > 0.9
    # Live: samples come out while the bytes come in, not only at the end (FFmpeg's WAV
    # reader first looks through 64 KiB for S/PDIF data: 2 s of this clip, so not there).
    if kind != "wav":
        assert sum(p.size for p in pieces[: len(pieces) // 2]) > 0.25 * len(speech)


def test_stereo_split_keeps_each_channel(speech: np.ndarray) -> None:
    silent = np.zeros_like(speech)
    data = encode([speech, silent], "webm")
    decoder = ContainerStreamDecoder(channels=2)
    parts = [decoder.feed_channels(c) for c in chunks(data, 4000)]
    parts.append(decoder.flush_channels())
    left = np.concatenate([p[0] for p in parts])
    right = np.concatenate([p[1] for p in parts])
    assert len(left) == len(right) and correlation(left, speech) > 0.9
    assert float(np.abs(right).max()) < 0.01  # the silent channel stays silent


def test_garbage_is_a_decode_error_not_a_crash() -> None:
    decoder = ContainerStreamDecoder()
    with pytest.raises(ContainerDecodeError):
        for _ in range(8):  # past FFmpeg's probe: it gives up on these bytes
            decoder.feed(b"this is not audio at all " * 400)
        decoder.flush()
    # A few bytes that never make a container: the error comes at the end.
    short = ContainerStreamDecoder()
    assert short.feed(b"\x00\x01\x02").size == 0
    with pytest.raises(ContainerDecodeError):
        short.flush()


def test_close_without_input_and_bad_channels() -> None:
    ContainerStreamDecoder().close()  # no worker was started: nothing to wait for
    with pytest.raises(ValueError, match="channels"):
        ContainerStreamDecoder(channels=0)
