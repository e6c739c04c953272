"""A one-line progress bar on stderr: audio seconds done / total and speed (x real time).

It draws only when its stream is a terminal, so logs and pipes stay clean. Totals may be
estimates (from file headers) that are corrected once a file is decoded.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

_BAR = 24
_MIN_INTERVAL_S = 0.1


class Progress:
    def __init__(
        self,
        stream: TextIO | None = None,
        enabled: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        self._clock = clock
        self._started = clock()
        self._last_draw = -1.0
        self._expected: dict[str, float] = {}
        self.total_s = 0.0
        self.done_s = 0.0
        self.files_done = 0
        self.files_total = 0

    def expect(self, name: str, seconds: float) -> None:
        """Announce a file and its (estimated) duration."""
        self._expected[name] = seconds
        self.total_s += seconds
        self.files_total += 1

    def loaded(self, name: str, seconds: float) -> None:
        """Replace a file's estimate with its decoded duration."""
        self.total_s += seconds - self._expected.get(name, 0.0)
        self._expected[name] = seconds
        self._draw()

    def advance(self, seconds: float) -> None:
        self.done_s += seconds
        self._draw()

    def file_done(self) -> None:
        self.files_done += 1
        self._draw(force=True)

    @property
    def speed(self) -> float:
        elapsed = self._clock() - self._started
        return self.done_s / elapsed if elapsed > 0 else 0.0

    def line(self) -> str:
        total = max(self.total_s, self.done_s, 1e-9)
        frac = min(self.done_s / total, 1.0)
        filled = int(frac * _BAR)
        bar = "#" * filled + "." * (_BAR - filled)
        return (
            f"[{bar}] {self.done_s:7.1f}/{total:.1f} s audio  {self.speed:5.1f}x real time  "
            f"files {self.files_done}/{self.files_total}"
        )

    def _draw(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = self._clock()
        if not force and now - self._last_draw < _MIN_INTERVAL_S:
            return
        self._last_draw = now
        self.stream.write("\r" + self.line())
        self.stream.flush()

    def clear(self) -> None:
        """Wipe the bar (before printing a message); the next update redraws it."""
        if self.enabled and self._last_draw >= 0:
            self.stream.write("\r\x1b[K")
            self.stream.flush()

    def close(self) -> None:
        if self.enabled and self._last_draw >= 0:
            self._draw(force=True)
            self.stream.write("\n")
            self.stream.flush()
