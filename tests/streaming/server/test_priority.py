"""The model's threads below the event loop: per-thread nice values, inherited (Linux)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import TypeVar

import pytest
from kettle.streaming.server.priority import lower_this_thread, thread_nice
from kettle.streaming.server.server import KettleServer, ServerConfig
from kettle.transcribe.errors import ConfigError
from kettle.transcribe.fake import FakeDecoder

T = TypeVar("T")
linux_only = pytest.mark.skipif(sys.platform != "linux", reason="per-thread nice is Linux's")


def in_thread(fn: Callable[[], T]) -> T:
    out: list[T] = []
    thread = threading.Thread(target=lambda: out.append(fn()))
    thread.start()
    thread.join()
    return out[0]


def room_for(increment: int) -> None:
    if thread_nice() + increment > 19:
        pytest.skip("already near the lowest priority")


@linux_only
def test_a_lowered_thread_and_the_threads_it_creates_are_nicer_the_caller_is_not() -> None:
    room_for(3)
    base = thread_nice()

    def lowered() -> tuple[bool, int, int]:
        changed = lower_this_thread(3)
        return changed, thread_nice(), in_thread(thread_nice)  # a "compute thread" it creates

    changed, own, child = in_thread(lowered)
    assert changed and own == base + 3 and child == base + 3
    assert thread_nice() == base  # the calling thread (the event loop's) keeps its priority


@linux_only
async def test_the_server_loads_its_model_below_the_loop() -> None:
    room_for(2)
    base = thread_nice()
    seen: list[int] = []

    def load() -> FakeDecoder:
        seen.append(in_thread(thread_nice))  # as CTranslate2's compute threads would see it
        return FakeDecoder()

    server = KettleServer(ServerConfig(port=0, model_nice=2), load)
    await server.start()
    try:
        assert seen == [base + 2] and thread_nice() == base
    finally:
        await server.shutdown(timeout=5)


def test_zero_changes_nothing_and_bounds_are_checked() -> None:
    assert lower_this_thread(0) is False
    with pytest.raises(ValueError):
        lower_this_thread(20)
    with pytest.raises(ConfigError, match="model_nice"):
        ServerConfig(model_nice=20)
