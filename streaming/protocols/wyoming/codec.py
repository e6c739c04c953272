"""Wyoming speech-to-text on one connection, as a sans-I/O codec (docs/wyoming.md).

Every client event reaches `on_binary` as its whole bytes (the transport frames them with
`frames.parse_header`, bounded); `frames.decode` makes it the ``wyoming`` library's `Event`,
and the library's types read it. What the codec says goes out as `Send`s whose text is the
event's ``{"type", "data"}`` JSON (`encode`), written by the library's writer.

- ``describe`` -> ``info``: one ASR program with the served model, its languages and
  ``supports_transcript_streaming``; ``ping`` -> ``pong``; other event types are ignored, as
  the library's servers do.
- ``transcribe``: ``language`` (``en``, ``en-US``; ``multi`` or none: detected) and the
  names and terms (Whisper's hotwords, names first) for the rounds that follow; a language
  the model cannot transcribe is refused. ``name`` is not checked: one model serves.
- ``audio-start``, ``audio-chunk``s, ``audio-stop``: one round. Width 2 (signed 16-bit
  little-endian, what Home Assistant sends), 8-48 kHz, 1-8 channels (mixed down, resampled
  to 16 kHz by the ingress); a chunk must have its ``audio-start``'s format. Every round of
  a connection feeds one engine stream, and ``audio-stop`` finalizes it at once.
- While audio arrives: ``transcript-start``, then ``transcript-chunk``s of words that will
  not change (rounds.py); after ``audio-stop``: ``transcript`` (the chunks, concatenated),
  then ``transcript-stop``.

Streaming support: neither ``transcribe`` nor ``describe`` lets a client say whether it
reads the streaming events, so every client gets them. That is safe: Home Assistant's
client (``homeassistant.components.wyoming.stt``) reads events until the ``transcript`` and
ignores any other type, as does wyoming-bench's non-streaming mode; a client that reads
only the ``transcript`` sees exactly what a non-streaming server sends.

Bad input (a malformed or oversized event, audio before ``audio-start``, a chunk format
that changes, a refused language) gets an ``error`` event (text and code) and the
connection closes after it; the engine's own errors are passed on the same way.
"""

from __future__ import annotations

from dataclasses import replace

from kettle.streaming.core.backlog import FINAL, OTHER
from kettle.streaming.core.events import (
    Done,
    Error,
    Event,
    Final,
    Finalized,
    NoTranscript,
    Partial,
    SpeechStarted,
)
from kettle.streaming.core.session import SessionConfig
from kettle.streaming.protocols import error_codes as codes
from kettle.streaming.protocols.base import (
    Action,
    AudioReceived,
    AudioSetup,
    CodecContext,
    FeedAudio,
    Finalize,
    OutMessage,
    RateGate,
    Reconfigure,
    Send,
    StreamSetup,
    compact_json,
)
from kettle.streaming.protocols.lifecycle import CodecLifecycle, Move
from kettle.streaming.protocols.params import ParamError, parse_language
from kettle.streaming.protocols.wyoming import frames
from kettle.streaming.protocols.wyoming.info import describe
from kettle.streaming.protocols.wyoming.rounds import Round, Rounds
from kettle.transcribe.errors import ConfigError
from kettle.transcribe.model import keyterms
from wyoming.asr import Transcribe, Transcript, TranscriptChunk, TranscriptStart, TranscriptStop
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error as WyomingError
from wyoming.event import Event as WireEvent
from wyoming.event import Eventable
from wyoming.info import Describe
from wyoming.ping import Ping, Pong

WIDTHS = {2: "pcm_s16le"}  # bytes per sample -> kettle.kernels.pcm's encoding
MIN_RATE, MAX_RATE = 8000, 48000
MAX_CHANNELS = 8
# Clients can take no chunk back, and the transcript follows audio-stop at once: a round's
# first words become stable once two partials agree (the first chunk comes sooner), later
# words once four do (fewer mistakes locked in; at once, set a 11.2 vs 13.6 %, b and c
# equal), up to the no-speech bar 0.5 (not 0.3: quiet or noisy speech streams too). Partials
# every 0.3 s, tried too, cost set b 9 WER points at once (benchmarks/RESULTS.md, rejected).
ROUND_CONFIG = SessionConfig(
    vad_events=True, stable_max_no_speech=0.5, stable_agree=4, stable_agree_first=2
)
UNSUPPORTED_LANGUAGE = "unsupported_language"
TIMEOUT = "timeout"


def encode(event: Eventable | WireEvent) -> str:
    """The text of a Send: the event's type and data as JSON (the transport writes it)."""
    wire = event if isinstance(event, WireEvent) else event.event()
    return compact_json(wire.to_dict())


class WyomingCodec:
    """One Wyoming connection: its settings, its rounds, the events it answers with."""

    def __init__(self, context: CodecContext) -> None:
        self.context = context
        self._life = CodecLifecycle()  # awaiting audio -> streaming (one engine stream)
        self._config = ROUND_CONFIG
        self._audio: AudioSetup | None = None  # the format of the round taking audio
        self._format: tuple[int, int, int] | None = None  # its (rate, width, channels)
        self._rounds = Rounds()

    # -- client events -----------------------------------------------------------------------

    def start(self) -> list[Action]:
        return []  # a Wyoming server speaks when spoken to

    def on_text(self, text: str, rate: RateGate) -> list[Action]:
        return self._refuse(codes.BAD_MESSAGE, "Wyoming events only")  # no transport sends text

    def on_binary(self, data: bytes) -> list[Action]:
        if self._life.stopped:
            return []
        try:
            event = frames.decode(data, self.context.limits.max_frame_bytes)
        except frames.FrameError as exc:
            return self._refuse(exc.code, exc.text)
        try:
            return self._on_wire(event)
        except (KeyError, TypeError, ValueError) as exc:
            return self._refuse(codes.BAD_MESSAGE, f"a '{event.type}' event is malformed: {exc}")

    def _on_wire(self, event: WireEvent) -> list[Action]:
        if AudioChunk.is_type(event.type):
            return self._on_chunk(AudioChunk.from_event(event))
        if AudioStart.is_type(event.type):
            return self._on_audio_start(AudioStart.from_event(event))
        if AudioStop.is_type(event.type):
            return self._on_audio_stop()
        if Transcribe.is_type(event.type):
            return self._on_transcribe(Transcribe.from_event(event))
        if Describe.is_type(event.type):
            return [_send(describe(self.context.model))]
        if Ping.is_type(event.type):
            return [_send(Pong(text=Ping.from_event(event).text))]
        return []  # another program's event (wake, tts, ...): not ours to answer

    def _on_transcribe(self, request: Transcribe) -> list[Action]:
        if self._rounds.current is not None:
            return self._refuse(codes.BAD_MESSAGE, "transcribe came during a round's audio")
        language = None
        if request.language:
            try:
                language = parse_language(request.language)
            except ParamError as exc:
                return self._refuse(UNSUPPORTED_LANGUAGE, str(exc))
        model = self.context.model
        if language not in (None, "en") and not model.multilingual:
            text = f"language {request.language!r} is not available: {model.name} is English-only"
            return self._refuse(UNSUPPORTED_LANGUAGE, text)
        try:
            terms = keyterms.normalize(
                [*(request.transcript_names or ()), *(request.transcript_terms or ())]
            )
        except ConfigError as exc:
            return self._refuse(codes.BAD_MESSAGE, str(exc))
        return self._settle(replace(self._config, language=language, keyterms=terms))

    def _settle(self, config: SessionConfig) -> list[Action]:
        """New settings for the rounds that follow (a Reconfigure once the stream is open)."""
        old, self._config = self._config, config
        if self._life.awaiting_audio or config == old:
            return []  # stream_setup() gives them to the stream
        if config.keyterms != old.keyterms:
            return [Reconfigure(keyterms=config.keyterms, session=config)]
        return [Reconfigure(session=config)]

    def _on_audio_start(self, start: AudioStart) -> list[Action]:
        if self._rounds.current is not None:
            return self._refuse(codes.BAD_MESSAGE, "audio-start came twice without audio-stop")
        problem = _format_problem(start.rate, start.width, start.channels)
        if problem:
            return self._refuse(codes.BAD_AUDIO, problem)
        audio = AudioSetup(WIDTHS[start.width], start.rate, start.channels)
        actions: list[Action] = []
        if not self._life.awaiting_audio and audio != self._audio:
            actions.append(Reconfigure(audio=audio))
        self._audio, self._format = audio, (start.rate, start.width, start.channels)
        self._rounds.begin(self._config.language)
        return actions + self._flush()

    def _on_chunk(self, chunk: AudioChunk) -> list[Action]:
        if self._rounds.current is None or self._format is None:
            return self._refuse(codes.BAD_AUDIO, "audio-chunk came before audio-start")
        if (chunk.rate, chunk.width, chunk.channels) != self._format:
            rate, width, channels = self._format
            return self._refuse(
                codes.BAD_AUDIO,
                f"audio-chunk of {chunk.rate} Hz, width {chunk.width}, {chunk.channels} "
                f"channel(s) after audio-start's {rate} Hz, width {width}, {channels}: "
                "the format may change only at the next audio-start",
            )
        if not chunk.audio:
            return []
        self._life.move(Move.AUDIO)
        return [FeedAudio(chunk.audio)]

    def _on_audio_stop(self) -> list[Action]:
        current = self._rounds.current
        if current is None:
            return self._refuse(codes.BAD_MESSAGE, "audio-stop came without audio-start")
        current.stopped = True
        if self._life.awaiting_audio:
            current.waiting = set()  # no stream, no words: its transcript is empty
            return self._flush()
        # The round ends with the Finalized that answers it; the next round is a command
        # of its own, decoded without this one's words as context.
        return [Finalize(new_request=True)]

    def stream_setup(self) -> StreamSetup:
        return StreamSetup(self._audio or AudioSetup(), self._config)

    def on_leftover(self, leftover_bytes: int, frame_bytes: int) -> list[Action]:
        return []  # the round's audio ended mid-frame: nothing a client could act on

    # -- engine events -----------------------------------------------------------------------

    def on_event(self, event: Event, received: AudioReceived) -> list[Action]:
        rounds = self._rounds
        if isinstance(event, SpeechStarted):
            rounds.began(event.start)
        elif isinstance(event, Partial):
            rounds.stable(event.start, event.stable)
        elif isinstance(event, Final):
            rounds.final(event.start, event.text, event.language)
            return self._flush(FINAL, event.utterance, event.end)  # its lag is measured
        elif isinstance(event, NoTranscript):
            rounds.nothing(event.start)
        elif isinstance(event, Finalized):
            rounds.finalized()
        elif isinstance(event, Error):
            message = OutMessage(
                OTHER, encode(WyomingError(event.message, event.code)), closing=event.fatal
            )
            return [Send(message, error_code=event.code)]
        elif isinstance(event, Done):
            return self._on_done(event)
        return self._flush()

    def _on_done(self, done: Done) -> list[Action]:
        """The stream ended: after a stop of the server's own, each round gets what it has;
        a timeout says so. Either way the connection closes."""
        limits = self.context.limits
        if done.reason == "idle":
            text = f"no event for {limits.idle_timeout_s:g} s; closing"
            return self._refuse(TIMEOUT, text)
        if done.reason == "max_duration":
            return self._refuse(TIMEOUT, f"the session passed {limits.max_session_s:g} s")
        actions: list[Action] = []
        if done.reason in (None, "shutdown"):
            while (head := self._rounds.head) is not None:
                head.waiting = set()
                actions += self._flush()
        return [*actions, Send(OutMessage(OTHER, "", closing=True))]

    def _flush(self, kind: str = OTHER, utterance: int = -1, end: int = 0) -> list[Action]:
        """What the oldest rounds have to say, in order; a complete one ends."""
        actions: list[Action] = []
        while (head := self._rounds.head) is not None:
            if not head.announced:
                actions.append(_send(TranscriptStart(language=head.language)))
                head.announced = True
            for chunk in head.take_chunks():
                message = OutMessage(kind, encode(TranscriptChunk(chunk)), utterance, end)
                actions.append(Send(message))
            if not head.complete:
                break
            actions += _ending(self._rounds.pop_head())
        return actions

    def fatal_error(self, message: str) -> str:
        return encode(WyomingError(message, codes.INTERNAL))

    def _refuse(self, code: str, text: str) -> list[Action]:
        """An error event, and the connection closes after it; nothing more is read."""
        if not self._life.stopped:
            self._life.move(Move.STOP)
        message = OutMessage(OTHER, encode(WyomingError(text, code)), closing=True)
        return [Send(message, error_code=code)]


def _ending(done: Round) -> list[Action]:
    language = done.detected or done.language
    return [_send(Transcript(done.text, language=language)), _send(TranscriptStop())]


def _send(event: Eventable) -> Send:
    return Send(OutMessage(OTHER, encode(event)))


def _format_problem(rate: int, width: int, channels: int) -> str | None:
    if width not in WIDTHS:
        return f"width {width} is not taken: only 2 (signed 16-bit little-endian PCM)"
    if not (isinstance(rate, int) and MIN_RATE <= rate <= MAX_RATE):
        return f"rate {rate} is outside {MIN_RATE}..{MAX_RATE} Hz"
    if not (isinstance(channels, int) and 1 <= channels <= MAX_CHANNELS):
        return f"{channels} channels: 1 to {MAX_CHANNELS} are taken"
    return None


__all__ = ["MAX_CHANNELS", "MAX_RATE", "MIN_RATE", "WIDTHS", "WyomingCodec", "encode"]
