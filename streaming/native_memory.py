"""Cap glibc's malloc arenas before the model's threads start.

glibc gives each thread that meets a locked arena an arena of its own (up to 8 per core);
CTranslate2's worker threads allocate and free large, varied buffers in theirs, and the
memory freed there is kept, fragmented, rather than returned: a long-running server's RSS
creeps up (benchmarks/bench_rss.py, RESULTS.md "rss"). Two arenas keep that bounded at no
measured decode cost. A no-op where the C library is not glibc, and when the operator set
MALLOC_ARENA_MAX (glibc read it at start-up; theirs wins).
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

M_ARENA_MAX = -8  # glibc's malloc.h
DEFAULT_ARENAS = 2


def _load_glibc() -> Any | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    # musl and others may answer to libc.so.6 without being glibc; only glibc has this.
    return libc if hasattr(libc, "gnu_get_libc_version") else None


def limit_malloc_arenas(
    arenas: int = DEFAULT_ARENAS,
    *,
    load: Callable[[], Any | None] = _load_glibc,
    environ: dict[str, str] | os._Environ[str] = os.environ,
) -> bool:
    """Ask glibc for at most ``arenas`` malloc arenas; True if it was asked and agreed.

    Call before threads start: arenas that already exist stay."""
    if "MALLOC_ARENA_MAX" in environ:
        return False
    libc = load()
    if libc is None:
        return False
    ok = bool(libc.mallopt(ctypes.c_int(M_ARENA_MAX), ctypes.c_int(arenas)))
    if ok:
        logger.info("malloc arenas capped at %d (glibc)", arenas)
    return ok
