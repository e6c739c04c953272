"""The engine's offline work (``Engine.decode_offline``: files and uploads) in progress.

Each call's requests go into the request ledger as uploads (``Purpose.UPLOAD``: the lowest
priority, after every live request) and come back in request order; cancelling the caller
withdraws what is still queued.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence

from kettle.streaming.engine.clock import Clock
from kettle.streaming.engine.ledger import Ledger, OfflineCall
from kettle.transcribe.errors import KettleError
from kettle.transcribe.types import DecodeRequest, DecodeResult, Purpose


class Uploads:
    """The decode_offline calls not yet returned."""

    def __init__(self, ledger: Ledger, clock: Clock, kick: Callable[[], None]) -> None:
        self._ledger = ledger
        self._clock = clock
        self._kick = kick  # wakes the engine's loop
        self._calls: set[OfflineCall] = set()

    async def decode(self, requests: Sequence[DecodeRequest]) -> list[DecodeResult]:
        if not requests:
            return []
        loop = asyncio.get_running_loop()
        call = OfflineCall([None] * len(requests), loop.create_future(), len(requests))
        self._calls.add(call)
        now = self._clock.now()
        for i, request in enumerate(requests):
            upload = dataclasses.replace(request, purpose=Purpose.UPLOAD)
            self._ledger.submit(upload, now, call, index=i)
        self._kick()
        try:
            return await call.future
        finally:
            self._calls.discard(call)
            self._ledger.cancel(call)  # what is still queued or running

    def close(self) -> None:
        """The engine shuts down: every call in progress fails."""
        for call in list(self._calls):
            self._ledger.cancel(call)
            if not call.future.done():
                call.future.set_exception(KettleError("the engine shut down"))
        self._calls.clear()
