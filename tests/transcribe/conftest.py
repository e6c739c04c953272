"""Fixtures shared by the transcribe tests."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from kettle.transcribe.model.encoder import Encoder
from kettle.transcribe.model.encoder_cache import EncoderCache
from kettle.transcribe.model.features import FeatureComputer

Cue = tuple[float, float, str]
_TIME = r"(\d{2}):(\d{2}):(\d{2})[,.](\d{3})"


def _parse_cues(text: str) -> list[Cue]:
    """A tiny SRT/VTT parser, independent of the writers: (start, end, text) per cue."""
    cues = []
    for block in re.split(r"\n\s*\n", text.strip()):
        lines = block.strip().splitlines()
        idx = next((i for i, line in enumerate(lines) if "-->" in line), None)
        if idx is None:
            continue
        m = re.fullmatch(_TIME + r" --> " + _TIME, lines[idx].strip())
        assert m, lines[idx]
        g = [int(x) for x in m.groups()]
        start = g[0] * 3600 + g[1] * 60 + g[2] + g[3] / 1000
        end = g[4] * 3600 + g[5] * 60 + g[6] + g[7] / 1000
        cues.append((start, end, " ".join(lines[idx + 1 :])))
    return cues


@pytest.fixture
def parse_cues() -> Callable[[str], list[Cue]]:
    return _parse_cues


# -- the encoder's input, recorded where it is padded ----------------------------------------


class EncoderCalls:
    """A CTranslate2 Whisper model (real or fake) whose ``encode`` records the features it is
    given, one array (batch, n_mels, frames) per call, before passing them on."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.calls: list[np.ndarray] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def encode(self, features: Any, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(np.array(features, dtype=np.float32, copy=True))
        return self._inner.encode(features, *args, **kwargs)

    def rows(self) -> list[np.ndarray]:
        """Every encoded row (n_mels, frames), in call order."""
        return [row for call in self.calls for row in call]


@pytest.fixture
def record_encoder(monkeypatch: pytest.MonkeyPatch) -> Callable[[Any], EncoderCalls]:
    """record_encoder(adapter) -> EncoderCalls: the adapter's encoder passes, recorded for
    this test (the model itself is put back afterwards)."""

    def wrap(adapter: Any) -> EncoderCalls:
        encoder = adapter._encoder  # the one place that calls the model's encode
        calls = EncoderCalls(encoder._ct2)
        monkeypatch.setattr(encoder, "_ct2", calls)
        return calls

    return wrap


class FakeFw:
    """The two of ``kettle.transcribe.model.fw`` the encoder uses, on plain numpy arrays."""

    @staticmethod
    def storage(array: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(array)

    @staticmethod
    def to_numpy(view: np.ndarray) -> np.ndarray:
        return np.array(view)


class FakeCt2Encoder:
    """Whisper's encoder shapes without a model: (B, n_mels, T) -> (B, T // 2, width), each
    row a function of its own features only."""

    n_mels = 80
    width = 8

    def encode(self, features: np.ndarray, to_cpu: bool = False) -> np.ndarray:
        pooled = features[:, :, 0::2].mean(axis=1)  # (B, T // 2)
        scale = np.arange(1, self.width + 1, dtype=np.float32)
        return np.asarray(pooled[:, :, None] * scale, dtype=np.float32)


@pytest.fixture
def fake_encoder() -> tuple[Encoder, EncoderCalls]:
    """An Encoder on a fake model (real log-mel features, a cache of 32) and its record."""
    calls = EncoderCalls(FakeCt2Encoder())
    encoder = Encoder(calls, FakeFw(), FeatureComputer(FakeCt2Encoder.n_mels), EncoderCache(32))
    return encoder, calls
