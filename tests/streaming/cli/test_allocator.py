"""allocator: `kettle serve --allocator` re-executes onto jemalloc (or tcmalloc) once, only
where the library is installed, and leaves glibc runs and already-preloaded runs alone."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from kettle.streaming.cli import allocator
from kettle.streaming.cli.allocator import MARKER, plan
from kettle.transcribe.errors import ConfigError

JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
GLIBC_MAPS = "7f00-7f01 r-xp 0 08:01 1 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
JEMALLOC_MAPS = GLIBC_MAPS + f"7f02-7f03 r-xp 0 08:01 2 {JEMALLOC}\n"


def test_auto_preloads_jemalloc_where_installed_and_marks_the_environment() -> None:
    decided = plan("auto", {"LD_PRELOAD": "/opt/other.so", "PATH": "/bin"}, GLIBC_MAPS, JEMALLOC)
    assert decided.allocator == "jemalloc" and decided.env is not None
    assert decided.env["LD_PRELOAD"] == f"{JEMALLOC} /opt/other.so"
    assert decided.env[MARKER] == "jemalloc" and decided.env["PATH"] == "/bin"


def test_auto_without_the_library_runs_on_glibc_as_is() -> None:
    assert plan("auto", {}, GLIBC_MAPS, None) == allocator.Plan("glibc")


def test_asked_for_and_missing_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="libtcmalloc-minimal4"):
        plan("tcmalloc", {}, GLIBC_MAPS, None)
    with pytest.raises(ConfigError, match="--allocator must be one of"):
        plan("mimalloc", {}, GLIBC_MAPS, JEMALLOC)


def test_never_twice_and_never_when_already_running_on_it() -> None:
    # The re-executed process (marked) does not exec again, even if the preload failed.
    assert plan("auto", {MARKER: "jemalloc"}, GLIBC_MAPS, JEMALLOC).env is None
    assert plan("jemalloc", {}, JEMALLOC_MAPS, JEMALLOC) == allocator.Plan("jemalloc")
    assert plan("glibc", {}, JEMALLOC_MAPS, JEMALLOC) == allocator.Plan("jemalloc")
    assert plan("glibc", {}, GLIBC_MAPS, JEMALLOC) == allocator.Plan("glibc")


def test_which_malloc_a_memory_map_shows() -> None:
    assert allocator.loaded(GLIBC_MAPS) == "glibc"
    assert allocator.loaded(JEMALLOC_MAPS) == "jemalloc"
    assert allocator.loaded("x /usr/lib/libtcmalloc_minimal.so.4.5.10\n") == "tcmalloc"


def test_find_library_looks_in_the_given_folders(tmp_path: Path) -> None:
    assert allocator.find_library("jemalloc", (str(tmp_path),)) is None
    library = tmp_path / "libjemalloc.so.2"
    library.write_bytes(b"")
    assert allocator.find_library("jemalloc", (str(tmp_path),)) == str(library)


def _serve_maps(*flags: str) -> tuple[str, str]:
    """Start `kettle serve` as a user would, read its memory map once it serves, stop it."""
    env = {k: v for k, v in os.environ.items() if k not in (MARKER, "LD_PRELOAD")}
    cmd = [sys.executable, "-m", "kettle.streaming.cli.main", "serve", "--fake-model"]
    proc = subprocess.Popen(
        [*cmd, "--port", "0", *flags], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert re.fullmatch(r"kettle serving on http://\S+\n", line), line
        return allocator.loaded(Path(f"/proc/{proc.pid}/maps").read_text()), line
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.mark.skipif(not Path(JEMALLOC).is_file(), reason="needs libjemalloc2 (apt)")
def test_kettle_serve_runs_on_jemalloc_by_default_and_on_glibc_when_asked() -> None:
    assert _serve_maps()[0] == "jemalloc"
    assert _serve_maps("--allocator", "glibc")[0] == "glibc"
