"""native_memory: glibc's malloc_trim is found only where glibc is, and an idle engine
calls it at most once an interval, once per stretch of work."""

from __future__ import annotations

import platform
import sys

import pytest
from kettle.streaming import native_memory
from kettle.streaming.native_memory import IdleTrim


def test_first_trim_waits_for_work_then_comes_at_once() -> None:
    calls: list[int] = []
    trim = IdleTrim(60.0, lambda: calls.append(1))
    assert not trim.due(0.0)  # an engine that never worked has nothing to give back
    trim.note_work()
    assert trim.due(0.0)
    trim.run(0.0)
    assert calls == [1] and trim.count == 1


def test_at_most_once_an_interval_and_only_after_work() -> None:
    calls: list[float] = []
    trim = IdleTrim(60.0, lambda: calls.append(1))
    trim.note_work()
    trim.run(10.0)
    trim.note_work()
    assert not trim.due(69.9)
    assert trim.due(70.0)
    trim.run(70.0)
    assert not trim.due(1000.0)  # idle since: nothing new to give back
    assert len(calls) == 2


def test_found_exactly_where_python_runs_on_glibc() -> None:
    on_glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    release = native_memory.load_malloc_trim()
    assert (release is not None) == on_glibc
    if release is not None:
        release()  # callable as wired: malloc_trim(0) returns, nothing raises


def test_none_off_linux(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    assert native_memory.load_malloc_trim() is None
