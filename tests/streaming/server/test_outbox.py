"""server.outbox: the outbox."""

from __future__ import annotations

import asyncio

from kettle.streaming.core.backlog import FINAL, OTHER, PARTIAL
from kettle.streaming.protocols.base import OutMessage
from kettle.streaming.server.outbox import Outbox


def _kinds(box: Outbox) -> list[tuple[str, int, str]]:
    out = []
    while (m := box.get_nowait()) is not None:
        out.append((m.kind, m.utterance, m.text))
    return out


def test_outbox_drops_stale_partials_never_finals() -> None:
    box = Outbox(limit=100)
    box.put(OutMessage(OTHER, "ready"))
    box.put(OutMessage(PARTIAL, "p0a", 0))
    box.put(OutMessage(PARTIAL, "p0b", 0))  # replaces p0a
    box.put(OutMessage(PARTIAL, "p1a", 1))  # replaces p0b (older utterance)
    box.put(OutMessage(FINAL, "f0", 0))
    box.put(OutMessage(PARTIAL, "p1b", 1))  # replaces p1a, lands after f0
    box.put(OutMessage(FINAL, "f1", 1))  # drops p1b
    box.put(OutMessage(OTHER, "done", closing=True))
    assert _kinds(box) == [
        (OTHER, -1, "ready"),
        (FINAL, 0, "f0"),
        (FINAL, 1, "f1"),
        (OTHER, -1, "done"),
    ]
    assert box.dropped_partials == 4


def test_outbox_keeps_partial_of_next_utterance_before_older_final() -> None:
    box = Outbox()
    box.put(OutMessage(PARTIAL, "p2", 2))
    box.put(OutMessage(FINAL, "f1", 1))
    assert [t for _, _, t in _kinds(box)] == ["p2", "f1"]


def test_outbox_overflow_is_reported() -> None:
    box = Outbox(limit=3)
    assert all(box.put(OutMessage(FINAL, f"f{i}", i)) for i in range(3))
    assert not box.put(OutMessage(FINAL, "f3", 3))
    assert box.overflowed


async def test_outbox_get_waits_for_a_message() -> None:
    box = Outbox()
    getter = asyncio.create_task(box.get())
    await asyncio.sleep(0)
    assert not getter.done()
    box.put(OutMessage(FINAL, "f0", 0))
    assert (await asyncio.wait_for(getter, 1)).text == "f0"


# -- arrival log and metrics ----------------------------------------------------------------
