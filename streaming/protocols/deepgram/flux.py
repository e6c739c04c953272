"""Deepgram Flux (``/v2/listen`` WebSocket): turns, not utterances, as a sans-I/O codec.

Clients (Pipecat's ``DeepgramFluxSTTService``, LiveKit's ``deepgram.STTv2``, the deepgram SDK's
``listen.v2``) connect to ``ws://HOST:PORT/v2/listen?model=flux-general-en&encoding=linear16
&sample_rate=16000[&eot_threshold=..][&eager_eot_threshold=..][&eot_timeout_ms=..][&keyterm=..]``
with ``Authorization: Token KEY`` (or bearer, or the subprotocol pair ``token``, KEY). They
send binary audio and the text messages ``Configure``, ``ForceEndTurn`` and ``CloseStream``.
The server sends ``Connected`` first, then ``TurnInfo`` messages whose ``event`` follows
Flux's state machine, ``ConfigureSuccess`` / ``ConfigureFailure``, ``Warning`` (not fatal)
and ``Error`` (fatal: the connection closes after it). Every message has a ``sequence_id``
(0, 1, ... in the order made; a stale ``Update`` a slow reader never read is skipped).

How a turn goes (the rules are Flux's):

- ``StartOfTurn`` at the first text of a turn (a partial, or the final when none came first);
- ``Update`` at each new partial, and every ``UPDATE_EVERY_S`` of audio while the turn is
  spoken, with the turn's transcript so far and its end-of-turn confidence;
- at a pause the session decodes a speculative final and shows its text at once (a Partial
  marked ``speculative``); from then on the confidence (``deepgram_flux_eot``) grows with the
  silence. ``EagerEndOfTurn`` (with ``eager_eot_threshold``) when it reaches that threshold
  and the speculative text is there (an eager transcript is never empty);
- ``TurnResumed`` when speech comes back after an ``EagerEndOfTurn``, or when the final reads
  other words than the eager transcript (Flux: the ``EndOfTurn`` transcript always matches the
  preceding ``EagerEndOfTurn``; if it changes, ``TurnResumed`` comes first);
- ``EndOfTurn`` when the confidence reaches ``eot_threshold`` (``trigger: model``), when the
  silence reaches ``eot_timeout_ms`` (``timeout``), at ``ForceEndTurn`` (``manual``), or at
  ``CloseStream`` / the end of the stream (``close``): the codec asks the session to finalize
  the open utterance and sends ``EndOfTurn`` with its final. Then ``turn_index`` increments.
  Every turn that starts ends; after ``CloseStream`` the remaining ``EndOfTurn``, then close
  1000.

The eot settings and kettle's VAD: the stream's VAD endpoint (``endpoint_silence_ms``) is
``eot_timeout_ms`` (at most 10 s, the VAD's limit): Flux's backstop. The turn ends on
confidence long before that, by the codec's own finalize. A turn survives a VAD endpoint that
comes before its end (``eot_threshold`` 1.0, or a timeout over 10 s): its finals are joined.
A ``Configure`` changes the thresholds at once; a longer ``eot_timeout_ms`` than the stream
opened with cannot delay the VAD's endpoint, only the turn's end.

Choices where kettle differs from Flux (documented, not hidden):

- ``end_of_turn_confidence`` is not a learned score: see ``deepgram_flux_eot``.
- ``audio_window_start`` / ``audio_window_end`` are the turn's first utterance start and the
  audio heard so far in it; words of a transcript not yet final are timed evenly over the
  window with ``confidence`` 0 (partials carry no word alignment); a final's words are the
  model's.
- The query and ``Configure`` are checked against deepgram_fields' tables (``model`` is
  required, as Flux's reference says); a ``Configure`` that fails them gets a
  ``ConfigureFailure`` and changes nothing.
- ``flux-general-multi`` detects the language per utterance (a multilingual model only);
  ``language_hint`` is ignored, ``numerals`` accepted (Whisper writes numerals as it hears
  fit), ``profanity_filter=true`` and ``redact`` refused.
- A valid JSON message of an unknown type gets a ``Warning`` and is ignored; one that is not
  JSON gets Flux's fatal ``Error`` (``UNPARSABLE_CLIENT_MESSAGE``) and the connection closes.
  Nothing after it is read, but what was said before it is not lost: the open turns end
  (``EndOfTurn``, trigger ``close``) before the ``Error``, as at ``CloseStream``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kettle.streaming.core.backlog import OTHER
from kettle.streaming.core.config import SessionConfig
from kettle.streaming.core.events import Done, Error, Event
from kettle.streaming.protocols.base import (
    Action,
    AudioReceived,
    AudioSetup,
    CodecContext,
    FeedAudio,
    ModelInfo,
    OutMessage,
    RateGate,
    Reconfigure,
    Send,
    Stop,
    StreamSetup,
)
from kettle.streaming.protocols.deepgram.fields import FLUX_MESSAGE
from kettle.streaming.protocols.deepgram.flux_eot import endpoint_silence_ms
from kettle.streaming.protocols.deepgram.flux_messages import FluxWriter
from kettle.streaming.protocols.deepgram.flux_turns import UPDATE_EVERY_S, FluxStats, TurnTracker
from kettle.streaming.protocols.deepgram.flux_wire import (
    FLUX_PATH,
    FluxParams,
    Thresholds,
    parse_configure,
    parse_flux_query,
)
from kettle.streaming.protocols.deepgram.live import credentials, refusal
from kettle.streaming.protocols.deepgram.wire import (
    ENCODINGS,
    SUBPROTOCOL,
    ListenParamError,
    ModelIdentity,
    kettle_version,
    message_type,
    request_id,
)
from kettle.streaming.protocols.fields import FieldError
from kettle.streaming.protocols.handshake import (
    HandshakeRefused,
    HandshakeRequest,
    Prepared,
    ProtocolRoute,
    choose_subprotocol,
)
from kettle.streaming.protocols.lifecycle import CodecLifecycle, CodecPhase, Move
from kettle.transcribe.types import SAMPLE_RATE

_ECHO_LIMIT = 200  # characters of an unknown message quoted back
CLIENT_ERROR = "client error"  # the stop reason of a client message that ends the stream


class DeepgramFluxCodec:
    """One connection: client frames and engine events in, actions out. The turns are the
    ``TurnTracker``'s, the messages' encoding the ``FluxWriter``'s; the codec reads the
    client's messages, keeps the audio clock and ends the connection."""

    def __init__(self, context: CodecContext, params: FluxParams) -> None:
        self.context = context
        self.params = params
        self.keyterms = params.keyterms
        self.request_id = request_id(context.session_id)
        self._model = ModelIdentity(context.model.name, kettle_version())
        self._writer = FluxWriter(self.request_id, detects_language=params.language is None)
        self._turns = TurnTracker(self._writer, params.thresholds, lambda: self.position)
        self._bytes = 0
        self._life = CodecLifecycle()
        self._ending_error: tuple[str, str] | None = None  # (code, description) sent at Done

    @property
    def thresholds(self) -> Thresholds:
        """The end-of-turn settings in force (the handshake's, then Configure's)."""
        return self._turns.thresholds

    @property
    def stats(self) -> FluxStats:
        return self._turns.stats

    @property
    def phase(self) -> CodecPhase:
        return self._life.phase

    # -- setup ---------------------------------------------------------------------------

    def start(self) -> list[Action]:
        return [self._writer.send({"type": "Connected", "model_info": self._model.info()})]

    def stream_setup(self) -> StreamSetup:
        p = self.params
        config = SessionConfig(
            language=p.language,
            multilingual=p.language is None,
            partials=True,
            word_timestamps=True,
            vad_events=True,
            pause_events=True,
            keyterms=self.keyterms,
            endpoint_silence_ms=endpoint_silence_ms(self.thresholds.eot_timeout_ms),
        )
        return StreamSetup(AudioSetup(ENCODINGS[p.encoding], p.sample_rate, 1), config)

    def fatal_error(self, message: str) -> str:
        return self._writer.error_text("INTERNAL_SERVER_ERROR", message)

    # -- client side -----------------------------------------------------------------------

    @property
    def position(self) -> int:
        """Audio received so far, in 16 kHz samples (the session's clock)."""
        frames = self._bytes // self.params.frame_bytes
        return frames * SAMPLE_RATE // self.params.sample_rate

    def on_binary(self, data: bytes) -> list[Action]:
        if self._life.stopped or not data:
            return []
        limit = self.context.limits.max_frame_bytes
        if len(data) > limit:
            return [
                self._writer.warning(
                    "AUDIO_TOO_LARGE",
                    f"audio message of {len(data)} bytes is over the limit of {limit} bytes; "
                    "it was dropped",
                    "bad_audio",
                )
            ]
        self._bytes += len(data)
        self._life.move(Move.AUDIO)
        return [FeedAudio(data), *self._turns.tick()]

    def on_text(self, text: str, rate: RateGate) -> list[Action]:
        if self._life.stopped:
            return []
        try:
            obj = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            obj = None
        if not isinstance(obj, dict):
            # Flux's fatal error ends the connection; the turns of the audio before it
            # still end first (the stream stops as at CloseStream), then the Error and close.
            self._life.move(Move.STOP)
            self._ending_error = (
                "UNPARSABLE_CLIENT_MESSAGE",
                "a text message must be a JSON object with a type",
            )
            return [Stop(CLIENT_ERROR)]
        try:
            kind: str | None = message_type(obj, FLUX_MESSAGE)
        except FieldError:
            kind = None  # warned below, after the rate gate
        if kind == "CloseStream":
            self._life.move(Move.STOP)
            return [Stop()]  # never rate-limited
        verdict = rate.check()
        if verdict != "allow":
            if verdict == "drop":
                return []
            per_second = self.context.limits.max_messages_per_second
            return [
                self._writer.warning(
                    "RATE_LIMITED",
                    f"more than {per_second:g} text messages per second; messages over the "
                    "rate are dropped",
                    "rate_limited",
                )
            ]
        if kind == "KeepAlive":
            return []  # not Flux's, but harmless: reading it reset the idle timer
        if kind == "Configure":
            return self._configure(obj)
        if kind == "ForceEndTurn":
            return self._turns.force_end()
        shown = str(obj.get("type"))[:_ECHO_LIMIT]
        return [
            self._writer.warning(
                "UNKNOWN_MESSAGE_TYPE",
                "expected a message of type Configure, ForceEndTurn or CloseStream, not "
                f"{shown!r}; it was ignored",
                "bad_message",
            )
        ]

    def on_leftover(self, leftover_bytes: int, frame_bytes: int) -> list[Action]:
        return [
            self._writer.warning(
                "PARTIAL_SAMPLE",
                f"the audio ended with {leftover_bytes} byte(s) that are not a whole sample "
                f"({frame_bytes} bytes); they were dropped",
                "bad_audio",
            )
        ]

    def _configure(self, obj: Mapping[str, Any]) -> list[Action]:
        try:
            change = parse_configure(obj, self.thresholds)
        except ListenParamError as exc:
            return [
                self._writer.send(
                    {
                        "type": "ConfigureFailure",
                        "code": "INVALID_CONFIGURE",
                        "description": str(exc),
                    },
                    "bad_message",  # counted as kettle_errors{code="bad_message"}
                )
            ]
        self._turns.thresholds = change.thresholds
        out: list[Action] = []
        if change.keyterms is not None:
            self.keyterms = change.keyterms
            out.append(Reconfigure(keyterms=change.keyterms))
        reply = {
            "type": "ConfigureSuccess",
            "thresholds": self.thresholds.fields(),
            "keyterms": list(self.keyterms),
        }
        out.append(self._writer.send(reply))
        return [*out, *self._turns.tick()]

    # -- engine side -------------------------------------------------------------------------

    def on_event(self, event: Event, received: AudioReceived) -> list[Action]:
        if isinstance(event, Error):
            return self._on_error(event)
        if isinstance(event, Done):
            return self._on_done(event)
        return self._turns.on_event(event)

    def _on_error(self, event: Error) -> list[Action]:
        if not event.fatal:
            return [self._writer.warning(event.code.upper(), event.message, event.code)]
        message = self._writer.error_text(
            "INTERNAL_SERVER_ERROR" if event.code == "internal" else event.code.upper(),
            event.message,
        )
        return [Send(OutMessage(OTHER, message, closing=True, fatal=True), event.code)]

    def _on_done(self, event: Done) -> list[Action]:
        out = self._turns.close()
        if self._ending_error is not None:  # a client message's fatal Error, then 1011
            message = self._writer.error_text(*self._ending_error)
            out.append(Send(OutMessage(OTHER, message, closing=True, fatal=True), "bad_message"))
            return out
        # Nothing more to say: close after what is queued (1000; 1011 for an idle
        # connection, as Deepgram's timeout gives).
        out.append(Send(OutMessage(OTHER, "", closing=True, fatal=event.reason == "idle")))
        return out


# -- the route --------------------------------------------------------------------------------


def prepare(request: HandshakeRequest, model: ModelInfo | None) -> Prepared:
    try:
        params = parse_flux_query(
            request.query,
            multilingual=model.multilingual if model is not None else True,
            model_name=model.name if model is not None else "",
        )
    except ListenParamError as exc:
        raise HandshakeRefused(400, str(exc)) from None

    def make_codec(context: CodecContext) -> DeepgramFluxCodec:
        return DeepgramFluxCodec(context, params)

    return Prepared(make_codec, choose_subprotocol(request, (SUBPROTOCOL,)))


INFO: dict[str, Any] = {
    "path": FLUX_PATH,
    "api": "deepgram/v2/listen (flux)",
    "encodings": list(ENCODINGS),
    "subprotocol": SUBPROTOCOL,
}

ROUTE = ProtocolRoute(
    path=FLUX_PATH,
    name="deepgram-flux",
    credentials=credentials,
    prepare=prepare,
    info=INFO,
    refusal=refusal,
)

__all__ = ["ROUTE", "UPDATE_EVERY_S", "DeepgramFluxCodec", "FluxStats"]
