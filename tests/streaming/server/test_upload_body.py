"""upload_body.read_body under its pace, budget and Content-Length: requests are Starlette's
over a scripted ASGI receive whose messages arrive at set times of an injected clock, so the
pace is judged without waiting (a stall waits a small configured time for real)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kettle.streaming.server.upload_body import read_body
from kettle.streaming.server.upload_errors import (
    BodyEndedEarly,
    BodyTimeout,
    UploadsFull,
    UploadTooLarge,
)
from kettle.streaming.server.upload_limits import BodyPace, ByteBudget
from starlette.requests import ClientDisconnect, Request

GUARD = 60  # seconds: a deadlock guard only


class Timed:
    """An ASGI client: each chunk arrives at its time on the clock, the last one ending the
    body unless ``stall`` (then nothing more comes) or ``leave`` (then the disconnect)."""

    def __init__(
        self,
        chunks: list[tuple[float, bytes]],
        *,
        declared: int | None = None,
        stall: bool = False,
        leave: bool = False,
    ) -> None:
        self.now = 0.0
        self.chunks = list(chunks)
        self.stall, self.leave = stall, leave
        self.reads = 0
        headers = [] if declared is None else [(b"content-length", str(declared).encode())]
        self.request = Request({"type": "http", "method": "POST", "headers": headers}, self._rx)

    def clock(self) -> float:
        return self.now

    async def _rx(self) -> dict[str, Any]:
        self.reads += 1
        if not self.chunks:
            if self.leave:
                return {"type": "http.disconnect"}
            await asyncio.Event().wait()  # stalled: nothing more ever comes
        at, body = self.chunks.pop(0)
        self.now = at
        last = not self.chunks and not self.stall and not self.leave
        return {"type": "http.request", "body": body, "more_body": not last}


async def read(client: Timed, pace: BodyPace | None = None, limit: int = 1 << 20) -> bytes:
    async with asyncio.timeout(GUARD):
        return await read_body(client.request, limit, pace=pace, clock=client.clock)


PACE = BodyPace(deadline_s=100.0, grace_s=10.0, min_rate=1000.0)


async def test_an_honest_body_at_the_rate_is_read_whole() -> None:
    # Twice the rate, then a 15 s pause that what it sent covers (60 kB: until 60 s).
    chunks = [(float(t), b"x" * 2000) for t in range(1, 31)] + [(45.0, b"y" * 1000)]
    assert await read(Timed(chunks), PACE) == b"x" * 60_000 + b"y" * 1000


async def test_a_dribbling_body_is_cut_as_slow_once_the_grace_is_over() -> None:
    chunks = [(t * 0.5, b"x" * 32) for t in range(1, 40)]  # 64 B/s
    client = Timed(chunks)
    with pytest.raises(BodyTimeout, match="too slowly") as cut:
        await read(client, PACE)
    assert cut.value.reason == "slow"
    assert client.reads == 20  # cut at the first message after 10 s: 10.0 s, 640 B


async def test_a_stalled_body_is_cut_as_slow_without_another_message() -> None:
    pace = BodyPace(deadline_s=GUARD, grace_s=0.05, min_rate=1000.0)  # a real 50 ms wait
    client = Timed([(0.0, b"x" * 10)], stall=True)
    with pytest.raises(BodyTimeout) as cut:
        await read(client, pace)
    assert cut.value.reason == "slow" and client.reads == 2


async def test_a_body_fast_enough_but_not_done_by_the_deadline_is_cut() -> None:
    pace = BodyPace(deadline_s=5.0, grace_s=1.0, min_rate=1000.0)
    chunks = [(t * 1.0, b"x" * 100_000) for t in range(1, 10)]
    with pytest.raises(BodyTimeout, match="within 5 s") as cut:
        await read(Timed(chunks), pace)
    assert cut.value.reason == "deadline"


async def test_a_body_short_of_its_content_length_ended_early() -> None:
    with pytest.raises(BodyEndedEarly, match="after 3 of the 10 bytes") as ended:
        await read(Timed([(0.0, b"abc")], declared=10), PACE)
    assert (ended.value.received, ended.value.declared) == (3, 10)
    assert await read(Timed([(0.0, b"abc")], declared=3), PACE) == b"abc"


async def test_limit_and_disconnect_still_apply_under_a_pace() -> None:
    with pytest.raises(UploadTooLarge):
        await read(Timed([(0.0, b"x" * 600), (0.1, b"x" * 600)]), PACE, limit=1000)
    with pytest.raises(ClientDisconnect):
        await read(Timed([(0.0, b"x")], leave=True), PACE)


async def test_a_body_without_room_in_the_budget_is_refused() -> None:
    budget = ByteBudget(1000)
    with budget.share() as other:
        assert other.take(600)
        declared = Timed([(0.0, b"x" * 500)], declared=500)
        with budget.share() as share, pytest.raises(UploadsFull) as refused:
            await read_body(declared.request, 1 << 20, share=share)
        assert declared.reads == 0 and not refused.value.body_unread  # nothing read
        chunked = Timed([(0.0, b"x" * 300), (0.0, b"x" * 300), (0.0, b"x")])
        with budget.share() as share, pytest.raises(UploadsFull) as refused:
            await read_body(chunked.request, 1 << 20, share=share)
        assert chunked.reads == 2 and refused.value.body_unread  # the rest still coming
    assert budget.held == 0
