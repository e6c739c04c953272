"""native_memory: glibc's arena cap is asked for only where glibc is, and never over the
operator's own MALLOC_ARENA_MAX."""

from __future__ import annotations

import platform
import sys
from typing import Any

import pytest
from kettle.streaming import native_memory
from kettle.streaming.native_memory import M_ARENA_MAX, limit_malloc_arenas


class FakeLibc:
    def __init__(self, answer: int = 1) -> None:
        self.calls: list[tuple[int, int]] = []
        self.answer = answer

    def mallopt(self, param: Any, value: Any) -> int:
        self.calls.append((param.value, value.value))
        return self.answer


def test_asks_glibc_for_two_arenas() -> None:
    libc = FakeLibc()
    assert limit_malloc_arenas(load=lambda: libc, environ={}) is True
    assert libc.calls == [(M_ARENA_MAX, 2)]
    assert M_ARENA_MAX == -8  # glibc's malloc.h


def test_reports_a_refusal() -> None:
    libc = FakeLibc(answer=0)
    assert limit_malloc_arenas(4, load=lambda: libc, environ={}) is False
    assert libc.calls == [(M_ARENA_MAX, 4)]


def test_no_op_without_glibc() -> None:
    assert limit_malloc_arenas(load=lambda: None, environ={}) is False


def test_the_operators_malloc_arena_max_wins() -> None:
    libc = FakeLibc()
    assert limit_malloc_arenas(load=lambda: libc, environ={"MALLOC_ARENA_MAX": "8"}) is False
    assert libc.calls == []


def test_glibc_is_found_only_on_linux(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    assert native_memory._load_glibc() is None


def test_finds_glibc_exactly_where_python_runs_on_it() -> None:
    on_glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert (native_memory._load_glibc() is not None) == on_glibc
