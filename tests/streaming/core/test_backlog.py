"""The one bounded-queue policy (engine streams and the server's outbox)."""

from __future__ import annotations

import pytest
from kettle.streaming.core.backlog import FINAL, OTHER, PARTIAL, Backlog

Item = tuple[str, int, str]


def backlog(limit: int = 10) -> Backlog[Item]:
    return Backlog(limit, lambda item: (item[0], item[1]))


def drain(b: Backlog[Item]) -> list[str]:
    out = []
    while (item := b.popleft()) is not None:
        out.append(item[2])
    return out


def test_a_partial_replaces_waiting_partials_of_its_and_earlier_utterances() -> None:
    b = backlog()
    b.put((PARTIAL, 0, "p0a"))
    b.put((FINAL, 0, "f0"))
    b.put((PARTIAL, 1, "p1a"))
    b.put((PARTIAL, 1, "p1b"))
    b.put((PARTIAL, 2, "p2a"))
    assert drain(b) == ["f0", "p2a"]
    assert b.dropped_partials == 3  # p0a by f0; p1a, p1b by newer partials


def test_a_final_drops_only_its_own_utterances_partials() -> None:
    b = backlog()
    b.put((PARTIAL, 3, "p3"))
    b.put((FINAL, 2, "f2"))
    b.put((FINAL, 3, "f3"))
    assert drain(b) == ["f2", "f3"]


def test_finals_and_others_are_never_dropped_and_overflow_is_reported() -> None:
    b = backlog(limit=2)
    assert b.put((FINAL, 0, "f0")) and b.put((OTHER, -1, "e"))
    assert not b.put((FINAL, 1, "f1"))
    assert b.overflowed and len(b) == 3
    assert drain(b) == ["f0", "e", "f1"]


def test_limit_must_be_positive() -> None:
    with pytest.raises(ValueError):
        backlog(limit=0)
