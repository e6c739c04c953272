"""The connection runner: drives one codec over one WebSocket, for any protocol.

Three tasks per connection:

- the reader takes one client message at a time (it asks for the next only when the last is
  handled, so an unread socket pushes back on the peer through TCP instead of buffering
  here), hands it to the codec and carries out the actions; it also enforces the idle
  timeout, the maximum session length and the finish timeout (see connection.py), and
  pauses while the client is ahead of its audio budget (intake.py);
- the pump takes the engine stream's events as soon as they exist (so a slow client never
  holds up the engine), passes them through the codec and carries out the actions (one pump
  per stream when the codec splits the channels into streams of their own: each channel's
  events go to `ChannelCodec.on_channel_event`);
- the writer sends what the outbox holds and closes the connection after the codec's closing
  message (writer.py).

A codec's actions are carried out in order, each by the half it concerns: `Send` and `Close`
by the outbound half (the writer's outbox; a close at once), `FeedAudio`, `Finalize`,
`Reconfigure` and `Stop` by the inbound half (`Intake`: the engine stream and the audio
budget). The connection's phases (open, stopped, finished) live in `ConnectionState`.

Failures: an unexpected exception in any task ends this connection with the codec's fatal
error and close 1011, never the server. A peer that reads nothing while its finals pile up
past the outbox limit is closed with 1008.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from kettle.streaming.core.events import Done, Partial
from kettle.streaming.protocols.base import (
    CLOSE_GOING_AWAY,
    CLOSE_INTERNAL,
    CLOSE_POLICY,
    Action,
    ChannelCodec,
    Close,
    Codec,
    Send,
)
from kettle.streaming.protocols.limits import Limits
from kettle.streaming.server.audio_budget import AudioAdmission
from kettle.streaming.server.connection import FINISH_TIMEOUT, ConnectionState
from kettle.streaming.server.ingress import AudioIngress
from kettle.streaming.server.intake import Intake
from kettle.streaming.server.outbox import Outbox
from kettle.streaming.server.transport import PeerGone, Transport
from kettle.streaming.server.writer import Writer

if TYPE_CHECKING:
    from kettle.streaming.engine.engine import Engine, Stream
    from kettle.streaming.server.metrics import ServerMetrics

__all__ = ["ConnectionRunner", "PeerGone", "Transport"]

logger = logging.getLogger(__name__)


class ConnectionRunner:
    def __init__(
        self,
        transport: Transport,
        codec: Codec,
        engine: Engine,
        *,
        connection_id: str,
        limits: Limits,
        metrics: ServerMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
        admission: AudioAdmission | None = None,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self.transport = transport
        self.codec = codec
        self.engine = engine
        self.connection_id = connection_id  # the uuid its codec tells the client, if any
        self.metrics = metrics
        self.clock = clock
        self.sleep = sleep
        self.state = ConnectionState(limits, clock())
        self.ingress = AudioIngress(
            engine,
            codec.stream_setup,
            metrics.audio_seconds.inc if metrics is not None else None,
        )
        self.intake = Intake(
            codec,
            engine,
            self.state,
            self.ingress,
            connection_id=connection_id,
            apply=self._apply,
            on_open=self._start_pumps,
            admission=admission,
            metrics=metrics,
            clock=clock,
        )
        self.writer = Writer(
            transport, self.state, self.ingress, close=self._close, metrics=metrics, clock=clock
        )
        self.closed = asyncio.Event()
        self.close_code: int | None = None
        self._pumps: list[asyncio.Task[None]] = []  # one per engine stream
        self._tasks: list[asyncio.Task[Any]] = []
        self._close_request: tuple[int, str] | None = None
        self._refinements_counted: dict[tuple[int, str], int] = {}  # (stream, outcome)

    @property
    def stream(self) -> Stream | None:
        return self.ingress.stream

    @property
    def outbox(self) -> Outbox:
        return self.writer.outbox

    # -- the connection's life ------------------------------------------------------------

    async def run(self) -> None:
        self._apply(self.codec.start())
        logger.info("session %s opened", self.connection_id)
        reader = asyncio.create_task(self._guard(self._read_loop))
        writer = asyncio.create_task(self._guard(self.writer.run))
        self._tasks = [reader, writer]
        try:
            # Either the writer closed the connection after the closing message (or a fatal
            # error), or the reader saw the peer go away; both end the connection.
            await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in self._tasks:
                task.cancel()
            for pump in self._pumps:
                pump.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await asyncio.gather(*self._pumps, return_exceptions=True)
            if self._close_request is not None:
                await self._close(*self._close_request)
            self._release_stream()  # client vanished: release what the engine holds
            self.ingress.close()
            if self.outbox.dropped_partials and self.metrics is not None:
                self.metrics.messages_dropped.labels(kind="partial").inc(
                    self.outbox.dropped_partials
                )
            self.closed.set()
            logger.info("session %s closed (code %s)", self.connection_id, self.close_code)

    async def _guard(self, work: Callable[[], Awaitable[None]]) -> None:
        """Unexpected exceptions end this connection with a fatal error and 1011."""
        try:
            await work()
        except PeerGone:
            pass
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("session %s failed", self.connection_id)
            await self._fail("internal server error")

    async def _fail(self, message: str) -> None:
        self._release_stream()
        if self.metrics is not None:
            self.metrics.errors.labels(code="internal").inc()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.transport.send(self.codec.fatal_error(message)), 5)
        await self._close(CLOSE_INTERNAL, "internal error")

    async def _close(self, code: int, reason: str) -> None:
        if self.close_code is None:
            self.close_code = code
        with contextlib.suppress(Exception):
            await self.transport.close(code, reason)

    def _release_stream(self) -> None:
        """Nothing more is wanted from the engine: let the stream go (once)."""
        if self.state.finish():
            for stream in self.ingress.streams:
                stream.abort()

    def begin_shutdown(self, code: int = CLOSE_GOING_AWAY) -> None:
        """Server shutdown: finish what the stream holds, then close with ``code`` (1001; 1012
        at the end of a drain, which tells clients to reconnect)."""
        if self.state.open:
            self.state.shutting_down(code)
            self.intake.stop("shutdown")

    def force_close(self, code: int = CLOSE_GOING_AWAY) -> None:
        """Shutdown ran out of time: release the stream and close with ``code`` regardless."""
        self._release_stream()
        self._close_soon(code, "server shutting down")

    def _close_soon(self, code: int, reason: str) -> None:
        """End the connection: run() stops its tasks and closes with this code."""
        if self._close_request is None:
            self._close_request = (code, reason)
        for task in self._tasks:
            task.cancel()

    # -- reading ----------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            # Per-read admission (an audio budget that pauses reading so that TCP pushes
            # back) belongs here, before the next receive.
            await self.intake.hold_back(self.sleep)
            deadline = self.state.deadline()
            try:
                if deadline is None:
                    message = await self.transport.receive()
                else:
                    wait = deadline[0] - self.clock()
                    async with asyncio.timeout_at(loop.time() + max(0.0, wait)):
                        message = await self.transport.receive()
            except TimeoutError:
                if deadline is None or self.clock() < deadline[0]:
                    continue
                if await self._deadline_passed(deadline[1]):
                    return
                continue
            if message is None:
                return  # the peer is gone
            now = self.clock()
            # By the clock the deadline came first (the loop was busy, or the clock is a
            # test's): the message is too late to reset it.
            overdue = deadline if deadline is not None and now >= deadline[0] else None
            if overdue is not None and await self._deadline_passed(overdue[1]):
                return
            if not self.state.on_message(now):
                continue  # anything after stop is ignored
            if isinstance(message, str):
                actions = self.codec.on_text(message, self.state.rate_gate(now))
            else:
                actions = self.codec.on_binary(message)
            self._apply(actions)

    async def _deadline_passed(self, kind: str) -> bool:
        """Act on a deadline: idle and max length stop the stream (its finals follow); the
        finish timeout fails the connection (True: the reader is done)."""
        if kind == FINISH_TIMEOUT:
            logger.error("session %s: finals not done in time", self.connection_id)
            await self._fail("the transcription did not finish in time")
            return True
        logger.info("session %s: %s, stopping", self.connection_id, kind)
        self.intake.stop(kind)
        return False

    # -- a codec's actions ----------------------------------------------------------------

    def _apply(self, actions: Sequence[Action]) -> None:
        """Carry out a codec's actions in order: outbound ones here, inbound by the intake."""
        for action in actions:
            if isinstance(action, Send | Close):
                self._send_or_close(action)
            else:
                self.intake.carry_out(action)

    def _send_or_close(self, action: Send | Close) -> None:
        if isinstance(action, Close):
            self._release_stream()
            self._close_soon(action.code, action.reason)
        elif not self.writer.queue(action.message, action.error_code):
            logger.warning(
                "session %s: client reads nothing, %d messages waiting; closing",
                self.connection_id,
                len(self.outbox),
            )
            self._release_stream()
            self._close_soon(CLOSE_POLICY, "client is not reading")

    # -- events out ---------------------------------------------------------------------------

    def _start_pumps(self, streams: list[Stream]) -> None:
        """The streams are open: one pump each (once), with its channel when split."""
        if not self._pumps:
            split = len(streams) > 1
            self._pumps = [
                asyncio.create_task(self._guard(self._pump_of(stream, i if split else None)))
                for i, stream in enumerate(streams)
            ]

    def _pump_of(self, stream: Stream, channel: int | None) -> Callable[[], Awaitable[None]]:
        return lambda: self._pump_loop(stream, channel)

    async def _pump_loop(self, stream: Stream, channel: int | None) -> None:
        """One stream's events to the codec; `channel` when the channels are split."""
        codec = self.codec
        for_channel = channel is not None and isinstance(codec, ChannelCodec)
        async for event in stream:
            received = self.ingress.received
            if for_channel:
                assert channel is not None and isinstance(codec, ChannelCodec)
                self._apply(codec.on_channel_event(channel, event, received))
            else:
                self._apply(codec.on_event(event, received))
            if not isinstance(event, Partial):  # counted per final, revision, done
                self._count_refinements(stream, channel or 0)
            if isinstance(event, Done):
                return

    def _count_refinements(self, stream: Stream, index: int) -> None:
        """Add what the stream's refinement pass did since last time to the counters."""
        stats = stream.refinements
        if stats is None or self.metrics is None:
            return
        for outcome, total in dataclasses.asdict(stats).items():
            new = total - self._refinements_counted.get((index, outcome), 0)
            if new > 0:
                self.metrics.refinements.labels(outcome=outcome).inc(new)
                self._refinements_counted[(index, outcome)] = total
