"""The GE2E speaker encoder (transcribe/speakers/encoder.py): resemblyzer's figures, real voices."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from kettle.transcribe.audio.read import load_audio
from kettle.transcribe.speakers import encoder as speaker_encoder
from kettle.transcribe.speakers.encoder import partial_slices

DATA = Path(__file__).resolve().parents[2] / "data"
SPEECH = DATA / "speech" / "audio"

needs_model = pytest.mark.skipif(
    not speaker_encoder.available(), reason="the diarize extra (resemblyzer, torch) is not here"
)


def test_partial_windows_are_resemblyzers() -> None:
    # Worked by hand from resemblyzer 0.1.4's compute_partial_slices (rate 1.3, coverage 0.75).
    assert [(s.start, s.stop) for s in partial_slices(16000)] == [(0, 160)]
    assert [(s.start, s.stop) for s in partial_slices(48000)] == [(0, 160), (77, 237), (154, 314)]
    # 1.875 s: the second window would cover under 75 % of 1.6 s, so it is dropped.
    assert [(s.start, s.stop) for s in partial_slices(30000)] == [(0, 160)]


def test_volume_is_raised_to_minus_30_dbfs_and_never_lowered() -> None:
    quiet = np.full(1600, 0.001, np.float32)
    raised = speaker_encoder.normalize_volume(quiet)
    assert 20 * np.log10(np.sqrt(np.mean(raised**2))) == pytest.approx(-30.0, abs=0.01)
    loud = np.full(1600, 0.5, np.float32)
    assert speaker_encoder.normalize_volume(loud) is loud


@pytest.fixture(scope="module")
def encoder() -> speaker_encoder.ResemblyzerEncoder:
    return speaker_encoder.ResemblyzerEncoder()


@needs_model
def test_the_mel_is_librosas(encoder: speaker_encoder.ResemblyzerEncoder) -> None:
    fixture = np.load(DATA / "speaker" / "librosa_mel.npz")
    ours = encoder.mel(fixture["audio"]).numpy()
    reference = fixture["mel"]
    assert ours.shape == reference.shape
    # float32 FFTs differ by rounding only: within 1e-5 of the largest band energy.
    assert np.abs(ours - reference).max() <= 1e-5 * reference.max()


@needs_model
def test_one_readers_clips_are_nearer_than_two_readers(
    encoder: speaker_encoder.ResemblyzerEncoder,
) -> None:
    def embed(name: str) -> np.ndarray:
        return encoder.embed(load_audio((SPEECH / name).read_bytes()))

    a1 = embed("ls__1089-134686-0000.flac")
    a2 = embed("ls__1089-134686-0001.flac")
    b = embed("ls__1995-1837-0001.wav")
    for v in (a1, a2, b):
        assert v.shape == (256,) and np.linalg.norm(v) == pytest.approx(1.0, abs=1e-5)
    assert float(a1 @ a2) > float(a1 @ b) + 0.1
    assert float(a2 @ a1) > float(a2 @ b) + 0.1


def test_a_missing_model_says_how_to_install_it(tmp_path: Path) -> None:
    from kettle.transcribe.errors import KettleError

    if not speaker_encoder.available():
        with pytest.raises(KettleError, match="resemblyzer"):
            speaker_encoder.ResemblyzerEncoder()
    else:
        with pytest.raises(Exception):  # noqa: B017 (torch's own error for a missing file)
            speaker_encoder.ResemblyzerEncoder(tmp_path / "absent.pt")
