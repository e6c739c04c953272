"""Decoding every eval format, raw PCM, and bad input (always an AudioError, never a crash)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from kettle.kernels import pcm
from kettle.transcribe.audio.read import RawFormat, load_audio
from kettle.transcribe.errors import AudioError

SR = 16000


def _raw_for(path: Path) -> RawFormat | None:
    return RawFormat("s16le", 16000, 1) if path.suffix == ".raw" else None


def test_every_eval_file_decodes(eval_clips) -> None:
    suffixes = set()
    for clip in eval_clips:
        audio = load_audio(clip.path, _raw_for(clip.path))
        assert audio.dtype == np.float32 and audio.ndim == 1, clip.path
        assert abs(len(audio) / SR - clip.duration_s) < 0.06, clip.path
        assert np.isfinite(audio).all() and np.abs(audio).max() <= 1.0 + 1e-6
        assert np.abs(audio).max() > 0.002, f"{clip.path} decoded to near silence"
        suffixes.add(clip.path.suffix)
    assert {".flac", ".wav", ".ogg", ".mp3", ".raw"} <= suffixes
    rates = {c.sample_rate for c in eval_clips}
    assert {8000, 16000, 22050, 44100, 48000} <= rates
    assert any(c.channels == 2 for c in eval_clips)


def test_bytes_input_matches_path(eval_clips) -> None:
    clip = next(c for c in eval_clips if c.path.suffix == ".flac")
    assert np.array_equal(load_audio(clip.path.read_bytes()), load_audio(clip.path))


def test_raw_spec_parsing() -> None:
    assert RawFormat.parse("s16le:16000:1") == RawFormat("s16le", 16000, 1)
    assert RawFormat.parse("F32LE:8000") == RawFormat("f32le", 8000, 1)
    assert str(RawFormat.parse("mulaw:8000:2")) == "mulaw:8000:2"
    assert RawFormat.parse("alaw:8000:2").frame_bytes == 2
    for bad in ("", "s24le:16000:1", "s16le:fast:1", "s16le:16000:0", "s16le:10:1", "a:b:c:d"):
        with pytest.raises(AudioError):
            RawFormat.parse(bad)


def test_raw_stereo_8k_is_mixed_and_resampled() -> None:
    t = np.arange(8000) / 8000
    left = 0.5 * np.sin(2 * np.pi * 440 * t)
    stereo = np.stack([left, np.zeros_like(left)], axis=1).reshape(-1)
    data = (stereo * 32767).astype("<i2").tobytes() + b"\x01"  # plus a partial frame
    audio = load_audio(data, RawFormat("s16le", 8000, 2))
    assert abs(len(audio) - SR) <= 2
    assert np.abs(audio[1000:-1000]).max() == pytest.approx(0.25, abs=0.01)
    spectrum = np.abs(np.fft.rfft(audio))
    assert abs(np.argmax(spectrum) * SR / len(audio) - 440) < 3


def test_raw_g711_decodes_through_the_kernel_tables() -> None:
    codes = bytes(range(256)) * 4
    for encoding, table in (("alaw", pcm.alaw_table()), ("mulaw", pcm.mulaw_table())):
        audio = load_audio(codes, RawFormat(encoding, SR, 1))
        np.testing.assert_array_equal(audio, np.tile(table, 4))


def test_raw_file_without_spec_says_what_to_do(tmp_path: Path) -> None:
    p = tmp_path / "x.raw"
    p.write_bytes(b"\x00\x01" * 100)
    with pytest.raises(AudioError, match="--raw"):
        load_audio(p)
    assert len(load_audio(p, RawFormat())) == 100


def test_stereo_file_is_mixed_down(tmp_path: Path) -> None:
    t = np.arange(44100) / 44100
    left = 0.6 * np.sin(2 * np.pi * 300 * t)
    p = tmp_path / "s.wav"
    sf.write(p, np.stack([left, -left], axis=1), 44100)  # opposite phases cancel
    audio = load_audio(p)
    assert abs(len(audio) - SR) <= 2
    assert np.abs(audio).max() < 1e-3


@pytest.mark.parametrize(
    ("content", "name", "match"),
    [
        (b"", "empty.wav", "empty"),
        (b"hello, this is not audio at all\n" * 20, "text.wav", "not a decodable audio file"),
        (b"RIFF\x24\x00\x00\x00WAVEfmt ", "header.wav", "not a decodable"),
        (b"\x00\x00", "tiny.mp3", "not a decodable|no audio"),
    ],
)
def test_bad_input_is_a_clear_error(tmp_path: Path, content: bytes, name: str, match: str) -> None:
    p = tmp_path / name
    p.write_bytes(content)
    with pytest.raises(AudioError, match=match) as info:
        load_audio(p)
    assert "\n" not in str(info.value) and str(tmp_path) not in str(info.value)


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(AudioError, match="no such file"):
        load_audio(tmp_path / "nope.wav")
    with pytest.raises(AudioError, match="directory"):
        load_audio(tmp_path)
    with pytest.raises(AudioError, match="empty"):
        load_audio(b"")


@pytest.mark.parametrize("suffix", [".wav", ".flac"])
def test_truncated_file_keeps_what_is_there(
    eval_clips, tmp_path: Path, suffix: str, caplog: pytest.LogCaptureFixture
) -> None:
    clip = next(c for c in eval_clips if c.path.suffix == suffix and c.duration_s > 5)
    data = clip.path.read_bytes()
    p = tmp_path / f"half{suffix}"
    p.write_bytes(data[: len(data) // 2])
    with caplog.at_level("WARNING"):
        audio = load_audio(p)
    # The user is told, with the file's name and how much was kept.
    assert any(
        f"half{suffix}: file is damaged or cut off after" in r.getMessage() for r in caplog.records
    ), caplog.text
    full = load_audio(clip.path)
    assert 0.3 * len(full) < len(audio) < 0.7 * len(full)
    # What is kept is the real beginning, not noise.
    n = min(len(audio), SR)
    assert np.allclose(audio[:n], full[:n], atol=1e-4)
