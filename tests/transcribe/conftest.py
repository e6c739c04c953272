"""Fixtures shared by the transcribe tests."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

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
