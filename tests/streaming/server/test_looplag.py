"""Event-loop lag measurement, driven by a manual clock."""

from __future__ import annotations

import asyncio

import pytest
from kettle.streaming.server.looplag import LagWindow, LoopLagMonitor


def test_window_quantiles_and_bound() -> None:
    window = LagWindow(size=100)
    assert window.quantile(0.99) == 0.0
    for i in range(1, 201):  # 1..200 ms; only the last 100 are kept
        window.add(i / 1000)
    assert len(window) == 100 and window.count == 200 and window.worst == 0.2
    assert window.quantile(0.5) == 0.15
    assert window.quantile(0.99) == 0.199
    assert window.quantile(1.0) == 0.2
    assert window.samples() == [i / 1000 for i in range(101, 201)]
    with pytest.raises(ValueError):
        window.quantile(1.5)


async def test_monitor_reports_lateness_beyond_the_interval() -> None:
    now = [100.0]
    late = iter([0.0, 0.003, 0.25, 0.0])
    seen: list[float] = []
    done = asyncio.Event()

    async def sleep(seconds: float) -> None:
        try:
            now[0] += seconds + next(late)  # the loop woke us this late
        except StopIteration:
            done.set()
            await asyncio.Event().wait()  # park until cancelled

    monitor = LoopLagMonitor(seen.append, interval_s=0.05, clock=lambda: now[0], sleep=sleep)
    monitor.start()
    await asyncio.wait_for(done.wait(), 30)
    await monitor.stop()
    assert seen == pytest.approx([0.0, 0.003, 0.25, 0.0])


def test_bad_interval() -> None:
    with pytest.raises(ValueError):
        LoopLagMonitor(print, interval_s=0)
