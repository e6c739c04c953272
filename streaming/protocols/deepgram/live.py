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
  it is never left waiting. Every Finalize gets one answer of its own: Finalizes that
  wait for the same Final (sent while it is decoded) get it and then an empty one each;
- ``SpeechStarted`` (with ``vad_events``) comes when the VAD opens an utterance; its
  ``timestamp`` is the utterance start, pre-roll included;
- ``UtteranceEnd`` (with ``utterance_end_ms``) comes once the audio has run that long past the
  last final word with no new speech; times are on the audio clock, never the wall clock;
- after ``CloseStream`` the remaining finals, then ``Metadata``, then close 1000. A socket
  that sends neither audio nor a text message (``KeepAlive``, ...) for the audio timeout
  (``ServerConfig.deepgram_audio_timeout_s``, 10 s as Deepgram's; the runner enforces it)
  ends the same way (nothing is lost) but closes with 1011 and Deepgram's NET-0001 reason;
  an empty binary frame is a ``CloseStream``, as in Deepgram's older API.
- an audio message over the frame limit (``Limits.max_frame_bytes``, what ``/v1/info``
  reports) is not transcribed: a ``DataError``, the finals of the audio before it,
  ``Metadata``, close 1009 (a dropped message would be a silent gap in the transcript).

The query parameters, credentials and word fields are ``deepgram_wire``'s; the
prerecorded body is ``deepgram_rest``'s.

Choices where kettle differs from Deepgram's service (documented, not hidden):

- without ``encoding`` (or with ``ogg-opus``/``flac``) the audio is in a container (WebM,
  Ogg, MP3, WAV, ...: transcribe.container_stream); raw audio names linear16, mulaw or alaw.
  Audio that cannot be decoded gets a ``DataError``, its finals, Metadata and close 1008.
- ``keyterm`` and ``keywords`` are Whisper's hotwords; ``Configure`` replaces them
  (deepgram_configure.py). ``multichannel`` runs an engine stream per channel (a session
  slot each), results carrying ``channel_index`` ``[i, N]``.
- ``endpointing`` in ms sets the VAD's endpoint silence, with a floor of
  ``MIN_ENDPOINTING_MS`` (Whisper transcribes word fragments badly); without it kettle keeps
  its own default (500 ms) rather than Deepgram's 10 ms; ``false`` keeps the VAD cutting
  utterances (finals still come) but no result is ever ``speech_final``.
- ``punctuate`` / ``smart_format`` false gives Deepgram's plain transcript (lowercase words,
  no punctuation); Whisper's formatted text is ``punctuated_word`` and, with either on, the
  transcript. ``model`` is accepted and the model that really served is reported.
- ``diarize`` (or ``diarize_model``) labels each final's words with ``speaker`` (0, 1, ... in
  the order first heard, per channel) and ``speaker_confidence``; a final is one speaker's,
  and interim results carry none. Without a speaker model the handshake is refused (400).
- Interim words carry times spread evenly over the hypothesis window and ``confidence`` 0:
  partials are decoded without word alignment, and 0 says so rather than inventing a score.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
from collections.abc import Sequence
from typing import Any

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
    CONTAINER,
    Action,
    AudioReceived,
    AudioSetup,
    CodecContext,
    FeedAudio,
    Finalize,
    ModelInfo,
    RateGate,
    Reconfigure,
    Send,
    Stop,
    StreamSetup,
    compact_json,
)
from kettle.streaming.protocols.deepgram.channel import ChannelState
from kettle.streaming.protocols.deepgram.configure import (
    ConfigureFailed,
    ConfigureMalformed,
    parse_configure,
)
from kettle.streaming.protocols.deepgram.fields import LIVE_MESSAGE
from kettle.streaming.protocols.deepgram.live_audio import ReceivedAudio
from kettle.streaming.protocols.deepgram.live_messages import FRAME_TOO_BIG, NET_0001, LiveWriter
from kettle.streaming.protocols.deepgram.wire import (
    ENCODINGS,
    LISTEN_PATH,
    SUBPROTOCOL,
    ListenParamError,
    ListenParams,
    check_speakers,
    kettle_version,
    listen_credentials,
    message_type,
    parse_listen_query,
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


class DeepgramLiveCodec:
    """One connection's protocol state: client frames and engine events in, actions out.
    With ``multichannel`` each channel is an engine stream of its own (ChannelCodec). The
    messages' encoding is the ``LiveWriter``'s, each channel's Finalize and UtteranceEnd
    bookkeeping its ``ChannelState``'s, the audio's tally the ``ReceivedAudio``'s."""

    def __init__(self, context: CodecContext, params: ListenParams, *, created: str) -> None:
        self.context = context
        self.params = params
        self.request_id = request_id(context.session_id)
        self._audio = ReceivedAudio(params)
        self._life = CodecLifecycle()
        self._channels = [ChannelState() for _ in range(params.streams)]
        # What a Configure may change after the handshake: the keyterms, and the features
        # the writer renders by.
        self._keyterms = params.keyterms
        features = {"punctuate": params.punctuate, "smart_format": params.smart_format}
        self._writer = LiveWriter(
            self.request_id,
            context.model,
            channels=len(self._channels),
            features=features,
            created=created,
        )

    def start(self) -> list[Action]:
        return []  # Deepgram says nothing until there are results

    def stream_setup(self) -> StreamSetup:
        p = self.params
        encoding = CONTAINER if p.encoding is None else ENCODINGS[p.encoding]
        return StreamSetup(
            AudioSetup(encoding, p.sample_rate, p.channels, split_channels=p.multichannel),
            dataclasses.replace(p.session_config(), keyterms=self._keyterms),
        )

    # -- client side -----------------------------------------------------------------------

    @property
    def audio_seconds(self) -> float:
        """Audio received so far: raw audio's whole sample frames at the input rate; a
        container's decoded audio, as the engine's events last reported it."""
        return self._audio.seconds

    @property
    def phase(self) -> CodecPhase:
        return self._life.phase

    def on_binary(self, data: bytes) -> list[Action]:
        """Audio. An empty frame ends the stream, as in Deepgram's older API."""
        if self._life.stopped:
            return []
        if not data:
            return self._stop()
        limit = self.context.limits.max_frame_bytes
        if len(data) > limit:
            # Dropping it would leave a silent gap in the transcript: the stream ends here.
            self._life.move(Move.STOP)
            description = (
                f"audio message of {len(data)} bytes is over the limit of {limit} bytes; the "
                "stream ends with the results of the audio before it"
            )
            return [self._writer.error("DataError", description, "bad_audio"), Stop(FRAME_TOO_BIG)]
        self._audio.add(data)
        self._life.move(Move.AUDIO)
        due = [a for i in range(len(self._channels)) for a in self._utterance_end_due(i)]
        return [FeedAudio(data), *due]

    def on_text(self, text: str, rate: RateGate) -> list[Action]:
        if self._life.stopped:
            return []
        try:
            obj = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            obj = None
        kind: str | None = None
        if isinstance(obj, dict):
            with contextlib.suppress(FieldError):  # (a SchemaError below, past the rate gate)
                kind = message_type(obj, LIVE_MESSAGE)
        if kind == "CloseStream":
            return self._stop()  # never rate-limited
        verdict = rate.check()
        if verdict != "allow":
            if verdict == "drop":
                return []
            per_second = self.context.limits.max_messages_per_second
            return [
                self._writer.error(
                    "RateLimited",
                    f"more than {per_second:g} text messages per second; messages over the "
                    "rate are dropped",
                    "rate_limited",
                )
            ]
        if kind == "KeepAlive":
            return []  # reading it reset the idle timer
        if kind == "Finalize":
            if self._life.awaiting_audio:
                # No audio, so no stream to finalize: answered here, at once.
                return [self._empty_final(i) for i in range(len(self._channels))]
            return [Finalize()]
        if kind == "Configure":
            assert isinstance(obj, dict)
            return self._configure(obj, text)
        description = (
            "message is not valid JSON"
            if obj is None and not text.strip().startswith(("{", "["))
            else "expected a JSON object whose type is KeepAlive, Finalize, CloseStream or "
            "Configure"
        )
        return [self._writer.schema_error(description, text)]

    def on_leftover(self, leftover_bytes: int, frame_bytes: int) -> list[Action]:
        return [
            self._writer.error(
                "DataError",
                f"the audio ended with {leftover_bytes} byte(s) that are not a whole sample "
                f"frame ({frame_bytes} bytes); they were dropped",
                "bad_audio",
            )
        ]

    def _stop(self) -> list[Action]:
        self._life.move(Move.STOP)
        return [Stop()]

    def _configure(self, obj: dict[str, Any], text: str) -> list[Action]:
        """Exactly one ConfigureSuccess or ConfigureFailure, as Deepgram answers (or a
        SchemaError for a message that is not a Configure's shape)."""
        change = parse_configure(obj)
        if isinstance(change, ConfigureMalformed):
            return [self._writer.schema_error(change.description, text)]
        if isinstance(change, ConfigureFailed):
            return [self._writer.configure_failure(change.code, change.description)]
        out: list[Action] = []
        if change.keyterms is not None:
            self._keyterms = change.keyterms
            out.append(Reconfigure(keyterms=change.keyterms))
        self._writer.features.update(change.features or {})
        return [*out, self._writer.configure_success(change.keyterms)]

    def fatal_error(self, message: str) -> str:
        return compact_json({"type": "Error", "variant": "InternalError", "description": message})

    # -- engine side -------------------------------------------------------------------------

    def on_event(self, event: Event, received: AudioReceived) -> list[Action]:
        """An event of the only stream (or one for the connection, such as an Error)."""
        return self.on_channel_event(0, event, received)

    def on_channel_event(self, channel: int, event: Event, received: AudioReceived) -> list[Action]:
        self._audio.decoded = received
        if isinstance(event, Partial):
            if not self.params.interim_results:
                return []
            return [
                self._writer.results(
                    channel, event.start, event.end, event.text, None, event.utterance
                )
            ]
        if isinstance(event, Final):
            return self._on_final(channel, event)
        if isinstance(event, SpeechStarted):
            return self._on_speech_started(channel, event)
        if isinstance(event, Finalized):
            return [] if self._channels[channel].finalize() else [self._empty_final(channel)]
        if isinstance(event, NoTranscript):
            done = self._channels[channel].resolve(event.start)
            return [self._empty_final(channel) for _ in range(done)]
        if isinstance(event, Error):
            return self._on_error(event)
        if isinstance(event, Done):
            return self._on_done(channel, event)
        return []  # SpeechStopped: Deepgram reports ends through speech_final

    def _on_final(self, channel: int, event: Final) -> list[Action]:
        state = self._channels[channel]
        answered = state.resolve(event.start)  # Finalizes this completes (later ones wait)
        from_finalize = answered > 0
        out: list[Action] = [
            self._writer.results(
                channel,
                event.start,
                event.end,
                event.text,
                event.words,
                event.utterance,
                speech_final=self.params.endpointing and event.reason == "endpoint",
                from_finalize=from_finalize,
                speaker=event.speaker,
                speaker_confidence=event.speaker_confidence,
            )
        ]
        # Each Finalize gets its own answer: those that waited for this final too (they came
        # while it was decoded and found nothing newer open) get an empty one each.
        out += [self._empty_final(channel) for _ in range(answered - 1)]
        if self.params.utterance_end_ms is not None:
            last = event.words[-1].end if event.words else samples_to_seconds(event.end)
            later = state.later_than(event.start)
            if later:
                # The next utterance began before this final came: was the gap long enough?
                gap = samples_to_seconds(min(later)) - last
                if gap >= self.params.utterance_end_ms / 1000:
                    out.append(self._writer.utterance_end(channel, last))
                state.last_word_end = None
            else:
                state.last_word_end = last
                out += self._utterance_end_due(channel)
        return out

    def _on_speech_started(self, channel: int, event: SpeechStarted) -> list[Action]:
        state = self._channels[channel]
        state.began(event.start)
        start = samples_to_seconds(event.start)
        out: list[Action] = []
        if state.last_word_end is not None:
            assert self.params.utterance_end_ms is not None
            if start - state.last_word_end >= self.params.utterance_end_ms / 1000:
                out.append(self._writer.utterance_end(channel, state.last_word_end))
            state.last_word_end = None  # else the speech goes on: no end yet
        if self.params.vad_events:
            out.append(self._writer.speech_started(channel, start))
        return out

    def _empty_final(self, channel: int) -> Send:
        """The answer to a Finalize whose utterances held no speech."""
        at = round(self.audio_seconds * SAMPLE_RATE)
        return self._writer.results(channel, at, at, "", (), -1, from_finalize=True)

    def _on_error(self, event: Error) -> list[Action]:
        if event.code == "overloaded" and not event.fatal:
            return []  # Deepgram has no such notice; finals still come
        return [self._writer.engine_error(event)]

    def _on_done(self, channel: int, event: Done) -> list[Action]:
        state = self._channels[channel]
        out: list[Action] = []
        if state.last_word_end is not None:
            out += self._utterance_end_due(channel)
        state.done = True
        if not all(c.done for c in self._channels):
            return out  # the Metadata comes after every channel's finals
        # The runner closes after this (their finals came first all the same).
        out.append(self._writer.closing(self.metadata(), event.reason))
        return out

    def _utterance_end_due(self, channel: int) -> list[Action]:
        last = self._channels[channel].utterance_end_due(
            self.audio_seconds, self.params.utterance_end_ms
        )
        return [] if last is None else [self._writer.utterance_end(channel, last)]

    def metadata(self) -> dict[str, Any]:
        """The Metadata message that ends a stream."""
        return self._writer.metadata(self._audio.sha256(), self.audio_seconds, self.params.channels)


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
        if model is not None:  # (while the model loads the gate answers 503)
            check_speakers(params.diarize, model.speakers)
    except ListenParamError as exc:
        raise HandshakeRefused(400, str(exc)) from None
    created = datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")
    created = created.replace("+00:00", "Z")

    def make_codec(context: CodecContext) -> DeepgramLiveCodec:
        return DeepgramLiveCodec(context, params, created=created)

    # A browser offers ("token", KEY): echo "token", never the key.
    # A multichannel connection drives one engine stream per channel: each holds a slot.
    return Prepared(make_codec, choose_subprotocol(request, (SUBPROTOCOL,)), params.streams)


def refusal(status: int, message: str) -> tuple[bytes, str]:
    """Deepgram's error body shape for a refused handshake."""
    body = {"err_code": _ERR_CODES.get(status, "REQUEST_REFUSED"), "err_msg": message}
    return compact_json(body).encode(), "application/json"


_ERR_CODES = {400: "Bad Request", 401: "INVALID_AUTH", 503: "SERVICE_UNAVAILABLE"}

INFO: dict[str, Any] = {
    "path": LISTEN_PATH,
    "api": "deepgram/v1/listen",
    "encodings": list(ENCODINGS),
    "containers": "without encoding: WebM, Ogg, MP3, WAV, ... (what PyAV reads)",
    "subprotocol": SUBPROTOCOL,
}

ROUTE = ProtocolRoute(
    path=LISTEN_PATH,
    name="deepgram",
    credentials=credentials,
    prepare=prepare,
    info=INFO,
    refusal=refusal,
    # Deepgram's own audio timeout (NET-0001) instead of the server's idle timeout.
    idle_timeout=lambda limits: limits.deepgram_audio_timeout_s,
)

__all__ = [
    "FRAME_TOO_BIG",
    "NET_0001",
    "ROUTE",
    "DeepgramLiveCodec",
    "kettle_version",
    "request_id",
]
