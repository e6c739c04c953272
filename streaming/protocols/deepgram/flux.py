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
from dataclasses import dataclass, field
from typing import Any

from kettle.streaming.core.backlog import FINAL, OTHER, PARTIAL
from kettle.streaming.core.config import SessionConfig
from kettle.streaming.core.events import (
    Done,
    Error,
    Event,
    Final,
    NoTranscript,
    Partial,
    Paused,
    Resumed,
    SpeechStarted,
    SpeechStopped,
    samples_to_seconds,
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
from kettle.streaming.protocols.deepgram.fields import FLUX_MESSAGE
from kettle.streaming.protocols.deepgram.flux_eot import (
    MIN_END_SILENCE_MS,
    SPEAKING,
    confidence,
    endpoint_silence_ms,
    ends_sentence,
    same_words,
)
from kettle.streaming.protocols.deepgram.flux_wire import (
    FLUX_PATH,
    FluxParams,
    parse_configure,
    parse_flux_query,
)
from kettle.streaming.protocols.deepgram.live import (
    credentials,
    kettle_version,
    refusal,
    request_id,
)
from kettle.streaming.protocols.deepgram.wire import (
    ENCODINGS,
    SUBPROTOCOL,
    ListenParamError,
    ModelIdentity,
    message_type,
)
from kettle.streaming.protocols.fields import FieldError
from kettle.streaming.protocols.handshake import (
    HandshakeRefused,
    HandshakeRequest,
    Prepared,
    ProtocolRoute,
    choose_subprotocol,
)
from kettle.transcribe.types import SAMPLE_RATE, Word

UPDATE_EVERY_S = 0.25  # Flux: an Update for about every 0.25 s of audio
_UPDATE_SAMPLES = int(UPDATE_EVERY_S * SAMPLE_RATE)
_ECHO_LIMIT = 200  # characters of an unknown message quoted back
CLIENT_ERROR = "client error"  # the stop reason of a client message that ends the stream


@dataclass
class FluxStats:
    """What one connection's turns did, to measure how often an eager end is withdrawn."""

    turns: int = 0
    eager: int = 0  # EagerEndOfTurn sent
    resumed_by_speech: int = 0  # ... withdrawn because speech came back
    resumed_by_revision: int = 0  # ... withdrawn because the final read other words
    ends: dict[str, int] = field(default_factory=dict)  # EndOfTurn per trigger

    @property
    def resumed(self) -> int:
        return self.resumed_by_speech + self.resumed_by_revision


@dataclass
class _Turn:
    start: int  # 16 kHz sample: its first utterance's start
    finals: list[tuple[str, tuple[Word, ...]]] = field(default_factory=list)
    current: str = ""  # the open utterance's latest text (partial or speculative)
    speculative: bool = False  # ``current`` is the pause's speculative final
    agrees: bool = False  # ... and reads as the partial before it
    heard: int = 0  # 16 kHz sample: the end of the audio its texts cover
    final_end: int = 0  # 16 kHz sample: the end of its last final (0: none yet)
    eager: str | None = None  # the EagerEndOfTurn transcript, while it stands
    last_info: int = 0  # audio position of its last TurnInfo

    def transcript(self) -> str:
        texts = [text for text, _ in self.finals] + ([self.current] if self.current else [])
        return " ".join(t.strip() for t in texts if t.strip())


@dataclass
class _Ending:
    """An end of turn asked for: it is sent once the utterances in ``waiting`` resolve."""

    trigger: str
    confidence: float
    waiting: set[int]


class DeepgramFluxCodec:
    """One connection's turn state: client frames and engine events in, actions out."""

    def __init__(self, context: CodecContext, params: FluxParams) -> None:
        self.context = context
        self.params = params
        self.thresholds = params.thresholds
        self.keyterms = params.keyterms
        self.request_id = request_id(context.session_id)
        self._model = ModelIdentity(context.model.name, kettle_version())
        self.stats = FluxStats()
        self._sequence = 0
        self._epoch = 0  # bumped by each message but Update: stale Updates replace only Updates
        self._bytes = 0
        self._stopped = False
        self._turn: _Turn | None = None
        self._turn_index = 0
        self._unresolved: set[int] = set()  # utterances started, no Final/NoTranscript yet
        self._speech_end: int | None = None  # while paused: the last voiced frame's end
        self._last_partial = ""  # the open utterance's last plain partial
        self._ending: _Ending | None = None
        self._held: list[Event] = []  # later utterances' events while a turn ends
        self._ending_error: tuple[str, str] | None = None  # (code, description) sent at Done

    # -- setup ---------------------------------------------------------------------------

    def start(self) -> list[Action]:
        return [self._send({"type": "Connected", "model_info": self._model.info()})]

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
        return self._error_obj("INTERNAL_SERVER_ERROR", message)

    # -- client side -----------------------------------------------------------------------

    @property
    def position(self) -> int:
        """Audio received so far, in 16 kHz samples (the session's clock)."""
        frames = self._bytes // self.params.frame_bytes
        return frames * SAMPLE_RATE // self.params.sample_rate

    def on_binary(self, data: bytes) -> list[Action]:
        if self._stopped or not data:
            return []
        limit = self.context.limits.max_frame_bytes
        if len(data) > limit:
            return [
                self._warning(
                    "AUDIO_TOO_LARGE",
                    f"audio message of {len(data)} bytes is over the limit of {limit} bytes; "
                    "it was dropped",
                    "bad_audio",
                )
            ]
        self._bytes += len(data)
        return [FeedAudio(data), *self._tick()]

    def on_text(self, text: str, rate: RateGate) -> list[Action]:
        if self._stopped:
            return []
        try:
            obj = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            obj = None
        if not isinstance(obj, dict):
            # Flux's fatal error ends the connection; the turns of the audio before it
            # still end first (the stream stops as at CloseStream), then the Error and close.
            self._stopped = True
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
            self._stopped = True
            return [Stop()]  # never rate-limited
        verdict = rate.check()
        if verdict != "allow":
            if verdict == "drop":
                return []
            per_second = self.context.limits.max_messages_per_second
            return [
                self._warning(
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
            return self._force_end()
        shown = str(obj.get("type"))[:_ECHO_LIMIT]
        return [
            self._warning(
                "UNKNOWN_MESSAGE_TYPE",
                "expected a message of type Configure, ForceEndTurn or CloseStream, not "
                f"{shown!r}; it was ignored",
                "bad_message",
            )
        ]

    def on_leftover(self, leftover_bytes: int, frame_bytes: int) -> list[Action]:
        return [
            self._warning(
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
                self._send(
                    {
                        "type": "ConfigureFailure",
                        "code": "INVALID_CONFIGURE",
                        "description": str(exc),
                    },
                    "bad_message",  # counted as kettle_errors{code="bad_message"}
                )
            ]
        self.thresholds = change.thresholds
        out: list[Action] = []
        if change.keyterms is not None:
            self.keyterms = change.keyterms
            out.append(Reconfigure(keyterms=change.keyterms))
        reply = {
            "type": "ConfigureSuccess",
            "thresholds": self.thresholds.fields(),
            "keyterms": list(self.keyterms),
        }
        out.append(self._send(reply))
        return [*out, *self._tick()]

    def _force_end(self) -> list[Action]:
        # With no text yet, what is open is finalized: its text, if any, starts and ends a turn.
        return self._request_end("manual", self._confidence(), turn_needed=False)

    # -- engine side -------------------------------------------------------------------------

    def on_event(self, event: Event, received: AudioReceived) -> list[Action]:
        start = _utterance_of(event)
        ending = self._ending
        if ending is not None and start is not None and start not in ending.waiting:
            self._held.append(event)  # a later utterance: the next turn's
            return []
        if isinstance(event, SpeechStarted):
            self._unresolved.add(event.start)
            self._speech_end, self._last_partial = None, ""
            return []
        if isinstance(event, Paused):
            self._speech_end = event.speech_end
            return self._tick()
        if isinstance(event, Resumed):
            return self._on_resumed()
        if isinstance(event, Partial):
            return self._on_partial(event)
        if isinstance(event, Final):
            return self._on_resolved(event.start, event.end, event.text, event.words)
        if isinstance(event, NoTranscript):
            return self._on_resolved(event.start, None, "", ())
        if isinstance(event, Error):
            return self._on_error(event)
        if isinstance(event, Done):
            return self._on_done(event)
        if isinstance(event, SpeechStopped) and event.reason == "max_length":
            self._speech_end = None  # cut mid-speech: the next utterance goes straight on
        return []  # SpeechStopped, Finalized: the turn reads them from the finals

    def _on_resumed(self) -> list[Action]:
        self._speech_end = None
        turn = self._turn
        if turn is None:
            return []
        turn.speculative = turn.agrees = False
        if turn.eager is None:
            return []
        self.stats.resumed_by_speech += 1
        return [self._resume(turn)]

    def _on_partial(self, event: Partial) -> list[Action]:
        out: list[Action] = []
        turn = self._turn
        if turn is None:
            turn = self._turn = _Turn(start=event.start, last_info=self.position)
            turn.current, turn.heard = event.text, event.end
            out.append(self._info("StartOfTurn", turn, self._confidence()))
        else:
            if not event.speculative and turn.eager is not None:
                # Speech came back (partials hold while a pause lasts).
                self.stats.resumed_by_speech += 1
                out.append(self._resume(turn))
            turn.current, turn.heard = event.text, max(turn.heard, event.end)
            if not event.speculative:
                turn.speculative = turn.agrees = False
            out.append(self._update(turn))
        if event.speculative:
            turn.speculative = True
            turn.agrees = bool(self._last_partial) and same_words(self._last_partial, event.text)
        else:
            self._last_partial = event.text
        return [*out, *self._tick()]

    def _on_resolved(
        self, start: int, end: int | None, text: str, words: tuple[Word, ...]
    ) -> list[Action]:
        """An utterance got its Final (``end`` set) or NoTranscript."""
        self._unresolved.discard(start)
        self._last_partial = ""
        if not self._unresolved and self._speech_end is None and end is not None:
            self._speech_end = end  # (cut or finalized mid-speech) silent since, until speech
        out: list[Action] = []
        turn = self._turn
        if text.strip():
            if turn is None:
                turn = self._turn = _Turn(start=start, last_info=self.position)
                turn.current, turn.heard = text, end or start
                out.append(self._info("StartOfTurn", turn, self._confidence()))
            turn.finals.append((text, words))
            turn.current, turn.speculative = "", False
            turn.heard = turn.final_end = max(turn.heard, end or start)
        elif turn is not None and not turn.finals:
            turn.current = ""  # the model heard no words after all
        ending = self._ending
        if ending is not None:
            ending.waiting.discard(start)
            if not ending.waiting:
                out += self._end_turn(ending.trigger, ending.confidence)
        return [*out, *self._tick()]

    def _on_error(self, event: Error) -> list[Action]:
        if not event.fatal:
            return [self._warning(event.code.upper(), event.message, event.code)]
        message = self._error_obj(
            "INTERNAL_SERVER_ERROR" if event.code == "internal" else event.code.upper(),
            event.message,
        )
        return [Send(OutMessage(OTHER, message, closing=True, fatal=True), event.code)]

    def _on_done(self, event: Done) -> list[Action]:
        out: list[Action] = []
        if self._ending is not None:  # (every utterance is resolved by now)
            out += self._end_turn(self._ending.trigger, self._ending.confidence)
        if self._turn is not None:
            out += self._end_turn("close", self._confidence())
        if self._ending_error is not None:  # a client message's fatal Error, then 1011
            message = self._error_obj(*self._ending_error)
            out.append(Send(OutMessage(OTHER, message, closing=True, fatal=True), "bad_message"))
            return out
        # Nothing more to say: close after what is queued (1000; 1011 for an idle
        # connection, as Deepgram's timeout gives).
        out.append(Send(OutMessage(OTHER, "", closing=True, fatal=event.reason == "idle")))
        return out

    # -- turn decisions ------------------------------------------------------------------

    def _silence_ms(self) -> float | None:
        if self._speech_end is None:
            return None
        return (self.position - self._speech_end) * 1000 / SAMPLE_RATE

    def _confidence(self) -> float:
        silence = self._silence_ms()
        turn = self._turn
        if silence is None or turn is None:
            return SPEAKING
        text = turn.current or turn.transcript()
        return confidence(silence, closing=ends_sentence(text), agrees=turn.agrees)

    def _tick(self) -> list[Action]:
        """The audio clock moved or a cue changed: eager, end of turn, or a periodic Update."""
        turn = self._turn
        if turn is None or self._ending is not None:
            return []
        silence = self._silence_ms()
        if silence is None:
            if turn.eager is None and self.position - turn.last_info >= _UPDATE_SAMPLES:
                return [self._update(turn)]
            return []
        conf = self._confidence()
        th = self.thresholds
        out: list[Action] = []
        eager = th.eager_eot_threshold
        if eager is not None and turn.eager is None and turn.speculative and conf >= eager:
            transcript = turn.transcript()
            if transcript:
                turn.eager = transcript
                self.stats.eager += 1
                out.append(self._info("EagerEndOfTurn", turn, conf))
        if silence >= th.eot_timeout_ms:
            return [*out, *self._request_end("timeout", conf)]
        if th.eot_threshold < 1.0 and silence >= MIN_END_SILENCE_MS and conf >= th.eot_threshold:
            return [*out, *self._request_end("model", conf)]
        if turn.eager is None and self.position - turn.last_info >= _UPDATE_SAMPLES:
            out.append(self._update(turn))
        return out

    def _request_end(self, trigger: str, conf: float, *, turn_needed: bool = True) -> list[Action]:
        if self._ending is not None or (turn_needed and self._turn is None):
            return []
        if not self._unresolved:
            return self._end_turn(trigger, conf) if self._turn is not None else []
        self._ending = _Ending(trigger, conf, set(self._unresolved))
        return [Finalize()]

    def _end_turn(self, trigger: str, conf: float) -> list[Action]:
        turn, self._turn, self._ending = self._turn, None, None
        out: list[Action] = []
        if turn is not None:
            transcript = turn.transcript()
            if turn.eager is not None and transcript != turn.eager:
                if same_words(transcript, turn.eager):
                    transcript = turn.eager  # the same words: the eager text stands
                else:
                    self.stats.resumed_by_revision += 1
                    out.append(self._resume(turn))
            turn.current = ""
            words = [w for _, ws in turn.finals for w in ws]
            shown = (
                [_word(w.word, w.start, w.end, w.probability) for w in words if w.word.strip()]
                if words
                else _spread(transcript, turn.start, turn.heard)
            )
            self.stats.turns += 1
            self.stats.ends[trigger] = self.stats.ends.get(trigger, 0) + 1
            out.append(
                self._turn_info(
                    "EndOfTurn", turn, transcript, shown, max(conf, SPEAKING), trigger=trigger
                )
            )
            self._turn_index += 1
        held, self._held = self._held, []
        for event in held:
            out += self.on_event(event, AudioReceived())
        return out

    # -- messages ----------------------------------------------------------------------------

    def _resume(self, turn: _Turn) -> Send:
        turn.eager = None
        return self._info("TurnResumed", turn, self._confidence())

    def _update(self, turn: _Turn) -> Send:
        return self._info("Update", turn, self._confidence(), kind=PARTIAL)

    def _info(self, event: str, turn: _Turn, conf: float, *, kind: str = OTHER) -> Send:
        transcript = turn.eager if event == "EagerEndOfTurn" and turn.eager else turn.transcript()
        words: list[dict[str, Any]] = []
        for text, ws in turn.finals:
            words += [_word(w.word, w.start, w.end, w.probability) for w in ws if w.word.strip()]
            if not ws:
                words += _spread(text, turn.start, turn.heard)
        if turn.current:
            words += _spread(turn.current, turn.final_end or turn.start, turn.heard)
        return self._turn_info(event, turn, transcript, words, conf, kind=kind)

    def _turn_info(
        self,
        event: str,
        turn: _Turn,
        transcript: str,
        words: list[dict[str, Any]],
        conf: float,
        *,
        kind: str = OTHER,
        trigger: str | None = None,
    ) -> Send:
        turn.last_info = self.position
        end = max(turn.heard, turn.start)
        obj: dict[str, Any] = {
            "type": "TurnInfo",
            "event": event,
            "turn_index": self._turn_index,
            "audio_window_start": samples_to_seconds(turn.start),
            "audio_window_end": samples_to_seconds(end),
            "transcript": transcript,
            "words": words,
            "end_of_turn_confidence": round(conf, 3),
        }
        if trigger is not None:
            obj["trigger"] = trigger
        if self.params.language is None:
            obj["languages"] = []
        message_kind = FINAL if event == "EndOfTurn" else kind
        return self._send(obj, kind=message_kind, end=end)

    def _send(
        self,
        obj: dict[str, Any],
        error_code: str | None = None,
        *,
        kind: str = OTHER,
        end: int = 0,
    ) -> Send:
        full = {"type": obj["type"], "request_id": self.request_id, "sequence_id": self._sequence}
        full.update(obj)
        self._sequence += 1
        if kind != PARTIAL:
            self._epoch += 1
        return Send(OutMessage(kind, compact_json(full), self._epoch, end), error_code=error_code)

    def _warning(self, code: str, description: str, error_code: str | None = None) -> Send:
        return self._send({"type": "Warning", "code": code, "description": description}, error_code)

    def _error_obj(self, code: str, description: str) -> str:
        obj = {
            "type": "Error",
            "sequence_id": self._sequence,
            "code": code,
            "description": description,
        }
        self._sequence += 1
        return compact_json(obj)


def _utterance_of(event: Event) -> int | None:
    """The utterance (its start) an event is about; None for stream-wide ones."""
    if isinstance(
        event, (Partial, Final, SpeechStarted, SpeechStopped, NoTranscript, Paused, Resumed)
    ):
        return event.start
    return None


def _word(raw: str, start: float, end: float, conf: float) -> dict[str, Any]:
    """Flux's word: the punctuated, cased word as said, with its times."""
    return {
        "word": raw.strip(),
        "confidence": round(conf, 4),
        "start": round(start, 3),
        "end": round(end, 3),
    }


def _spread(text: str, start: int, end: int) -> list[dict[str, Any]]:
    """A hypothesis's words timed evenly over ``start..end`` (16 kHz samples), confidence 0."""
    words = text.split()
    if not words:
        return []
    begin, finish = samples_to_seconds(start), samples_to_seconds(max(end, start))
    step = (finish - begin) / len(words)
    return [_word(w, begin + i * step, begin + (i + 1) * step, 0.0) for i, w in enumerate(words)]


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

__all__ = ["ROUTE", "DeepgramFluxCodec", "FluxStats"]
