"""What one model call costs on this device: measured once at start-up, then predicted.

``CostProfile`` holds the measurements (encoder seconds per batch size, decoder seconds per
generated token per number of rows decoded together; a beam of 5 over b windows is 5b rows)
and predicts by piecewise-linear interpolation, extrapolating linearly past the last point.
Pure data: the adapter measures (``WhisperAdapter.measure_costs``), the scheduler predicts.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CostProfile:
    encode_s: tuple[tuple[int, float], ...]  # (batch size, seconds of one encoder pass)
    step_s: tuple[tuple[int, float], ...]  # (rows, seconds per generated token)
    device: str = "cpu"

    def __post_init__(self) -> None:
        for name in ("encode_s", "step_s"):
            points = getattr(self, name)
            if not points or any(n < 1 or s < 0 for n, s in points):
                raise ValueError(f"{name} needs points (n >= 1, seconds >= 0)")
            object.__setattr__(self, name, tuple(sorted(points)))

    def encode(self, batch: int) -> float:
        return _interpolate(self.encode_s, batch)

    def step(self, rows: int) -> float:
        return _interpolate(self.step_s, rows)

    def batch(self, sizes: Sequence[int], *, beam: int = 1, encoded: int | None = None) -> float:
        """Seconds for one batch whose requests generate ``sizes`` tokens each (the batch
        runs as long as its longest), ``encoded`` of them needing the encoder (default all)."""
        if not sizes:
            return 0.0
        n = len(sizes)
        enc = n if encoded is None else encoded
        return (self.encode(enc) if enc else 0.0) + max(sizes) * self.step(n * max(1, beam))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CostProfile:
        """The inverse of ``to_dict`` (ValueError, KeyError or TypeError when malformed)."""
        return cls(
            encode_s=tuple((int(n), float(s)) for n, s in data["encode_s"].items()),
            step_s=tuple((int(n), float(s)) for n, s in data["step_s"].items()),
            device=str(data.get("device", "cpu")),
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "device": self.device,
            "encode_s": {str(n): round(s, 5) for n, s in self.encode_s},
            "step_s": {str(n): round(s, 6) for n, s in self.step_s},
        }


def _interpolate(points: tuple[tuple[int, float], ...], x: int) -> float:
    if len(points) == 1:
        n, s = points[0]
        return s * x / n  # one point: proportional
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        if x <= x1 or (x1, y1) == points[-1]:
            slope = (y1 - y0) / (x1 - x0)
            return max(0.0, y0 + slope * (x - x0))
    raise AssertionError("unreachable")
