"""The connection runner: drives one codec over one WebSocket, for any protocol.

Three tasks per connection:

- the reader takes one client message at a time (it asks for the next only when the last is
  handled, so an unread socket pushes back on the peer through TCP instead of buffering
  here), hands it to the codec and carries out the actions; it also enforces the idle
  timeout, the maximum session length and the finish timeout (see connection.py);
- the pump takes the engine stream's events as soon as they exist (so a slow client never
  holds up the engine), passes them through the codec and parks the messages in the outbox
  (one pump per stream when the codec splits the channels into streams of their own: each
  channel's events go to `ChannelCodec.on_channel_event`);
- the writer sends what the outbox holds, measures each partial's and final's lag, and closes
  the connection after the codec's closing message.

Audio admission (admission.py): after each audio message the reader charges its audio
seconds to the connection's budget (2x real time; real time while the engine is overloaded
or degraded) and, when the client is ahead of it, pauses before the next read, so TCP slows
the client down and nothing is dropped. The session's length counts in audio time too (a stop with
reason max_duration), and a session holding more audio not yet transcribed than the safety
net allows gets an `audio_backlog` error, its finals and a close with 1008: never a silent
loss.

Audio that cannot be decoded (a container FFmpeg cannot read) gets the codec's `bad_audio`
error, the finals of what could be decoded and a close with 1008.

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
from typing import TYPE_CHECKING, Any, Protocol

from kettle.streaming.core.backlog import FINAL, PARTIAL, REVISION
from kettle.streaming.core.events import Done, Error, Partial
from kettle.streaming.engine.degrade import Level
from kettle.streaming.protocols.base import (
    CLOSE_GOING_AWAY,
    CLOSE_INTERNAL,
    CLOSE_POLICY,
    Action,
    ChannelCodec,
    Close,
    Codec,
    FeedAudio,
    Finalize,
    OutMessage,
    Reconfigure,
    Send,
    Stop,
)
from kettle.streaming.server.audio_budget import AudioAdmission
from kettle.streaming.server.connection import (
    FINISH_TIMEOUT,
    MAX_DURATION,
    ConnectionLimits,
    ConnectionState,
)
from kettle.streaming.server.ingress import AudioIngress, ContainerDecodeError
from kettle.streaming.server.outbox import Outbox
from kettle.transcribe.types import SAMPLE_RATE

if TYPE_CHECKING:
    from kettle.streaming.engine.engine import Engine, Stream
    from kettle.streaming.server.metrics import ServerMetrics

logger = logging.getLogger(__name__)

FINAL_ARRIVALS_KEPT = 64  # finals whose revision delay can still be measured
AUDIO_BACKLOG = "audio_backlog"  # error code and done reason: too much audio not transcribed
BAD_AUDIO = "bad_audio"  # error code and done reason: audio that cannot be decoded


class PeerGone(Exception):
    """The peer closed the connection or it was lost."""


class Transport(Protocol):
    """One accepted WebSocket, as the runner sees it."""

    async def receive(self) -> str | bytes | None:
        """The next message, or None once the peer is gone. Cancel-safe."""
        ...

    async def send(self, text: str) -> None:
        """Send a text message; raises PeerGone when the peer is gone."""
        ...

    async def close(self, code: int, reason: str = "") -> None: ...


class ConnectionRunner:
    def __init__(
        self,
        transport: Transport,
        codec: Codec,
        engine: Engine,
        *,
        session_id: str,
        limits: ConnectionLimits,
        outbox_limit: int = 1000,
        metrics: ServerMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
        admission: AudioAdmission | None = None,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self.transport = transport
        self.codec = codec
        self.engine = engine
        self.session_id = session_id
        self.metrics = metrics
        self.clock = clock
        self.sleep = sleep
        self.admission = admission
        self.state = ConnectionState(limits, clock())
        self.outbox = Outbox(outbox_limit)
        self.ingress = AudioIngress(
            engine,
            codec.stream_setup,
            metrics.audio_seconds.inc if metrics is not None else None,
        )
        self.closed = asyncio.Event()
        self.close_code: int | None = None
        self._pumps: list[asyncio.Task[None]] = []  # one per engine stream
        self._tasks: list[asyncio.Task[Any]] = []
        self._close_request: tuple[int, str] | None = None
        # When the audio at each recent final's end arrived: a revision's delay runs from it.
        self._final_arrivals: dict[int, float] = {}
        self._refinements_counted: dict[tuple[int, str], int] = {}  # (stream, outcome)

    @property
    def stream(self) -> Stream | None:
        return self.ingress.stream

    # -- the connection's life ------------------------------------------------------------

    async def run(self) -> None:
        self._apply(self.codec.start())
        logger.info("session %s opened", self.session_id)
        reader = asyncio.create_task(self._guard(self._read_loop))
        writer = asyncio.create_task(self._guard(self._write_loop))
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
            logger.info("session %s closed (code %s)", self.session_id, self.close_code)

    async def _guard(self, work: Callable[[], Awaitable[None]]) -> None:
        """Unexpected exceptions end this connection with a fatal error and 1011."""
        try:
            await work()
        except PeerGone:
            pass
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("session %s failed", self.session_id)
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
        if not self.state.finished:
            for stream in self.ingress.streams:
                stream.abort()
        self.state.finished = True

    def begin_shutdown(self, code: int = CLOSE_GOING_AWAY) -> None:
        """Server shutdown: finish what the stream holds, then close with ``code`` (1001; 1012
        at the end of a drain, which tells clients to reconnect)."""
        if not self.state.stopped:
            self.state.shutting_down(code)
            self._stop("shutdown")

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
            # Handshake-time and per-read admission checks (audio budgets that pause reading
            # so that TCP pushes back) belong here, before the next receive.
            await self._hold_back()
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
            logger.error("session %s: finals not done in time", self.session_id)
            await self._fail("the transcription did not finish in time")
            return True
        logger.info("session %s: %s, stopping", self.session_id, kind)
        self._stop(kind)
        return False

    def _apply(self, actions: Sequence[Action]) -> None:
        for action in actions:
            if isinstance(action, Send):
                self._queue(action.message, action.error_code)
            elif isinstance(action, FeedAudio):
                if not self.state.stopped:
                    self._open_stream()
                    before = self.ingress.received.input_frames
                    now = self.clock()
                    try:
                        self.ingress.feed(action.data, now)
                    except ContainerDecodeError as exc:
                        self._bad_audio(str(exc))
                        continue
                    self._admit_audio(before, now)
            elif isinstance(action, Finalize):
                if not self.state.stopped:
                    self.ingress.finalize()
            elif isinstance(action, Reconfigure):
                # (No stream open yet: stream_setup() has the new settings.)
                self.ingress.apply(action, stopped=self.state.stopped)
            elif isinstance(action, Stop):
                self._stop(action.reason)
            elif isinstance(action, Close):
                self._release_stream()
                self._close_soon(action.code, action.reason)

    # -- audio admission ------------------------------------------------------------------

    def _admit_audio(self, frames_before: int, now: float) -> None:
        """Charge the audio just fed; end the session if it is over a limit."""
        admission = self.admission
        if admission is None:
            return
        received = self.ingress.received
        admission.admit((received.input_frames - frames_before) / received.sample_rate, now)
        if admission.over_length():
            logger.info("session %s: maximum length of audio, stopping", self.session_id)
            self._stop(MAX_DURATION)
        elif self.ingress.streams:
            backlog_s = self.ingress.undecoded_samples / SAMPLE_RATE
            if admission.over_backlog(backlog_s):
                logger.warning("session %s: %.1f s not transcribed", self.session_id, backlog_s)
                if self.metrics is not None:
                    self.metrics.backlog_closes.inc()
                error = Error(AUDIO_BACKLOG, admission.backlog_message(backlog_s))
                self._apply(self.codec.on_event(error, received))
                self.state.close_code = CLOSE_POLICY
                self._stop(AUDIO_BACKLOG)

    async def _hold_back(self) -> None:
        """Pause before the next read while the client is ahead of its audio budget."""
        if self.admission is None or self.state.stopped:
            return
        busy = self.engine.overloaded or self.engine.degradation != Level.FULL
        backlog_s = self.ingress.undecoded_samples / SAMPLE_RATE
        self.admission.set_overloaded(busy, self.clock(), backlog_s)
        pause = self.admission.pause_s(self.clock())
        if pause <= 0:
            return
        if self.metrics is not None:
            self.metrics.admission_paused.inc(pause)
        await self.sleep(pause)
        # The client was held by us, not idle: its idle time starts after the pause.
        self.state.on_message(self.clock())

    def _open_stream(self) -> None:
        streams, _, _ = self.ingress.open()
        if not self._pumps:
            split = len(streams) > 1
            self._pumps = [
                asyncio.create_task(self._guard(self._pump_of(stream, i if split else None)))
                for i, stream in enumerate(streams)
            ]

    def _pump_of(self, stream: Stream, channel: int | None) -> Callable[[], Awaitable[None]]:
        return lambda: self._pump_loop(stream, channel)

    def _stop(self, reason: str | None) -> None:
        if not self.state.stop(self.clock()):
            return
        self._open_stream()
        leftover, frame_bytes, error = self.ingress.stop(reason)
        if error is not None:
            self._bad_audio(error)
        if leftover:
            self._apply(self.codec.on_leftover(leftover, frame_bytes))

    def _bad_audio(self, why: str) -> None:
        """Audio that cannot be decoded: the codec's error, the finals of what could be, and
        a close with 1008 (as Deepgram answers undecodable audio)."""
        logger.info("session %s: audio cannot be decoded: %s", self.session_id, why)
        error = Error(BAD_AUDIO, f"the audio cannot be decoded: {why}")
        self._apply(self.codec.on_event(error, self.ingress.received))
        self.state.close_code = CLOSE_POLICY
        self._stop(BAD_AUDIO)

    # -- events out ---------------------------------------------------------------------------

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

    def _queue(self, message: OutMessage, error_code: str | None) -> None:
        if error_code is not None and self.metrics is not None:
            self.metrics.errors.labels(code=error_code).inc()
        if not self.outbox.put(message):
            logger.warning(
                "session %s: client reads nothing, %d messages waiting; closing",
                self.session_id,
                len(self.outbox),
            )
            self._release_stream()
            self._close_soon(CLOSE_POLICY, "client is not reading")

    async def _write_loop(self) -> None:
        while True:
            message = await self.outbox.get()
            if message.text or not message.closing:  # an empty closing one: just close
                await self.transport.send(message.text)
            if message.kind in (PARTIAL, FINAL):
                self._observe_lag(message)
            elif message.kind == REVISION:
                self._observe_revision(message)
            if message.closing:
                self.state.finished = True
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

    def _count_refinements(self, stream: Stream, index: int) -> None:
        """Add what the stream's refinement pass did since last time to the counters."""
        stats = stream.session.refinements
        if stats is None or self.metrics is None:
            return
        for outcome, total in dataclasses.asdict(stats).items():
            new = total - self._refinements_counted.get((index, outcome), 0)
            if new > 0:
                self.metrics.refinements.labels(outcome=outcome).inc(new)
                self._refinements_counted[(index, outcome)] = total
