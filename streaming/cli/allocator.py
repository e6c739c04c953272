"""`kettle serve --allocator`: run the server on jemalloc instead of glibc's malloc.

glibc's malloc keeps a long-running server's freed native memory in fragments it cannot
give back, so RSS creeps up under varied decode shapes and many threads (benchmarks/soak.py
and RESULTS.md "soak"); jemalloc's size classes and decay-based purging keep it flat. A
malloc has to be chosen before the process starts, so the CLI re-executes itself once with
the library in ``LD_PRELOAD`` (the way an operator would start it by hand) and marks the
environment so that it never does so twice.

- ``auto`` (the default): jemalloc where the library is installed (Debian/Ubuntu:
  ``apt install libjemalloc2``), else glibc's malloc as it comes;
- ``jemalloc`` / ``tcmalloc``: that library, an error where it is not installed;
- ``glibc``: no re-exec (an ``LD_PRELOAD`` already set is left as it is).

The decision is pure (`plan`); `ensure` carries it out.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kettle.transcribe.errors import ConfigError

CHOICES = ("auto", "jemalloc", "tcmalloc", "glibc")
# The sonames Debian's packages install (libjemalloc2, libtcmalloc-minimal4).
SONAMES = {"jemalloc": "libjemalloc.so.2", "tcmalloc": "libtcmalloc_minimal.so.4"}
LIBRARY_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
)
# Set in the re-executed process: the allocator it was started with (never a second exec).
MARKER = "KETTLE_ALLOCATOR"


@dataclass(frozen=True)
class Plan:
    allocator: str  # what the server will run on: jemalloc, tcmalloc or glibc
    env: dict[str, str] | None = None  # the environment to re-execute with; None: run as is


def find_library(name: str, dirs: tuple[str, ...] = LIBRARY_DIRS) -> str | None:
    """The installed path of ``name``'s shared library, or None."""
    soname = SONAMES[name]
    for folder in dirs:
        path = Path(folder) / soname
        if path.is_file():
            return str(path)
    return None


def loaded(maps: str) -> str:
    """Which malloc a process runs on, from its /proc/PID/maps text."""
    for name, soname in SONAMES.items():
        if soname.split(".so")[0] in maps:
            return name
    return "glibc"


def plan(choice: str, environ: Mapping[str, str], maps: str, library: str | None) -> Plan:
    """What `ensure` does for ``choice``: ``library`` is the wanted allocator's path where
    installed (jemalloc's for auto), ``maps`` this process's memory map."""
    if choice not in CHOICES:
        raise ConfigError(f"--allocator must be one of {', '.join(CHOICES)}, not {choice!r}")
    running = loaded(maps)
    if choice == "glibc" or MARKER in environ:
        return Plan(running)
    wanted = "jemalloc" if choice == "auto" else choice
    if running == wanted:
        return Plan(running)
    if library is None:
        if choice == "auto":
            return Plan(running)
        raise ConfigError(
            f"--allocator {choice}: {SONAMES[choice]} is not installed (Debian: apt install "
            f"{'libjemalloc2' if choice == 'jemalloc' else 'libtcmalloc-minimal4'})"
        )
    preload = environ.get("LD_PRELOAD", "")
    env = dict(environ)
    env["LD_PRELOAD"] = f"{library} {preload}".strip()
    env[MARKER] = wanted
    return Plan(wanted, env)


def ensure(choice: str) -> str:
    """Re-execute this process on ``choice``'s allocator if it is not running on it yet
    (does not return then); the allocator the process runs on otherwise."""
    wanted = "jemalloc" if choice == "auto" else choice
    library = find_library(wanted) if wanted in SONAMES else None
    maps = Path("/proc/self/maps").read_text() if sys.platform.startswith("linux") else ""
    decided = plan(choice, os.environ, maps, library)
    if decided.env is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], decided.env)
    return decided.allocator
