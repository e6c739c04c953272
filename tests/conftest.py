"""Shared fixtures: where the real-speech eval set lives, its manifest, the real tiny.en model."""

from __future__ import annotations

import csv
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from kettle.transcribe.adapter import WhisperAdapter

REPO_ROOT = Path(__file__).resolve().parents[1]


def _eval_dir() -> Path:
    env = os.environ.get("KETTLE_EVAL_DIR")
    return Path(env) if env else REPO_ROOT.parent / "shared" / "eval"


@dataclass(frozen=True)
class EvalClip:
    path: Path
    duration_s: float
    reference: str
    category: str
    sample_rate: int
    channels: int


@pytest.fixture(scope="session")
def eval_dir() -> Path:
    path = _eval_dir()
    if not (path / "manifest.tsv").is_file():
        pytest.skip(f"eval set not found at {path} (set KETTLE_EVAL_DIR)")
    return path


@pytest.fixture(scope="session")
def eval_clips(eval_dir: Path) -> list[EvalClip]:
    with open(eval_dir / "manifest.tsv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    return [
        EvalClip(
            path=eval_dir / row["file"],
            duration_s=float(row["duration_s"]),
            reference=row["reference_text"],
            category=row["category"],
            sample_rate=int(row["sample_rate_hz"]),
            channels=int(row["channels"]),
        )
        for row in rows
    ]


def wer(references: list[str], hypotheses: list[str]) -> float:
    """Corpus WER after Whisper's English normalizer, as the eval README prescribes."""
    import jiwer
    from whisper_normalizer.english import EnglishTextNormalizer

    normalize = EnglishTextNormalizer()
    refs = [normalize(r) for r in references]
    hyps = [normalize(h) for h in hypotheses]
    return float(jiwer.wer(refs, hyps))


@pytest.fixture(scope="session")
def wer_fn() -> Callable[[list[str], list[str]], float]:
    return wer


@pytest.fixture(scope="session")
def tiny_decoder() -> WhisperAdapter:
    """The real tiny.en adapter (int8, 2 threads), loaded once per test session."""
    from kettle.transcribe.adapter import ModelConfig, WhisperAdapter

    return WhisperAdapter(ModelConfig(name="tiny.en", threads=2))
