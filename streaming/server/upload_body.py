"""An upload's body, read from the ASGI receive channel under its limits: the byte limit, the
pace it must come at and the byte budget all bodies share (upload_limits.py).

The body ends when the server says so (``more_body`` false). One that ends short of its
Content-Length ended early: the client half-closed its side before sending it all, which
kettle's HTTP protocol (http_protocol.py) hands on as the body's end rather than as a
disconnect, so that the client gets an answer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from kettle.streaming.server.upload_errors import (
    BodyEndedEarly,
    BodyTimeout,
    UploadsFull,
    UploadTooLarge,
)
from kettle.streaming.server.upload_limits import BodyPace, BudgetShare
from starlette.requests import ClientDisconnect, Request
from starlette.types import Message

_BUDGET_FULL = "the uploads being read or transcribed hold as many bytes as kettle takes"


def declared_length(request: Request) -> int | None:
    """The body's Content-Length, when it has one."""
    declared = request.headers.get("content-length", "")
    return int(declared) if declared.isdigit() else None


async def read_body(
    request: Request,
    limit: int,
    *,
    pace: BodyPace | None = None,
    share: BudgetShare | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> bytes:
    """The whole body, or as soon as it is known to fail: `UploadTooLarge` over ``limit``
    (Content-Length is checked first), `UploadsFull` when ``share`` has no room for it,
    `BodyTimeout` when it breaks ``pace`` (None: any pace), `BodyEndedEarly` short of its
    Content-Length, `ClientDisconnect` when the client goes."""
    declared = declared_length(request)
    if declared is not None and declared > limit:
        raise UploadTooLarge(limit)
    if share is not None and declared is not None and declared > share.room:
        raise UploadsFull(_BUDGET_FULL)
    chunks: list[bytes] = []
    size = 0
    start = clock()
    while True:
        message = await _next_message(request, pace, size, clock, start)
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        if message["type"] != "http.request":
            continue
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise UploadTooLarge(limit)
        if share is not None and not share.take(len(chunk)):
            raise UploadsFull(_BUDGET_FULL, body_unread=bool(message.get("more_body", False)))
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    if declared is not None and size < declared:
        raise BodyEndedEarly(size, declared)
    return b"".join(chunks)


async def _next_message(
    request: Request,
    pace: BodyPace | None,
    received: int,
    clock: Callable[[], float],
    start: float,
) -> Message:
    """The next ASGI message, or `BodyTimeout` once waiting longer would break ``pace``."""
    if pace is None:
        return await request.receive()
    cutoff, reason = pace.cutoff(received)
    elapsed = clock() - start
    try:
        if elapsed >= cutoff:
            raise TimeoutError
        return await asyncio.wait_for(request.receive(), cutoff - elapsed)
    except TimeoutError:
        message = _cut_message(pace, reason, received, max(elapsed, cutoff))
        raise BodyTimeout(message, reason) from None


def _cut_message(pace: BodyPace, reason: str, received: int, elapsed: float) -> str:
    if reason == "deadline":
        return f"the request body was not all received within {pace.deadline_s:g} s"
    return (
        f"the request body came too slowly: {received} bytes in {elapsed:.1f} s, under the "
        f"minimum of {pace.min_rate:g} bytes a second"
    )


__all__ = ["declared_length", "read_body"]
