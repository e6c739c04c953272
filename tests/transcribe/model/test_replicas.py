"""A batch split across model replicas: parts, order, concurrency and failures."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest
from kettle.transcribe.model.replicas import Replicas, split


@pytest.mark.parametrize(
    ("n", "parts", "sizes"),
    [(0, 2, []), (1, 2, [1]), (5, 1, [5]), (5, 2, [3, 2]), (8, 3, [3, 3, 2]), (2, 4, [1, 1])],
)
def test_split_keeps_order_in_near_equal_runs(n: int, parts: int, sizes: list[int]) -> None:
    items = list(range(n))
    runs = split(items, parts)
    assert [len(r) for r in runs] == sizes
    assert [x for r in runs for x in r] == items


def test_map_runs_the_parts_at_once_and_keeps_row_order() -> None:
    both = threading.Barrier(2, timeout=10)  # each part waits for the other: they overlap
    seen: list[tuple[str, tuple[int, ...]]] = []

    def double(rows: Sequence[int]) -> list[int]:
        seen.append((threading.current_thread().name, tuple(rows)))
        both.wait()
        return [2 * r for r in rows]

    replicas = Replicas(2)
    try:
        assert replicas.map(double, [1, 2, 3, 4, 5]) == [2, 4, 6, 8, 10]
    finally:
        replicas.close()
    assert sorted(rows for _, rows in seen) == [(1, 2, 3), (4, 5)]
    assert len({name for name, _ in seen}) == 2


def test_one_replica_or_one_row_is_a_single_call() -> None:
    calls: list[tuple[int, ...]] = []

    def echo(rows: Sequence[int]) -> list[int]:
        calls.append(tuple(rows))
        return list(rows)

    assert Replicas(1).map(echo, [1, 2, 3]) == [1, 2, 3]
    two = Replicas(2)
    try:
        assert two.map(echo, [7]) == [7]
    finally:
        two.close()
    assert calls == [(1, 2, 3), (7,)]


def test_a_failing_part_raises_after_every_part_is_done() -> None:
    finished: list[tuple[int, ...]] = []
    release = threading.Event()

    def fail_first(rows: Sequence[int]) -> list[int]:
        if rows[0] == 0:
            release.set()
            raise RuntimeError("model failed")
        release.wait(10)
        finished.append(tuple(rows))
        return list(rows)

    replicas = Replicas(2)
    try:
        with pytest.raises(RuntimeError, match="model failed"):
            replicas.map(fail_first, [0, 1, 2, 3])
        assert finished == [(2, 3)]  # the other part ran to its end before the error came
    finally:
        replicas.close()


def test_replicas_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Replicas(0)
