"""Deepgram's live transcription API (``/v1/listen`` WebSocket) as a sans-I/O codec.

The official SDK (``deepgram-sdk``, unchanged but for its base URL) connects to
``ws://HOST:PORT/v1/listen?model=...&encoding=linear16&sample_rate=16000&...`` with
``Authorization: Token KEY`` (or ``bearer`` with an access token), or from a browser with the
subprotocol pair ``token``, KEY. It sends binary audio and the text messages ``KeepAlive``,
``Finalize`` and ``CloseStream``; it receives ``Results``, ``SpeechStarted``, ``UtteranceEnd``
and ``Metadata``, every one a JSON text frame (the SDK's listener dies on anything else).

How kettle's events map, honestly rather than optimistically:

- a Partial is an interim ``Results`` (``is_final: false``), only with ``interim_results``;
- a Final is ``is_final: true``; ``speech_final`` is true only when the utterance ended at a
  pause the VAD heard (endpointing on), never when it was cut at the maximum length, by
  ``Finalize`` or by ``CloseStream``;
- a ``Finalize`` is answered by the Final that resolves the last utterance open at that
  moment, with ``from_finalize: true``; when none of them held speech (or none was open), an
  empty final ``Results`` with ``from_finalize: true`` answers it, so a client waiting for
  it is never left waiting;
- ``SpeechStarted`` (with ``vad_events``) comes when the VAD opens an utterance; its
  ``timestamp`` is the utterance start, pre-roll included;
- ``UtteranceEnd`` (with ``utterance_end_ms``) comes once the audio has run that long past the
  last final word with no new speech; times are on the audio clock, never the wall clock;
- after ``CloseStream`` the remaining finals, then ``Metadata``, then close 1000. An idle
  connection ends the same way (nothing is lost) but closes with 1011, as Deepgram's does;
  an empty binary frame is a ``CloseStream``, as in Deepgram's older API.

The query parameters, credentials and word fields are ``deepgram_wire``'s; the
prerecorded body is ``deepgram_rest``'s.

Choices where kettle differs from Deepgram's service (documented, not hidden):

- ``encoding`` is required (linear16, mulaw or alaw): containerised audio is not decoded live.
- ``endpointing`` in ms sets the VAD's endpoint silence, with a floor of
  ``MIN_ENDPOINTING_MS`` (Whisper transcribes word fragments badly); without it kettle keeps
  its own default (500 ms) rather than Deepgram's 10 ms; ``false`` keeps the VAD cutting
  utterances (finals still come) but no result is ever ``speech_final``.
- ``punctuate`` / ``smart_format`` false gives Deepgram's plain transcript (lowercase words,
  no punctuation); Whisper's formatted text is ``punctuated_word`` and, with either on, the
  transcript. ``model`` is accepted and the model that really served is reported.
- Interim words carry times spread evenly over the hypothesis window and ``confidence`` 0:
  partials are decoded without word alignment, and 0 says so rather than inventing a score.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import uuid
from collections import deque
from collections.abc import Mapping, Sequence
from importlib import metadata
from typing import Any

from kettle.streaming.core.backlog import FINAL, OTHER, PARTIAL
from kettle.streaming.core.events import (
    Done,
    Error,
    Event,
    Final,
    Finalized,
    NoTranscript,
    Partial,
    SpeechStarted,
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
)
from kettle.streaming.protocols.deepgram_configure import (
    ConfigureFailed,
    ConfigureMalformed,
    parse_configure,
)
from kettle.streaming.protocols.deepgram_wire import (
    ENCODINGS,
    LISTEN_PATH,
    SUBPROTOCOL,
    ListenParamError,
    ListenParams,
    ModelIdentity,
    listen_credentials,
    parse_listen_query,
    plain_transcript,
    spread_words,
    word_fields,
)
from kettle.streaming.protocols.handshake import (
    HandshakeRefused,
    HandshakeRequest,
    Prepared,
    ProtocolRoute,
    choose_subprotocol,
)
from kettle.transcribe.types import SAMPLE_RATE, Word

_ECHO_LIMIT = 1000  # characters of a refused client message echoed back in its Error


def _json(obj: Mapping[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def _send(obj: Mapping[str, Any], error_code: str | None = None) -> Send:
    return Send(OutMessage(OTHER, _json(obj)), error_code=error_code)


def kettle_version() -> str:
    try:
        return metadata.version("kettle")
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a source tree
        return "0"


def request_id(session_id: str) -> str:
    """Deepgram's request ids are UUIDs: the session id in that form when it is one."""
    try:
        return str(uuid.UUID(session_id))
    except ValueError:
        return session_id


class DeepgramLiveCodec:
    """One connection's protocol state: client frames and engine events in, actions out."""

    def __init__(self, context: CodecContext, params: ListenParams, *, created: str) -> None:
        self.context = context
        self.params = params
        self.request_id = request_id(context.session_id)
        self._created = created
        version = kettle_version()
        self._model = ModelIdentity(context.model.name, version)
        # A second model refines the finals when the server has one: say which served.
        finals = context.model.final_model
        self._final_model = ModelIdentity(finals, version) if finals else self._model
        self._sha256 = hashlib.sha256()
        self._bytes = 0
        self._stopped = False
        self._open: set[int] = set()  # starts of utterances begun and not yet resolved
        self._flushes: deque[set[int]] = deque()  # per Finalize: the utterances it waits for
        self._last_word_end: float | None = None  # armed UtteranceEnd: seconds
        # What a Configure may change after the handshake.
        self._keyterms = params.keyterms
        self._features = {"punctuate": params.punctuate, "smart_format": params.smart_format}

    def start(self) -> list[Action]:
        return []  # Deepgram says nothing until there are results

    def stream_setup(self) -> StreamSetup:
        p = self.params
        return StreamSetup(
            AudioSetup(ENCODINGS[p.encoding], p.sample_rate, p.channels),
            dataclasses.replace(p.session_config(), keyterms=self._keyterms),
        )

    # -- client side -----------------------------------------------------------------------

    @property
    def audio_seconds(self) -> float:
        """Audio received so far, whole sample frames, at the input rate."""
        return self._bytes // self.params.frame_bytes / self.params.sample_rate

    def on_binary(self, data: bytes) -> list[Action]:
        """Audio. An empty frame ends the stream, as in Deepgram's older API."""
        if self._stopped:
            return []
        if not data:
            return self._stop()
        limit = self.context.limits.max_frame_bytes
        if len(data) > limit:
            return [
                self._error(
                    "DataError",
                    f"audio message of {len(data)} bytes is over the limit of {limit} bytes; "
                    "it was dropped",
                    "bad_audio",
                )
            ]
        self._sha256.update(data)
        self._bytes += len(data)
        return [FeedAudio(data), *self._utterance_end_due()]

    def on_text(self, text: str, rate: RateGate) -> list[Action]:
        if self._stopped:
            return []
        try:
            obj = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            obj = None
        kind = obj.get("type") if isinstance(obj, dict) else None
        if kind == "CloseStream":
            return self._stop()  # never rate-limited
        verdict = rate.check()
        if verdict != "allow":
            if verdict == "drop":
                return []
            per_second = self.context.limits.max_messages_per_second
            return [
                self._error(
                    "RateLimited",
                    f"more than {per_second:g} text messages per second; messages over the "
                    "rate are dropped",
                    "rate_limited",
                )
            ]
        if kind == "KeepAlive":
            return []  # reading it reset the idle timer
        if kind == "Finalize":
            if not self._bytes:
                # No audio, so no stream to finalize: answered here, at once.
                return [self._empty_final()]
            return [Finalize()]
        if kind == "Configure" and isinstance(obj, dict):
            return self._configure(obj, text)
        description = (
            "message is not valid JSON"
            if obj is None and not text.strip().startswith(("{", "["))
            else "expected a JSON object whose type is KeepAlive, Finalize, CloseStream or "
            "Configure"
        )
        return [self._schema_error(description, text)]

    def on_leftover(self, leftover_bytes: int, frame_bytes: int) -> list[Action]:
        return [
            self._error(
                "DataError",
                f"the audio ended with {leftover_bytes} byte(s) that are not a whole sample "
                f"frame ({frame_bytes} bytes); they were dropped",
                "bad_audio",
            )
        ]

    def _stop(self) -> list[Action]:
        self._stopped = True
        return [Stop()]

    def _configure(self, obj: dict[str, Any], text: str) -> list[Action]:
        """Exactly one ConfigureSuccess or ConfigureFailure, as Deepgram answers (or a
        SchemaError for a message that is not a Configure's shape)."""
        change = parse_configure(obj)
        if isinstance(change, ConfigureMalformed):
            return [self._schema_error(change.description, text)]
        if isinstance(change, ConfigureFailed):
            failure = {
                "type": "ConfigureFailure",
                "request_id": self.request_id,
                "code": change.code,
                "description": change.description,
            }
            return [_send(failure, "bad_message")]
        out: list[Action] = []
        success: dict[str, Any] = {"type": "ConfigureSuccess", "request_id": self.request_id}
        if change.keyterms is not None:
            self._keyterms = change.keyterms
            out.append(Reconfigure(keyterms=change.keyterms))
            success["keyterms"] = list(change.keyterms)
        self._features.update(change.features or {})
        return [*out, _send(success)]

    def _schema_error(self, description: str, text: str) -> Send:
        obj = {
            "type": "Error",
            "variant": "SchemaError",
            "description": description,
            "message": text[:_ECHO_LIMIT],
        }
        return _send(obj, "bad_message")

    def _error(self, variant: str, description: str, code: str | None = None) -> Send:
        return _send({"type": "Error", "variant": variant, "description": description}, code)

    def fatal_error(self, message: str) -> str:
        return _json({"type": "Error", "variant": "InternalError", "description": message})

    # -- engine side -------------------------------------------------------------------------

    def on_event(self, event: Event, received: AudioReceived) -> list[Action]:
        if isinstance(event, Partial):
            if not self.params.interim_results:
                return []
            return [self._results(event.start, event.end, event.text, None, event.utterance)]
        if isinstance(event, Final):
            return self._on_final(event)
        if isinstance(event, SpeechStarted):
            return self._on_speech_started(event)
        if isinstance(event, Finalized):
            return self._on_finalized()
        if isinstance(event, NoTranscript):
            return [self._empty_final() for _ in range(self._resolve(event.start))]
        if isinstance(event, Error):
            return self._on_error(event)
        if isinstance(event, Done):
            return self._on_done(event)
        return []  # SpeechStopped: Deepgram reports ends through speech_final

    def _on_final(self, event: Final) -> list[Action]:
        from_finalize = self._resolve(event.start) > 0  # (later utterances stay open)
        out: list[Action] = [
            self._results(
                event.start,
                event.end,
                event.text,
                event.words,
                event.utterance,
                speech_final=self.params.endpointing and event.reason == "endpoint",
                from_finalize=from_finalize,
            )
        ]
        if self.params.utterance_end_ms is not None:
            last = event.words[-1].end if event.words else samples_to_seconds(event.end)
            later = [start for start in self._open if start > event.start]
            if later:
                # The next utterance began before this final came: was the gap long enough?
                gap = samples_to_seconds(min(later)) - last
                if gap >= self.params.utterance_end_ms / 1000:
                    out.append(self._utterance_end(last))
                self._last_word_end = None
            else:
                self._last_word_end = last
                out += self._utterance_end_due()
        return out

    def _on_speech_started(self, event: SpeechStarted) -> list[Action]:
        self._open.add(event.start)
        start = samples_to_seconds(event.start)
        out: list[Action] = []
        if self._last_word_end is not None:
            assert self.params.utterance_end_ms is not None
            if start - self._last_word_end >= self.params.utterance_end_ms / 1000:
                out.append(self._utterance_end(self._last_word_end))
            self._last_word_end = None  # else the speech goes on: no end yet
        if self.params.vad_events:
            out.append(_send({"type": "SpeechStarted", "channel": [0, 1], "timestamp": start}))
        return out

    def _on_finalized(self) -> list[Action]:
        if not self._open:
            return [self._empty_final()]  # nothing was open: answered at once
        self._flushes.append(set(self._open))
        return []

    def _resolve(self, start: int) -> int:
        """An utterance got its Final or NoTranscript: how many Finalizes that completes."""
        self._open.discard(start)
        for waiting in self._flushes:
            waiting.discard(start)
        done = 0
        while self._flushes and not self._flushes[0]:
            self._flushes.popleft()
            done += 1
        return done

    def _empty_final(self) -> Send:
        """The answer to a Finalize whose utterances held no speech."""
        at = round(self.audio_seconds * SAMPLE_RATE)
        return self._results(at, at, "", (), -1, from_finalize=True)

    def _on_error(self, event: Error) -> list[Action]:
        if event.code == "overloaded" and not event.fatal:
            return []  # Deepgram has no such notice; finals still come
        variant = "InternalError" if event.code == "internal" else event.code
        obj = {"type": "Error", "variant": variant, "description": event.message}
        message = OutMessage(OTHER, _json(obj), closing=event.fatal, fatal=event.fatal)
        return [Send(message, error_code=event.code)]

    def _on_done(self, event: Done) -> list[Action]:
        out: list[Action] = []
        if self._last_word_end is not None:
            out += self._utterance_end_due()
        # The runner closes after this: 1000, or 1001 at shutdown; an idle connection gets
        # 1011, as Deepgram's timeout gives (its finals and Metadata came first all the same).
        idle = event.reason == "idle"
        out.append(Send(OutMessage(OTHER, _json(self.metadata()), closing=True, fatal=idle)))
        return out

    def _utterance_end_due(self) -> list[Action]:
        if self._last_word_end is None or self.params.utterance_end_ms is None:
            return []
        if self.audio_seconds - self._last_word_end < self.params.utterance_end_ms / 1000:
            return []
        last, self._last_word_end = self._last_word_end, None
        return [self._utterance_end(last)]

    def _utterance_end(self, last_word_end: float) -> Send:
        return _send({"type": "UtteranceEnd", "channel": [0, 1], "last_word_end": last_word_end})

    # -- messages ----------------------------------------------------------------------------

    def _results(
        self,
        start: int,
        end: int,
        text: str,
        words: Sequence[Word] | None,
        utterance: int,
        *,
        speech_final: bool = False,
        from_finalize: bool = False,
    ) -> Send:
        """A Results message; ``words`` None means interim (untimed hypothesis words)."""
        final = words is not None
        begin, finish = samples_to_seconds(start), samples_to_seconds(end)
        shown = (
            [word_fields(w.word, w.start, w.end, w.probability) for w in words if w.word.strip()]
            if words is not None
            else spread_words(text, begin, finish)
        )
        shown = [w for w in shown if w["word"]]
        confidence = (
            round(sum(w["confidence"] for w in shown) / len(shown), 4) if final and shown else 0.0
        )
        formatted = any(self._features.values())  # punctuate or smart_format
        transcript = text.strip() if formatted else plain_transcript(text)
        model = self._final_model if final else self._model
        obj = {
            "type": "Results",
            "channel_index": [0, 1],
            "duration": round(finish - begin, 3),
            "start": begin,
            "is_final": final,
            "speech_final": speech_final,
            "from_finalize": from_finalize,
            "channel": {
                "alternatives": [
                    {"transcript": transcript, "confidence": confidence, "words": shown}
                ]
            },
            "metadata": {
                "request_id": self.request_id,
                "model_info": model.info(),
                "model_uuid": model.uuid,
            },
        }
        return Send(OutMessage(FINAL if final else PARTIAL, _json(obj), utterance, end))

    def metadata(self) -> dict[str, Any]:
        """The Metadata message that ends a stream."""
        return {
            "type": "Metadata",
            "transaction_key": "deprecated",
            "request_id": self.request_id,
            "sha256": self._sha256.hexdigest(),
            "created": self._created,
            "duration": round(self.audio_seconds, 3),
            "channels": self.params.channels,
            "models": list(dict.fromkeys([self._model.uuid, self._final_model.uuid])),
            "model_info": {m.uuid: m.info() for m in (self._model, self._final_model)},
        }


# -- the route --------------------------------------------------------------------------------


def credentials(request: HandshakeRequest) -> Sequence[str | None]:
    key, _ = listen_credentials(request.header("authorization"), request.subprotocols)
    return (key,)


def prepare(request: HandshakeRequest, model: ModelInfo | None) -> Prepared:
    try:
        params = parse_listen_query(
            request.query,
            multilingual=model.multilingual if model is not None else True,
            model_name=model.name if model is not None else "",
        )
    except ListenParamError as exc:
        raise HandshakeRefused(400, str(exc)) from None
    created = datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")
    created = created.replace("+00:00", "Z")

    def make_codec(context: CodecContext) -> DeepgramLiveCodec:
        return DeepgramLiveCodec(context, params, created=created)

    # A browser offers ("token", KEY): echo "token", never the key.
    return Prepared(make_codec, choose_subprotocol(request, (SUBPROTOCOL,)))


def refusal(status: int, message: str) -> tuple[bytes, str]:
    """Deepgram's error body shape for a refused handshake."""
    body = {"err_code": _ERR_CODES.get(status, "REQUEST_REFUSED"), "err_msg": message}
    return _json(body).encode(), "application/json"


_ERR_CODES = {400: "Bad Request", 401: "INVALID_AUTH", 503: "SERVICE_UNAVAILABLE"}

INFO: dict[str, Any] = {
    "path": LISTEN_PATH,
    "api": "deepgram/v1/listen",
    "encodings": list(ENCODINGS),
    "subprotocol": SUBPROTOCOL,
}

ROUTE = ProtocolRoute(
    path=LISTEN_PATH,
    name="deepgram",
    credentials=credentials,
    prepare=prepare,
    info=INFO,
    refusal=refusal,
)

__all__ = ["ROUTE", "DeepgramLiveCodec", "request_id"]
