"""The outbound half of a connection: the codec's messages, queued and written in order.

`Writer.queue` parks a `Send`'s message in the outbox (which drops stale partials for a slow
reader; False when a reader that reads nothing has let too many pile up); `Writer.run` sends
what the outbox holds, measures each partial's and final's lag and each revision's delay,
and closes the connection after the codec's closing message.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from kettle.streaming.core.backlog import FINAL, PARTIAL, REVISION
from kettle.streaming.protocols.base import CLOSE_INTERNAL, OutMessage
from kettle.streaming.server.connection import ConnectionState
from kettle.streaming.server.ingress import AudioIngress
from kettle.streaming.server.outbox import Outbox
from kettle.streaming.server.transport import Transport

if TYPE_CHECKING:
    from kettle.streaming.server.metrics import ServerMetrics

FINAL_ARRIVALS_KEPT = 64  # finals whose revision delay can still be measured


class Writer:
    def __init__(
        self,
        transport: Transport,
        state: ConnectionState,
        ingress: AudioIngress,
        *,
        close: Callable[[int, str], Awaitable[None]],
        metrics: ServerMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.transport = transport
        self.state = state
        self.ingress = ingress
        self.outbox = Outbox(state.limits.outbox_limit)
        self.metrics = metrics
        self.clock = clock
        self._close = close
        # When the audio at each recent final's end arrived: a revision's delay runs from it.
        self._final_arrivals: dict[int, float] = {}

    def queue(self, message: OutMessage, error_code: str | None) -> bool:
        """Park a message to send; False when the reader has let the outbox fill up."""
        if error_code is not None and self.metrics is not None:
            self.metrics.errors.labels(code=error_code).inc()
        return self.outbox.put(message)

    async def run(self) -> None:
        """Send what the outbox holds, until the closing message (then close)."""
        while True:
            message = await self.outbox.get()
            if message.text or not message.closing:  # an empty closing one: just close
                await self.transport.send(message.text)
            if message.kind in (PARTIAL, FINAL):
                self._observe_lag(message)
            elif message.kind == REVISION:
                self._observe_revision(message)
            if message.closing:
                self.state.finish()
                code = message.close_code or (
                    CLOSE_INTERNAL if message.fatal else self.state.close_code
                )
                await self._close(code, message.close_reason)
                return

    def _observe_lag(self, message: OutMessage) -> None:
        arrived = self.ingress.arrival_of(message.end)
        if arrived is None or self.metrics is None:
            return
        lag = max(0.0, self.clock() - arrived)
        if message.kind == PARTIAL:
            self.metrics.partial_lag.observe(lag)
        else:
            self.metrics.final_lag.observe(lag)
            self.ingress.prune_before(message.end)
            self._final_arrivals[message.utterance] = arrived
            if len(self._final_arrivals) > FINAL_ARRIVALS_KEPT:
                del self._final_arrivals[min(self._final_arrivals)]

    def _observe_revision(self, message: OutMessage) -> None:
        arrived = self._final_arrivals.get(message.utterance)  # a final may be revised twice
        if arrived is not None and self.metrics is not None:
            self.metrics.revision_delay.observe(max(0.0, self.clock() - arrived))
