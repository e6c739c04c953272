"""The inbound half of a connection's actions: what a codec asks of the engine stream(s).

`Intake` carries out `FeedAudio`, `Finalize`, `Reconfigure` and `Stop` through the audio
ingress, while the connection takes input (`ConnectionState.open`), and keeps the audio
budget: after each audio message it charges the message's audio seconds (2x real time; real
time while the engine is overloaded or degraded) and says how long the reader should pause
(`hold_back`), so TCP slows a client that is ahead and nothing is dropped. The session's
length counts in audio time too (a stop with reason max_duration), and a session holding more
audio not yet transcribed than the safety net allows gets an `audio_backlog` error, its
finals and a close with 1008: never a silent loss. Audio that cannot be decoded (a container
FFmpeg cannot read) gets the codec's `bad_audio` error, the finals of what could be decoded
and a close with 1008.

The actions a codec answers with on the way (an error event, leftover bytes at stop) go back
to the runner's `apply`, in order; the streams, once open, to its `on_open`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, TypeAlias

from kettle.streaming.core.events import Error
from kettle.streaming.engine.degrade import Level
from kettle.streaming.protocols.base import (
    CLOSE_POLICY,
    Action,
    Codec,
    FeedAudio,
    Finalize,
    Reconfigure,
    Stop,
)
from kettle.streaming.server.audio_budget import AudioAdmission
from kettle.streaming.server.connection import MAX_DURATION, ConnectionState
from kettle.streaming.server.ingress import AudioIngress, ContainerDecodeError
from kettle.transcribe.types import SAMPLE_RATE

if TYPE_CHECKING:
    from kettle.streaming.engine.engine import Engine, Stream
    from kettle.streaming.server.metrics import ServerMetrics

logger = logging.getLogger(__name__)

AUDIO_BACKLOG = "audio_backlog"  # error code and done reason: too much audio not transcribed
BAD_AUDIO = "bad_audio"  # error code and done reason: audio that cannot be decoded

Inbound: TypeAlias = FeedAudio | Finalize | Reconfigure | Stop


class Intake:
    def __init__(
        self,
        codec: Codec,
        engine: Engine,
        state: ConnectionState,
        ingress: AudioIngress,
        *,
        connection_id: str,
        apply: Callable[[Sequence[Action]], None],
        on_open: Callable[[list[Stream]], None],
        admission: AudioAdmission | None = None,
        metrics: ServerMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.codec = codec
        self.engine = engine
        self.state = state
        self.ingress = ingress
        self.connection_id = connection_id
        self.admission = admission
        self.metrics = metrics
        self.clock = clock
        self._apply = apply
        self._on_open = on_open

    def carry_out(self, action: Inbound) -> None:
        """One inbound action; audio, finalize and a new wire format only while open."""
        if isinstance(action, FeedAudio):
            if self.state.open:
                self._feed(action.data)
        elif isinstance(action, Finalize):
            if self.state.open:
                self.ingress.finalize(new_request=action.new_request)
        elif isinstance(action, Reconfigure):
            # (No stream open yet: stream_setup() has the new settings.)
            self.ingress.apply(action, stopped=not self.state.open)
        else:
            self.stop(action.reason)

    def stop(self, reason: str | None) -> None:
        """No more input (once): the streams get their tail and stop; their finals follow."""
        if not self.state.stop(self.clock()):
            return
        self._open()
        leftover, frame_bytes, error = self.ingress.stop(reason)
        if error is not None:
            self._bad_audio(error)
        if leftover:
            self._apply(self.codec.on_leftover(leftover, frame_bytes))

    def _open(self) -> None:
        """Open the streams at the first audio (or stop), and have their events pumped."""
        if not self.ingress.streams:
            streams, _, _ = self.ingress.open()
            self._on_open(streams)

    def _feed(self, data: bytes) -> None:
        self._open()
        before = self.ingress.received.input_frames
        now = self.clock()
        try:
            self.ingress.feed(data, now)
        except ContainerDecodeError as exc:
            self._bad_audio(str(exc))
            return
        self._admit(before, now)

    def _bad_audio(self, why: str) -> None:
        """Audio that cannot be decoded: the codec's error, the finals of what could be, and
        a close with 1008 (as Deepgram answers undecodable audio)."""
        logger.info("session %s: audio cannot be decoded: %s", self.connection_id, why)
        error = Error(BAD_AUDIO, f"the audio cannot be decoded: {why}")
        self._apply(self.codec.on_event(error, self.ingress.received))
        self.state.close_code = CLOSE_POLICY
        self.stop(BAD_AUDIO)

    # -- the audio budget -------------------------------------------------------------------

    def _admit(self, frames_before: int, now: float) -> None:
        """Charge the audio just fed; end the session if it is over a limit."""
        admission = self.admission
        if admission is None:
            return
        received = self.ingress.received
        admission.admit((received.input_frames - frames_before) / received.sample_rate, now)
        if admission.over_length():
            logger.info("session %s: maximum length of audio, stopping", self.connection_id)
            self.stop(MAX_DURATION)
        elif self.ingress.streams:
            backlog_s = self.ingress.undecoded_samples / SAMPLE_RATE
            if admission.over_backlog(backlog_s):
                logger.warning("session %s: %.1f s not transcribed", self.connection_id, backlog_s)
                if self.metrics is not None:
                    self.metrics.backlog_closes.inc()
                error = Error(AUDIO_BACKLOG, admission.backlog_message(backlog_s))
                self._apply(self.codec.on_event(error, received))
                self.state.close_code = CLOSE_POLICY
                self.stop(AUDIO_BACKLOG)

    async def hold_back(self, sleep: Callable[[float], Awaitable[object]]) -> None:
        """Pause before the next read while the client is ahead of its audio budget."""
        if self.admission is None or not self.state.open:
            return
        busy = self.engine.overloaded or self.engine.degradation != Level.FULL
        backlog_s = self.ingress.undecoded_samples / SAMPLE_RATE
        self.admission.set_overloaded(busy, self.clock(), backlog_s)
        pause = self.admission.pause_s(self.clock())
        if pause <= 0:
            return
        if self.metrics is not None:
            self.metrics.admission_paused.inc(pause)
        await sleep(pause)
        # The client was held by us, not idle: its idle time starts after the pause.
        self.state.on_message(self.clock())
