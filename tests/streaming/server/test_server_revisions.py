"""Revisions on kettle's own protocol, end to end through the server with the fake model.

The fake model's refinement spells "alpha" as "alfa" (transcribe/model/fake.py), so every final but
the last (which has nothing after it to hear) gets a revision.
"""

from __future__ import annotations

import json
from typing import Any

from kettle.streaming.client.client import to_s16le
from kettle.streaming.server.server import KettleServer

from tests.streaming.server.conftest import (
    THREE_UTTERANCES,
    check_finals,
    kinds,
    open_ws,
    read_all,
    send_chunks,
)

PCM = to_s16le(THREE_UTTERANCES)


async def run(server: KettleServer, config: dict[str, object]) -> list[dict[str, Any]]:
    ws = await open_ws(server)
    await ws.send(json.dumps({"type": "config", **config}))
    await send_chunks(ws, PCM)
    await ws.send('{"type": "stop"}')
    messages, code = await read_all(ws)
    assert code == 1000
    return messages


async def test_revisions_come_after_their_final_and_before_done(server: KettleServer) -> None:
    messages = await run(server, {"revisions": True, "word_timestamps": True})
    finals = check_finals(messages)
    revisions = [m for m in messages if m["type"] == "revision"]
    assert [r["utterance"] for r in revisions] == [0, 1]
    for r in revisions:
        final = finals[r["utterance"]]
        assert messages.index(final) < messages.index(r) < len(messages) - 1
        assert r["text"] == final["text"].replace("alpha", "alfa")
        assert set(r) == {"type", "utterance", "start", "end", "text", "words", "language"}
        assert r["start"] == final["start"]
        assert [w["word"] for w in r["words"]] == r["text"].split()
    metrics = server.metrics
    assert metrics.value("kettle_refinements_total", {"outcome": "revised"}) == 2
    assert metrics.value("kettle_refinements_total", {"outcome": "last"}) == 1
    assert metrics.value("kettle_revision_delay_seconds_count") == 2


async def test_without_the_opt_in_nothing_changes_on_the_wire(server: KettleServer) -> None:
    plain = await run(server, {})
    assert "revision" not in kinds(plain)
    without_words = await run(server, {"revisions": True})
    revisions = [m for m in without_words if m["type"] == "revision"]
    assert revisions and all("words" not in r for r in revisions)
    assert all("words" not in m for m in without_words if m["type"] == "final")
    assert server.metrics.value("kettle_refinements_total", {"outcome": "revised"}) == 2
