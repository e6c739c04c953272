"""Give glibc's free heap back to the OS, once a minute or so, on the model's thread.

CTranslate2 and the feature code allocate and free large, varied buffers; glibc keeps what
is freed (its mmap threshold rises after the first large frees, so later buffers come from
the heap, where freed pages stay mapped). On tiny.en a third of the RSS was such free memory
(benchmarks/bench_rss.py, RESULTS.md "rss"), and a long soak's RSS crept up. malloc_trim(0)
returns it; it costs a few ms and the pages it returns fault in again, so the engine calls it
at most once every interval and only after work since the last trim: when idle, or, when
the model has had no idle moment for a whole interval (a client flooding audio keeps it
busy for minutes), between two batches. A no-op where the C library is not glibc.

On jemalloc (`kettle serve --allocator`, streaming/cli/allocator.py) the same release
purges jemalloc's arenas instead (``arena.<all>.purge``): jemalloc returns free pages on a
decay timer anyway, but only when the process next allocates.
"""

from __future__ import annotations

import ctypes
import logging
import sys
from collections.abc import Callable

logger = logging.getLogger(__name__)


# jemalloc's MALLCTL_ARENAS_ALL: the pseudo-arena index that names every arena.
_ALL_ARENAS = 4096


def load_jemalloc_purge() -> Callable[[], None] | None:
    """jemalloc's purge of every arena as a callable, or None where malloc is not jemalloc."""
    try:
        mallctl = ctypes.CDLL(None).mallctl  # exported only where jemalloc is loaded
    except (OSError, AttributeError):
        return None
    name = f"arena.{_ALL_ARENAS}.purge".encode()

    def release() -> None:
        mallctl(name, None, None, None, ctypes.c_size_t(0))

    return release


def load_release() -> Callable[[], None] | None:
    """The release for the malloc this process runs on: jemalloc's purge, glibc's trim."""
    return load_jemalloc_purge() or load_malloc_trim()


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


class MemoryRelease:
    """When the engine should release free memory: at most every ``interval_s``, only once
    per stretch of work (an engine idle for hours releases once), preferably while idle,
    and between batches when work has gone on for a whole interval without a pause."""

    def __init__(self, interval_s: float, release: Callable[[], None]) -> None:
        self.interval_s = interval_s
        self._release = release
        self._last: float | None = None
        self._work_since: float | None = None  # first work after the last release
        self.count = 0

    def note_work(self, now: float) -> None:
        if self._work_since is None:
            self._work_since = now

    def due(self, now: float, *, idle: bool) -> bool:
        if self._work_since is None:
            return False  # nothing new to give back
        if idle:
            return self._last is None or now - self._last >= self.interval_s
        # Busy: wait a whole interval (from the last release, or from the first work) so a
        # server under steady load pays for one release a minute, not one per batch.
        since = self._work_since if self._last is None else self._last
        return now - since >= self.interval_s

    def run(self, now: float) -> None:
        """Release (on the model's thread: no decode runs meanwhile) and restart the interval."""
        self._last = now
        self._work_since = None
        self.count += 1
        self._release()


def memory_release(
    interval_s: float | None, release: Callable[[], None] | None
) -> MemoryRelease | None:
    """The engine's trimmer for ``release_memory_s`` (None: never; default: load_release)."""
    if interval_s is None:
        return None
    release = release or load_release()
    return None if release is None else MemoryRelease(interval_s, release)
