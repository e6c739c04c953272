"""What one model call costs on this device: measured once at start-up, then predicted.

``CostProfile`` holds the measurements (encoder seconds per batch size on 30 s and per window
length, decoder seconds per generated token per number of rows decoded together; a beam of 5
over b windows is 5b rows)
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
    encode_s: tuple[tuple[int, float], ...]  # (batch size, seconds of one pass on 30 s)
    step_s: tuple[tuple[int, float], ...]  # (rows, seconds per generated token)
    device: str = "cpu"
    # (encoder frames, seconds of one window's pass): a live window encodes on 5-15 s, where
    # one pass costs a tenth to a quarter of 30 s's (attention grows with the square of the
    # length). Without it every window costs 30 s's, and batching partials looked like a
    # loss on a CPU where it halves their cost (RESULTS.md, bench_capacity). Empty: unmeasured.
    encode_frames_s: tuple[tuple[int, float], ...] = ()

    def __post_init__(self) -> None:
        for name in ("encode_s", "step_s", "encode_frames_s"):
            points = getattr(self, name)
            if (name != "encode_frames_s" and not points) or any(n < 1 or s < 0 for n, s in points):
                raise ValueError(f"{name} needs points (n >= 1, seconds >= 0)")
            object.__setattr__(self, name, tuple(sorted(points)))

    def encode(self, batch: int) -> float:
        return _interpolate(self.encode_s, batch)

    def step(self, rows: int) -> float:
        return _interpolate(self.step_s, rows)

    def encode_windows(self, frames: Sequence[int]) -> float:
        """Seconds to encode windows of these lengths (encoder frames) in one batch: each
        window's own pass where lengths were measured, else 30 s's batch pass."""
        if not frames:
            return 0.0
        if not self.encode_frames_s:
            return self.encode(len(frames))
        return sum(_interpolate(self.encode_frames_s, f) for f in frames)

    def batch(
        self,
        sizes: Sequence[int],
        *,
        beam: int = 1,
        encoded: int | None = None,
        frames: Sequence[int] | None = None,
    ) -> float:
        """Seconds for one batch whose requests generate ``sizes`` tokens each (the batch
        runs as long as its longest), ``encoded`` of them needing the encoder (default all),
        on ``frames`` encoder frames each (default Whisper's 30 s)."""
        if not sizes:
            return 0.0
        n = len(sizes)
        enc = n if encoded is None else encoded
        if frames is None:
            encode = self.encode(enc) if enc else 0.0
        else:
            encode = self.encode_windows(sorted(frames, reverse=True)[:enc])
        return encode + max(sizes) * self.step(n * max(1, beam))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CostProfile:
        """The inverse of ``to_dict`` (ValueError, KeyError or TypeError when malformed)."""
        return cls(
            encode_s=tuple((int(n), float(s)) for n, s in data["encode_s"].items()),
            step_s=tuple((int(n), float(s)) for n, s in data["step_s"].items()),
            device=str(data.get("device", "cpu")),
            encode_frames_s=tuple(
                (int(n), float(s)) for n, s in data.get("encode_frames_s", {}).items()
            ),
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "device": self.device,
            "encode_s": {str(n): round(s, 5) for n, s in self.encode_s},
            "step_s": {str(n): round(s, 6) for n, s in self.step_s},
            "encode_frames_s": {str(n): round(s, 5) for n, s in self.encode_frames_s},
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
