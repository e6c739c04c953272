"""native_memory: glibc's malloc_trim is found only where glibc is, and the engine calls it
at most once an interval, once per stretch of work: when idle, or between batches after a
whole interval of work without a pause."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest
from kettle.streaming.engine import native_memory
from kettle.streaming.engine.native_memory import MemoryRelease

JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"


def test_first_idle_release_waits_for_work_then_comes_at_once() -> None:
    calls: list[int] = []
    trim = MemoryRelease(60.0, lambda: calls.append(1))
    assert not trim.due(0.0, idle=True)  # an engine that never worked has nothing to give back
    trim.note_work(0.0)
    assert trim.due(0.0, idle=True)
    trim.run(0.0)
    assert calls == [1] and trim.count == 1


def test_idle_at_most_once_an_interval_and_only_after_work() -> None:
    calls: list[float] = []
    trim = MemoryRelease(60.0, lambda: calls.append(1))
    trim.note_work(0.0)
    trim.run(10.0)
    trim.note_work(20.0)
    assert not trim.due(69.9, idle=True)
    assert trim.due(70.0, idle=True)
    trim.run(70.0)
    assert not trim.due(1000.0, idle=True)  # idle since: nothing new to give back
    assert len(calls) == 2


def test_busy_release_waits_a_whole_interval_of_work() -> None:
    trim = MemoryRelease(60.0, lambda: None)
    trim.note_work(5.0)
    trim.note_work(30.0)  # the stretch started at 5 s
    assert not trim.due(64.9, idle=False)
    assert trim.due(65.0, idle=False)
    trim.run(65.0)
    trim.note_work(66.0)
    assert not trim.due(124.9, idle=False)  # an interval from the last release
    assert trim.due(125.0, idle=False)


def test_never_busy_released_twice_without_work_between() -> None:
    trim = MemoryRelease(60.0, lambda: None)
    trim.note_work(0.0)
    trim.run(60.0)
    assert not trim.due(500.0, idle=False)


def test_found_exactly_where_python_runs_on_glibc() -> None:
    on_glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    release = native_memory.load_malloc_trim()
    assert (release is not None) == on_glibc
    if release is not None:
        release()  # callable as wired: malloc_trim(0) returns, nothing raises


def test_none_off_linux(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    assert native_memory.load_malloc_trim() is None


def test_glibc_process_releases_by_trim_not_by_jemalloc() -> None:
    if platform.libc_ver()[0] != "glibc" or "libjemalloc" in Path("/proc/self/maps").read_text():
        pytest.skip("not a plain glibc process")
    assert native_memory.load_jemalloc_purge() is None
    assert native_memory.load_release() is not None


@pytest.mark.skipif(not Path(JEMALLOC).is_file(), reason="needs libjemalloc2 (apt)")
def test_on_jemalloc_the_release_purges_its_arenas() -> None:
    code = (
        "import ctypes; from kettle.streaming.engine import native_memory as n; "
        "p = n.load_jemalloc_purge(); assert p is not None; p(); "
        "assert n.load_release().__qualname__.startswith('load_jemalloc_purge'); "
        "m = ctypes.CDLL(None).mallctl; "
        "assert m(b'arena.4096.purge', None, None, None, ctypes.c_size_t(0)) == 0; print('ok')"
    )
    env = {**os.environ, "LD_PRELOAD": JEMALLOC}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr
