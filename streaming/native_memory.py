"""Give glibc's free heap back to the OS when the model is idle.

CTranslate2 and the feature code allocate and free large, varied buffers; glibc keeps what
is freed (its mmap threshold rises after the first large frees, so later buffers come from
the heap, where freed pages stay mapped). On tiny.en a third of the RSS was such free memory
(benchmarks/bench_rss.py, RESULTS.md "rss"), and a long soak's RSS crept up. malloc_trim(0)
returns it; it costs a few ms and the pages it returns fault in again, so the engine calls it
only when idle, at most once every interval, and only after work since the last trim.
A no-op where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import logging
import sys
from collections.abc import Callable

logger = logging.getLogger(__name__)


def load_malloc_trim() -> Callable[[], None] | None:
    """glibc's malloc_trim(0) as a callable, or None off glibc."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    # musl and others may answer to libc.so.6 without being glibc; only glibc has this.
    if not hasattr(libc, "gnu_get_libc_version") or not hasattr(libc, "malloc_trim"):
        return None
    trim = libc.malloc_trim

    def release() -> None:
        trim(ctypes.c_size_t(0))

    return release


class IdleTrim:
    """When an idle engine should release free memory: at most every ``interval_s``, and
    only once per stretch of work (an engine idle for hours trims once)."""

    def __init__(self, interval_s: float, release: Callable[[], None]) -> None:
        self.interval_s = interval_s
        self._release = release
        self._last: float | None = None
        self._worked = False
        self.count = 0

    def note_work(self) -> None:
        self._worked = True

    def due(self, now: float) -> bool:
        if not self._worked:
            return False
        return self._last is None or now - self._last >= self.interval_s

    def run(self, now: float) -> None:
        """Release (on the model's thread: no decode runs meanwhile) and restart the interval."""
        self._last = now
        self._worked = False
        self.count += 1
        self._release()
