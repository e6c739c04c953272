"""The server's live WebSocket connections: each admitted, accepted one gets its codec and a
connection runner on the engine; at shutdown every runner finishes its finals, or is closed
when that takes too long."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Awaitable, Callable

from kettle.streaming.protocols.base import CLOSE_GOING_AWAY, CodecContext
from kettle.streaming.protocols.handshake import Prepared, ProtocolRoute
from kettle.streaming.protocols.limits import Limits
from kettle.streaming.server.audio_budget import AudioAdmission
from kettle.streaming.server.metrics import ServerMetrics
from kettle.streaming.server.runner import ConnectionRunner
from kettle.streaming.server.serving import Serving
from kettle.streaming.server.transport import Transport

logger = logging.getLogger(__name__)


class Connections:
    def __init__(
        self,
        serving: Serving,
        limits: Limits,
        metrics: ServerMetrics,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.serving = serving
        self.limits = limits
        self.metrics = metrics
        self.clock = clock  # every connection's timers and audio budget run on it
        self._runners: set[ConnectionRunner] = set()

    def __len__(self) -> int:
        return len(self._runners)

    async def run(self, transport: Transport, prepared: Prepared, route: ProtocolRoute) -> None:
        """Run one admitted, accepted connection on ``route`` until it closes."""
        engine, model = self.serving.engine, self.serving.model_info
        if engine is None or model is None:  # pragma: no cover - admitted means loaded
            await transport.close(CLOSE_GOING_AWAY, "server is not ready")
            return
        connection_id = uuid.uuid4().hex  # the codec's session id, as its clients see it
        limits = route.connection_limits(self.limits)
        codec = prepared.make_codec(CodecContext(connection_id, model, limits))
        runner = ConnectionRunner(
            transport,
            codec,
            engine,
            connection_id=connection_id,
            limits=limits,
            metrics=self.metrics,
            clock=self.clock,
            admission=AudioAdmission(limits, self.clock()),
        )
        self._runners.add(runner)
        self.metrics.sessions_total.inc()
        try:
            if self.serving.draining:
                runner.begin_shutdown()
            await runner.run()
        finally:
            self._runners.discard(runner)

    def finish_all(self, close_code: int) -> list[Awaitable[object]]:
        """Server shutdown: every connection finishes its finals, then closes with
        ``close_code``; what to wait for until each has closed."""
        runners = list(self._runners)
        if runners:
            logger.info("shutting down: finishing %d open session(s)", len(runners))
        for runner in runners:
            try:
                runner.begin_shutdown(close_code)
            except Exception:  # one broken session must not stop the others' shutdown
                logger.exception("session %s: could not stop it", runner.connection_id)
                runner.force_close(close_code)
        return [runner.closed.wait() for runner in runners]

    def close_all(self, close_code: int) -> None:
        """Shutdown ran out of time: close what is still open with ``close_code`` now."""
        for runner in list(self._runners):
            runner.force_close(close_code)
