"""AssemblyAI Universal-Streaming v3 (``/v3/ws``) as a sans-I/O codec.

Pipecat's ``AssemblyAISTTService`` and LiveKit's ``assemblyai.STT`` connect, unchanged but
for their base URL, to ``ws://HOST:PORT/v3/ws?sample_rate=16000&encoding=pcm_s16le&
speech_model=...`` with the key as the raw ``Authorization`` header (or ``?token=``). They
send binary audio and the text messages ``ForceEndpoint``, ``UpdateConfiguration``,
``KeepAlive`` and ``Terminate``; they receive ``Begin``, ``SpeechStarted``, ``Turn``,
``Termination`` and, before an error close, ``Error``.

How kettle's events map:

- one utterance of kettle's VAD is one turn; ``turn_order`` counts turns that held words
  (an utterance with no words gives its number to the next one);
- a Partial is a ``Turn`` with ``end_of_turn: false``: ``words`` are the hypothesis's words,
  timed evenly over its window with confidence 0 (partials are decoded without alignment),
  ``word_is_final`` true for the stable prefix kettle has agreed on;
- a Final is the end-of-turn ``Turn``: every word final, with the model's times (ms) and
  probabilities; ``utterance`` holds the turn's text, as an utterance ends with the turn;
- ``ForceEndpoint`` ends the open utterance (kettle's finalize); ``Terminate`` ends the
  stream: the remaining turns, ``Termination``, close 1000;
- a Revision (only with kettle's own query parameter ``kettle_revisions=true``; without it
  the stream asks for none) is one more end-of-turn ``Turn`` of the turn it corrects, as
  AssemblyAI re-sends a turn formatted: the same ``turn_order``, ``end_of_turn`` true and
  ``end_of_turn_confidence`` as before, the corrected ``transcript`` and ``words``, shaped as
  the turn's last end-of-turn ``Turn`` was (formatted where the turn had a formatted one,
  ``utterance`` as there). A client keeps the last end-of-turn ``Turn`` of each
  ``turn_order``.

The speech-model families differ as AssemblyAI's do:

- Universal-3 Pro (``u3-rt-pro``, ``universal-3-5-pro``, ``universal-3-6-pro``, ...): the
  text is Whisper's (punctuated, cased) throughout, ``transcript`` is the whole hypothesis,
  and each turn ends with one ``Turn`` whose ``turn_is_formatted`` is true; ``format_turns``
  changes nothing (formatting is built in).
- Universal-Streaming (``universal-streaming-english``, the default, ``-multilingual``,
  ``whisper-rt``): partials and the end-of-turn ``Turn`` are unformatted (lowercase words,
  no punctuation, as ``protocols.words.plain_transcript`` gives them), a partial's
  ``transcript`` holds its final (stable) words only, and with ``format_turns=true`` the
  formatted end-of-turn ``Turn`` (Whisper's text, ``turn_is_formatted: true``, same
  ``turn_order``) follows the unformatted one.

``end_of_turn_confidence`` is made of what kettle knows (see turn_messages' ``turn_confidence``):

- end of turn forced by the client (``ForceEndpoint``, ``Terminate``): 1;
- at a pause the VAD heard: 0.5, + 0.25 when the text ends with terminal punctuation
  (Whisper heard a sentence end), + 0.25 when the final agrees with the last partial (the
  text had settled before the silence);
- cut at the maximum utterance length: the same two quarters without the half;
- a partial: 0.3 when it ends with terminal punctuation, + 0.05 when every word is stable:
  always under AssemblyAI's default threshold (0.4), since kettle never ends a turn on it.

Errors close with AssemblyAI's codes after an ``Error`` message (``error_code``, ``error``):
3006 for an invalid message, JSON or configuration value, 3007 for an audio message over
1000 ms (or over the server's frame limit) and for audio sent faster than it can be
transcribed, 3008 when the session reaches its maximum length, 3005 for a server error.
A client message that ends the session so is the end of its audio, as ``Terminate`` is:
nothing after it is read, the turns of the audio before it still come, then the ``Error``
(instead of ``Termination``) and the close; none of what was said is lost to it.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kettle.streaming.core.agreement import split_words
from kettle.streaming.core.backlog import FINAL, OTHER, PARTIAL, REVISION
from kettle.streaming.core.events import (
    Done,
    Error,
    Event,
    Final,
    NoTranscript,
    Partial,
    Revision,
    SpeechStarted,
)
from kettle.streaming.protocols.assemblyai import fields as assemblyai_fields
from kettle.streaming.protocols.assemblyai import turn_messages
from kettle.streaming.protocols.assemblyai.turn_messages import (
    partial_confidence,
    turn_confidence,
)
from kettle.streaming.protocols.assemblyai.turn_order import EndedTurn, TurnOrder
from kettle.streaming.protocols.assemblyai.wire import (
    ENCODINGS,
    PATH,
    AssemblyAIParamError,
    ConfigurationUpdate,
    StreamParams,
    parse_client_message,
    parse_query,
)
from kettle.streaming.protocols.assemblyai.wire import (
    credentials as key_credentials,
)
from kettle.streaming.protocols.base import (
    Action,
    AudioReceived,
    AudioSetup,
    CodecContext,
    FeedAudio,
    Finalize,
    ModelInfo,
    OutMessage,
    RateGate,
    Reconfigure,
    Send,
    Stop,
    StreamSetup,
    compact_json,
)
from kettle.streaming.protocols.handshake import (
    HandshakeRefused,
    HandshakeRequest,
    Prepared,
    ProtocolRoute,
)
from kettle.streaming.protocols.lifecycle import CodecLifecycle, CodecPhase, Move
from kettle.streaming.protocols.params import ParamError
from kettle.streaming.protocols.words import plain_transcript
from kettle.transcribe.types import SAMPLE_RATE

SERVER_ERROR = 3005
INVALID_MESSAGE = 3006
AUDIO_VIOLATION = 3007
SESSION_EXPIRED = 3008
MAX_CHUNK_MS = 1000  # AssemblyAI's bound on one audio message
CLIENT_ERROR = "client error"  # the stop reason of a client message that ends the session
_ECHO_LIMIT = 200  # characters of a refused client message quoted in its Error


def _ms(samples: int) -> int:
    return round(samples * 1000 / SAMPLE_RATE)


class AssemblyAICodec:
    """One ``/v3/ws`` connection: client frames and engine events in, actions out.

    ``clock`` (wall seconds) dates ``Begin.expires_at`` and measures
    ``Termination.session_duration_seconds``; nothing else reads it.
    """

    def __init__(
        self,
        context: CodecContext,
        params: StreamParams,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.context = context
        self.params = params
        self._clock = clock
        self._opened_at = clock()
        self._bytes = 0
        self._life = CodecLifecycle()
        self._turns = TurnOrder()
        self._ending_error: tuple[int, str] | None = None  # sent at Done instead of Termination
        self._ending_counted: str | None = None  # ... counted then as this error code

    @property
    def session_id(self) -> str:
        try:
            return str(uuid.UUID(self.context.session_id))
        except ValueError:
            return self.context.session_id

    @property
    def audio_seconds(self) -> float:
        return self._bytes // self.params.frame_bytes / self.params.sample_rate

    @property
    def phase(self) -> CodecPhase:
        return self._life.phase

    def start(self) -> list[Action]:
        expires = int(self._opened_at + self.context.limits.max_session_s)
        return [_send({"type": "Begin", "id": self.session_id, "expires_at": expires})]

    def stream_setup(self) -> StreamSetup:
        p = self.params
        return StreamSetup(AudioSetup(ENCODINGS[p.encoding], p.sample_rate, 1), p.session_config())

    # -- client side -----------------------------------------------------------------------

    def on_binary(self, data: bytes) -> list[Action]:
        if self._life.stopped or not data:
            return []
        ms = len(data) / self.params.frame_bytes / self.params.sample_rate * 1000
        if ms > MAX_CHUNK_MS or len(data) > self.context.limits.max_frame_bytes:
            return self._fatal(
                AUDIO_VIOLATION,
                f"Input duration violation: {ms:.0f} ms. Expected between 50 and {MAX_CHUNK_MS} ms",
                "bad_audio",
            )
        self._bytes += len(data)
        self._life.move(Move.AUDIO)
        return [FeedAudio(data)]

    def on_text(self, text: str, rate: RateGate) -> list[Action]:
        """A client message, checked against its type's table (``assemblyai_fields``): any
        mistake closes the session with Error 3006, as AssemblyAI's does."""
        if self._life.stopped:
            return []
        try:
            obj = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            return self._fatal(INVALID_MESSAGE, f"Invalid JSON: {text[:_ECHO_LIMIT]}")
        kind = obj.get("type") if isinstance(obj, dict) else None
        if not isinstance(kind, str):
            return self._fatal(INVALID_MESSAGE, f"Invalid Message: {text[:_ECHO_LIMIT]}")
        if kind not in assemblyai_fields.MESSAGES:
            return self._fatal(INVALID_MESSAGE, f"Invalid Message Type: {kind[:_ECHO_LIMIT]}")
        if kind in ("KeepAlive", "UpdateConfiguration") and rate.check() != "allow":
            return []  # over the rate: AssemblyAI has no notice for it, so dropped quietly
        try:
            message = parse_client_message(obj)
        except AssemblyAIParamError as exc:
            return self._fatal(INVALID_MESSAGE, f"Invalid Message: {str(exc)[:_ECHO_LIMIT]}")
        if message.type == "Terminate":
            self._life.move(Move.STOP)
            return [Stop()]
        if message.type == "ForceEndpoint":
            return [] if self._life.awaiting_audio else [Finalize()]  # no audio: no turn to end
        if message.update is None:
            return []  # KeepAlive: reading it reset the idle timer
        return self._update(message.update)

    def _update(self, update: ConfigurationUpdate) -> list[Action]:
        """UpdateConfiguration: keyterms and the turn settings (as the endpoint they give)
        apply to the open stream from now on, and to the stream's setup if none is open;
        format_turns to the turns that end from now on."""
        before = self.params.turns.endpoint_ms(self.params.u3)
        self.params = self.params.with_update(update)
        after = self.params.turns.endpoint_ms(self.params.u3)
        if update.keyterms is None and after == before:
            return []
        return [
            Reconfigure(
                keyterms=update.keyterms, endpoint_silence_ms=None if after == before else after
            )
        ]

    def on_leftover(self, leftover_bytes: int, frame_bytes: int) -> list[Action]:
        return []  # half a sample at the very end: nothing a client can act on

    def _fatal(self, code: int, message: str, counted: str = "bad_message") -> list[Action]:
        """A client message that ends the session with an error: nothing more is read, the
        turns of the audio before it still come, then the Error and the close with ``code``."""
        self._life.move(Move.STOP)
        self._ending_error = (code, message)
        self._ending_counted = counted
        return [Stop(CLIENT_ERROR)]

    def _error_message(self, code: int, message: str) -> OutMessage:
        body = compact_json({"type": "Error", "error_code": code, "error": message})
        return OutMessage(OTHER, body, closing=True, close_code=code)

    def fatal_error(self, message: str) -> str:
        return compact_json({"type": "Error", "error_code": SERVER_ERROR, "error": message})

    # -- engine side -------------------------------------------------------------------------

    def on_event(self, event: Event, received: AudioReceived) -> list[Action]:
        if isinstance(event, Partial):
            return self._on_partial(event)
        if isinstance(event, Final):
            return self._on_final(event)
        if isinstance(event, Revision):
            return self._on_revision(event) if self.params.revisions else []
        if isinstance(event, SpeechStarted):
            return [_send({"type": "SpeechStarted", "timestamp": _ms(event.start)})]
        if isinstance(event, NoTranscript):
            self._turns.forget(event.start)
            return []
        if isinstance(event, Error):
            return self._on_error(event)
        if isinstance(event, Done):
            return [self._on_done(event)]
        return []  # SpeechStopped, Finalized: the Turns say it

    def _on_partial(self, event: Partial) -> list[Action]:
        if not split_words(event.text):
            return []
        turn = self._turns.open(event.start)
        turn.last_partial = plain_transcript(event.text)
        body = turn_messages.partial_turn(self.params, turn.order, event)
        return [Send(OutMessage(PARTIAL, compact_json(body), event.utterance, event.end))]

    def _on_final(self, event: Final) -> list[Action]:
        if not split_words(event.text):
            self._turns.forget(event.start)
            return []
        turn = self._turns.end(event.start)
        plain = plain_transcript(event.text)
        confidence = turn_confidence(event.reason, event.text, plain == turn.last_partial)
        if self.params.revisions:
            self._turns.remember(event.utterance, EndedTurn(turn.order, confidence, event.end))
        bodies = turn_messages.end_of_turn(self.params, turn.order, confidence, event)
        return [
            Send(OutMessage(FINAL, compact_json(body), event.utterance, event.end))
            for body in bodies
        ]

    def _on_revision(self, event: Revision) -> list[Action]:
        """A refinement's correction of an ended turn (``kettle_revisions=true`` only): the
        turn's last end-of-turn Turn again (the formatted one where the turn had one), same
        ``turn_order`` and confidence, with the corrected ``transcript`` and ``words``."""
        ended = self._turns.ended(event.utterance)
        if ended is None or not split_words(event.text):
            return []  # a final with no words had no turn; nothing to correct
        body = turn_messages.end_of_turn(self.params, ended.order, ended.confidence, event)[-1]
        return [Send(OutMessage(REVISION, compact_json(body), event.utterance, event.end))]

    def _on_error(self, event: Error) -> list[Action]:
        if event.code == "audio_backlog":
            # The runner stops the stream next: the turns still come, then this error.
            self._ending_error = (
                AUDIO_VIOLATION,
                f"Audio Transmission Rate Exceeded: {event.message}",
            )
            return []
        if not event.fatal:
            return []  # AssemblyAI has no notice for a skipped partial; the Turns still come
        self._life.move(Move.STOP)  # (again, after a Terminate: the table allows it)
        message = self._error_message(SERVER_ERROR, f"Session Cancelled: {event.message}")
        return [Send(message, error_code=event.code)]

    def _on_done(self, event: Done) -> Send:
        if event.reason == "max_duration":
            self._ending_error = (
                SESSION_EXPIRED,
                "Session Expired: Maximum session duration exceeded",
            )
        if self._ending_error is not None:
            counted, self._ending_counted = self._ending_counted, None
            return Send(self._error_message(*self._ending_error), error_code=counted)
        # The runner closes after this: 1000, or 1001/1012 at a server shutdown.
        body = {
            "type": "Termination",
            "audio_duration_seconds": round(self.audio_seconds),
            "session_duration_seconds": round(self._clock() - self._opened_at),
        }
        return Send(OutMessage(OTHER, compact_json(body), closing=True))


def _send(obj: Mapping[str, Any]) -> Send:
    return Send(OutMessage(OTHER, compact_json(obj)))


# -- the route --------------------------------------------------------------------------------


def credentials(request: HandshakeRequest) -> Sequence[str | None]:
    return key_credentials(request.header("authorization"), request.query_value("token"))


def prepare(request: HandshakeRequest, model: ModelInfo | None) -> Prepared:
    try:
        params = parse_query(
            request.query,
            multilingual=model.multilingual if model is not None else True,
            speakers=model.speakers if model is not None else True,
        )
    except ParamError as exc:
        raise HandshakeRefused(400, str(exc)) from None

    def make_codec(context: CodecContext) -> AssemblyAICodec:
        return AssemblyAICodec(context, params)

    return Prepared(make_codec)


def refusal(status: int, message: str) -> tuple[bytes, str]:
    """AssemblyAI's error body: ``{"error": ...}``."""
    return compact_json({"error": message}).encode(), "application/json"


INFO: dict[str, Any] = {
    "path": PATH,
    "api": "assemblyai/v3/ws",
    "encodings": list(ENCODINGS),
}

ROUTE = ProtocolRoute(
    path=PATH,
    name="assemblyai",
    credentials=credentials,
    prepare=prepare,
    info=INFO,
    refusal=refusal,
)

__all__ = [
    "ROUTE",
    "AssemblyAICodec",
    "AssemblyAIParamError",
    "partial_confidence",
    "turn_confidence",
]
