"""kettle's own protocol, version 1 (docs/protocol.md), as a codec and a route on `/v1/stream`.

The wire format (parsing, encoding) is `protocols.kettle_v1_wire`; this module is the
protocol's behaviour on one connection. Points of docs/protocol.md that are its doing:

- The message-rate limit applies to text messages only: dropping audio would lose audio, so
  audio is bounded by the frame-size limit and the maximum session length instead. A text
  message over the rate is dropped with a non-fatal `rate_limited` error (sent once per run
  of dropped messages); `stop` is always honoured.
- `ready` is sent at once, with the input rate the query string gives; a `config` that later
  changes `sample_rate` applies all the same (ready was just early).
- `done` may carry `"reason"`: "idle", "max_duration", "shutdown" (then the close is 1001, or
  1012 when a drain ran out of time: the client should reconnect, to another replica).

Authentication (docs/protocol.md#connecting, besides the header and `?token=`): a browser, which
cannot set headers, may offer the subprotocols `kettle.v1` and `kettle-key.<KEY>`; the server echoes
`kettle.v1`, never the key. A key is a token of printable ASCII without separators there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kettle.streaming.core.backlog import FINAL, OTHER, PARTIAL, REVISION
from kettle.streaming.core.events import Done, Error, Event, Final, Partial, Revision
from kettle.streaming.core.session import SessionConfig
from kettle.streaming.protocols import error_codes as codes
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
    Send,
    Stop,
    StreamSetup,
)
from kettle.streaming.protocols.handshake import (
    HandshakeRefused,
    HandshakeRequest,
    Prepared,
    ProtocolRoute,
    bearer_credentials,
    choose_subprotocol,
    subprotocol_credentials,
)
from kettle.streaming.protocols.kettle_v1 import wire as proto
from kettle.streaming.protocols.lifecycle import CodecLifecycle, CodecPhase, Move

PATH = "/v1/stream"
SUBPROTOCOL = "kettle.v1"
KEY_SUBPROTOCOL_PREFIX = "kettle-key."


class KettleV1Codec:
    """docs/protocol.md on one connection: settings, config-before-audio, events in its shapes."""

    def __init__(self, context: CodecContext, settings: proto.StreamSettings) -> None:
        self.context = context
        self.settings = settings
        self._life = CodecLifecycle()  # `stop` is the runner's: this one never stops

    @property
    def phase(self) -> CodecPhase:
        return self._life.phase

    @property
    def audio_started(self) -> bool:
        """After the first audio message, config is refused."""
        return not self._life.awaiting_audio

    def start(self) -> list[Action]:
        model = self.context.model
        return [
            Send(
                OutMessage(
                    OTHER,
                    proto.encode_ready(
                        self.context.session_id,
                        model.name,
                        self.settings.sample_rate,
                        multilingual=model.multilingual,
                        final_model=model.final_model,
                    ),
                )
            )
        ]

    # -- client messages -------------------------------------------------------------------

    def on_binary(self, data: bytes) -> list[Action]:
        limit = self.context.limits.max_frame_bytes
        if len(data) > limit:
            return [
                _error(
                    codes.BAD_AUDIO,
                    f"audio message of {len(data)} bytes is over the limit of {limit} bytes; "
                    "it was dropped",
                )
            ]
        self._life.move(Move.AUDIO)
        return [FeedAudio(data)]

    def on_text(self, text: str, rate: RateGate) -> list[Action]:
        try:
            message: proto.ClientMessage | None = proto.parse_client_message(text)
            problem = None
        except proto.ProtocolError as exc:
            message, problem = None, exc
        if isinstance(message, proto.StopMessage):
            return [Stop()]  # never rate-limited
        verdict = rate.check()
        if verdict != "allow":
            if verdict == "drop":
                return []
            per_second = self.context.limits.max_messages_per_second
            return [
                _error(
                    codes.RATE_LIMITED,
                    f"more than {per_second:g} text messages per second; messages over the "
                    "rate are dropped",
                )
            ]
        if problem is not None:
            return [_error(problem.code, problem.message)]
        if isinstance(message, proto.ConfigMessage):
            return self._on_config(message.update)
        if isinstance(message, proto.FinalizeMessage):
            return [Finalize()]
        return []  # keepalive: reading it already reset the idle timer

    def _on_config(self, update: proto.ConfigUpdate) -> list[Action]:
        if self.audio_started:
            return [
                _error(
                    codes.BAD_MESSAGE, "config must come before the first audio message; ignored"
                )
            ]
        settings = self.settings.apply(update)
        model = self.context.model
        try:
            settings.check_model(model.multilingual, model.name, model.speakers)
        except proto.ProtocolError as exc:
            return [_error(exc.code, "config refused, nothing changed: " + exc.message)]
        self.settings = settings
        return []

    def stream_setup(self) -> StreamSetup:
        s = self.settings
        return StreamSetup(
            AudioSetup(s.encoding, s.sample_rate, s.channels),
            SessionConfig(
                language=s.language,
                partials=s.partials,
                word_timestamps=s.word_timestamps,
                revisions=s.revisions,
                diarize=s.diarize,
                max_speakers=s.max_speakers,
            ),
        )

    def on_leftover(self, leftover_bytes: int, frame_bytes: int) -> list[Action]:
        return [
            _error(
                codes.BAD_AUDIO,
                f"the audio ended with {leftover_bytes} byte(s) that are not a whole sample "
                f"frame ({frame_bytes} bytes); they were dropped",
            )
        ]

    # -- events out --------------------------------------------------------------------------

    def on_event(self, event: Event, received: AudioReceived) -> list[Action]:
        if isinstance(event, Partial):
            if not self.settings.partials:
                return []
            return [
                Send(OutMessage(PARTIAL, proto.encode_partial(event), event.utterance, event.end))
            ]
        if isinstance(event, Final):
            text = proto.encode_final(event, word_timestamps=self.settings.word_timestamps)
            return [Send(OutMessage(FINAL, text, event.utterance, event.end))]
        if isinstance(event, Revision):
            text = proto.encode_revision(event, word_timestamps=self.settings.word_timestamps)
            return [Send(OutMessage(REVISION, text, event.utterance, event.end))]
        if isinstance(event, Error):
            message = OutMessage(
                OTHER, proto.encode_error_event(event), closing=event.fatal, fatal=event.fatal
            )
            return [Send(message, error_code=event.code)]
        if isinstance(event, Done):
            text = proto.encode_done(received.seconds, event.utterances, event.reason)
            return [Send(OutMessage(OTHER, text, closing=True))]
        return []  # pragma: no cover - Event is a closed union

    def fatal_error(self, message: str) -> str:
        return proto.encode_error(codes.INTERNAL, message, fatal=True)


def _error(code: str, message: str) -> Send:
    return Send(OutMessage(OTHER, proto.encode_error(code, message)), error_code=code)


# -- the route --------------------------------------------------------------------------------


def credentials(request: HandshakeRequest) -> Sequence[str | None]:
    return (
        bearer_credentials(request),
        subprotocol_credentials(request, KEY_SUBPROTOCOL_PREFIX),
        request.query_value("token"),
    )


def prepare(request: HandshakeRequest, model: ModelInfo | None) -> Prepared:
    try:
        params = proto.parse_query(request.query)
        settings = proto.StreamSettings().apply(params.update)
        if model is not None:
            settings.check_model(model.multilingual, model.name, model.speakers)
    except proto.ProtocolError as exc:
        raise HandshakeRefused(400, exc.message) from None

    def make_codec(context: CodecContext) -> KettleV1Codec:
        return KettleV1Codec(context, settings)

    return Prepared(make_codec, choose_subprotocol(request, (SUBPROTOCOL,)))


INFO: dict[str, Any] = {
    "path": PATH,
    "versions": [proto.PROTOCOL_VERSION],
    "revision": "1.2",
    "subprotocol": SUBPROTOCOL,
    "key_subprotocol_prefix": KEY_SUBPROTOCOL_PREFIX,
    "encodings": list(proto.ENCODINGS),
    "sample_rates": [proto.MIN_SAMPLE_RATE, proto.MAX_SAMPLE_RATE],
    "channels": list(proto.CHANNELS),
}

ROUTE = ProtocolRoute(path=PATH, name="kettle", credentials=credentials, prepare=prepare, info=INFO)
