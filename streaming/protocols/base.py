"""What every wire-protocol codec speaks: the actions it returns and the interface it offers.

A codec is sans-I/O: it never touches a socket, a clock or the engine. The connection runner
(`kettle.streaming.server.runner`) hands it what arrived (a text or binary message, an engine event)
and carries out the actions it returns, in order:

- `Send`: queue one outgoing text message (through the connection's outbox, which drops stale
  partials for a slow reader and closes a reader that reads nothing);
- `FeedAudio`: wire audio bytes in the codec's current `AudioSetup.encoding`; the first one
  (or a `Stop`) opens the engine stream with the codec's `stream_setup()`;
- `Finalize`: end the open utterance now;
- `Reconfigure`: change the open stream's settings for what is decoded next, or the wire
  format of the audio that follows (the codec's `stream_setup()` must say the same, for a
  stream not open yet);
- `Stop`: no more audio; finals, then the engine's `Done` follow;
- `Close`: close the connection at once with a code (after what is already queued is lost).

The runner owns the lifecycle (idle and session-length deadlines, shutdown, slow readers,
internal failures); the codec owns the wire format and the protocol's own rules.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from kettle.streaming.core.events import Event
from kettle.streaming.core.refine import STALE_S
from kettle.streaming.core.session import SessionConfig
from kettle.streaming.protocols.limits import Limits  # codecs read it from their context
from kettle.transcribe.types import SAMPLE_RATE

# Close codes (RFC 6455) the runner and codecs use.
CLOSE_NORMAL = 1000
CLOSE_GOING_AWAY = 1001
CLOSE_POLICY = 1008
CLOSE_TOO_BIG = 1009
CLOSE_INTERNAL = 1011
CLOSE_SERVICE_RESTART = 1012  # a drained replica: reconnect (to another one)

# How far behind the newest final (in 16 kHz samples) a codec keeps what it needs to render
# a Revision of an earlier one: refine.py skips a refinement past STALE_S of audio after its
# final, so twice that is more than enough.
REVISION_HORIZON = int(2 * STALE_S * SAMPLE_RATE)


def compact_json(obj: Mapping[str, Any]) -> str:
    """A server message's JSON text: UTF-8 as is, no spaces (what every codec sends)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class OutMessage:
    """One encoded server message. `end` is the 16 kHz end sample of partials and finals."""

    kind: str
    text: str
    utterance: int = -1
    end: int = 0
    # The connection closes after this message (done, fatal error); a closing message with no
    # text is not sent (a protocol with nothing to say at the end: Deepgram Flux).
    closing: bool = False
    fatal: bool = False  # ... with 1011
    close_code: int | None = None  # ... with this code instead (a protocol's own, e.g. 3006)
    close_reason: str = ""  # the close frame's reason (at most 123 bytes of UTF-8)


@dataclass(frozen=True)
class Send:
    """Queue `message`; `error_code` counts it in kettle_errors_total{code}."""

    message: OutMessage
    error_code: str | None = None


@dataclass(frozen=True)
class FeedAudio:
    data: bytes


@dataclass(frozen=True)
class Finalize:
    """The open utterance ends now (Session.finalize)."""

    # What follows is a request of its own (a Wyoming round): no earlier final is its
    # context or prompt.
    new_request: bool = False


@dataclass(frozen=True)
class Reconfigure:
    """New settings from now on; None leaves one as it is. The runner switches the audio
    first (the old format's last samples reach the stream before the new settings), then
    the stream's settings."""

    keyterms: tuple[str, ...] | None = None  # transcribe.keyterms.normalize's form
    endpoint_silence_ms: int | None = None  # within SessionConfig's range
    # The stream's settings: the fields SessionConfig.changed_to takes, from when it says.
    session: SessionConfig | None = None
    # The wire format of the FeedAudio after it (raw PCM, the channels unchanged).
    audio: AudioSetup | None = None


@dataclass(frozen=True)
class Stop:
    """No more audio. `reason` is carried to `Done.reason` (None for a client's own stop)."""

    reason: str | None = None


@dataclass(frozen=True)
class Close:
    code: int
    reason: str = ""


Action = Send | FeedAudio | Finalize | Reconfigure | Stop | Close


CONTAINER = "container"  # AudioSetup.encoding of audio in a container (WebM, Ogg, MP3, WAV)


@dataclass(frozen=True)
class AudioSetup:
    """The wire audio format: an encoding `kettle.kernels.pcm.PcmStreamDecoder` decodes, or
    CONTAINER (transcribe.container_stream; `sample_rate` is then not looked at).
    `split_channels`: each channel is an engine stream of its own (the events come to
    `ChannelCodec.on_channel_event`), else the channels are mixed down to one."""

    encoding: str = "pcm_s16le"
    sample_rate: int = 16000
    channels: int = 1
    split_channels: bool = False

    @property
    def streams(self) -> int:
        """Engine streams this audio feeds."""
        return self.channels if self.split_channels else 1


@dataclass(frozen=True)
class StreamSetup:
    """What the engine stream is opened with, when audio first flows (a `Reconfigure` may
    change some of it later: SessionConfig.changed_to says what)."""

    audio: AudioSetup = field(default_factory=AudioSetup)
    session: SessionConfig = field(default_factory=SessionConfig)


@dataclass(frozen=True)
class AudioReceived:
    """Audio received so far: whole sample frames at the input rate (0 before any)."""

    input_frames: int = 0
    sample_rate: int = 16000

    @property
    def seconds(self) -> float:
        return round(self.input_frames / self.sample_rate, 3)


@dataclass(frozen=True)
class ModelInfo:
    """The model(s) serving sessions, as codecs describe them to clients."""

    name: str
    multilingual: bool
    final_model: str | None = None  # a second model for finals, when there is one
    refine_model: str | None = None  # a model for refinements, when it is another one
    # Other names clients may give these models (OpenAI's default model names, from
    # ServerConfig.openai_aliases): the same rule for OpenAI's REST and Realtime APIs.
    aliases: tuple[str, ...] = ()
    # A speaker model labels finals for clients that ask (diarize); False: such asks are
    # refused in the protocol's own shape.
    speakers: bool = False


@dataclass(frozen=True)
class CodecContext:
    session_id: str
    model: ModelInfo
    limits: Limits = field(default_factory=Limits)


class RateGate(Protocol):
    """The connection's text-message rate; a codec asks it for each message that counts.

    `check()` answers "allow", "notify" (drop it, and tell the client: the first of a run of
    dropped messages) or "drop" (drop it silently). Messages that must never be dropped (v1's
    `stop`, audio carried in text messages) are simply not checked.
    """

    def check(self) -> str: ...


class Codec(Protocol):
    """One wire protocol for one connection. Every method returns actions, and never raises
    for bad client input (that becomes an error message in the protocol's own shape)."""

    def start(self) -> list[Action]:
        """Right after the WebSocket is accepted (kettle v1's `ready`)."""
        ...

    def on_text(self, text: str, rate: RateGate) -> list[Action]: ...

    def on_binary(self, data: bytes) -> list[Action]: ...

    def stream_setup(self) -> StreamSetup:
        """The settings the engine stream opens with (asked once, at the first audio)."""
        ...

    def on_leftover(self, leftover_bytes: int, frame_bytes: int) -> list[Action]:
        """At stop: the audio ended with bytes that are not a whole sample frame (dropped)."""
        ...

    def on_event(self, event: Event, received: AudioReceived) -> list[Action]:
        """An engine event (Partial, Final, Revision, Error, Done); `Done` must yield a closing
        Send. A protocol without revisions never asks for them (SessionConfig.revisions)."""
        ...

    def fatal_error(self, message: str) -> str:
        """The text of a fatal internal error, sent just before the close with 1011."""
        ...


@runtime_checkable
class ChannelCodec(Codec, Protocol):
    """A codec whose `stream_setup()` may split the channels into streams of their own: the
    runner then hands it each stream's events with the channel they came from."""

    def on_channel_event(self, channel: int, event: Event, received: AudioReceived) -> list[Action]:
        """As `Codec.on_event`, for channel `channel`'s stream; `Done` comes once per channel,
        and only the last must yield the closing Send."""
        ...
