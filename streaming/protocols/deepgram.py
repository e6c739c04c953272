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
  connection ends the same way but closes with 1011 and Deepgram's NET-0001 reason.

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

import hashlib
import json
import uuid
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from kettle.kernels.pcm import MAX_SAMPLE_RATE, MIN_SAMPLE_RATE
from kettle.streaming.agreement import normalize_word, split_words
from kettle.streaming.events import (
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
from kettle.streaming.limits import bearer_token
from kettle.streaming.protocol import LANGUAGES
from kettle.streaming.session import SessionConfig
from kettle.transcribe.errors import KettleError
from kettle.transcribe.types import SAMPLE_RATE, Word

LISTEN_PATH = "/v1/listen"
# Deepgram's encoding names -> kernels.pcm's.
ENCODINGS = {"linear16": "pcm_s16le", "mulaw": "mulaw", "alaw": "alaw"}
DEFAULT_SAMPLE_RATES = {"linear16": 16000, "mulaw": 8000, "alaw": 8000}
MIN_ENDPOINTING_MS = 200
MAX_ENDPOINTING_MS = 10000
MAX_UTTERANCE_END_MS = 600_000
SUBPROTOCOL = "token"
CLOSE_NORMAL = 1000
CLOSE_GOING_AWAY = 1001
CLOSE_INTERNAL = 1011
IDLE_REASON = (
    "NET-0001: kettle did not receive audio data or a text message within the timeout window"
)
_ECHO_LIMIT = 1000  # characters of a refused client message echoed back in its Error


class ListenParamError(KettleError):
    """A query parameter the endpoint refuses; the message is meant for the peer (HTTP 400)."""


@dataclass(frozen=True)
class ModelIdentity:
    """The model that serves, as Deepgram's metadata names it."""

    name: str
    version: str
    arch: str = "whisper"

    @property
    def uuid(self) -> str:
        # Stable per model name, so a client can tell which model served without a registry.
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"kettle:model/{self.name}"))

    def info(self) -> dict[str, str]:
        return {"name": self.name, "version": self.version, "arch": self.arch}


@dataclass(frozen=True)
class ListenParams:
    """The settings of one live connection, from the handshake's query string."""

    encoding: str  # Deepgram's name: linear16, mulaw or alaw
    sample_rate: int
    channels: int = 1
    model: str | None = None
    language: str | None = "en"  # ISO 639-1, or None to detect (``language=multi``)
    interim_results: bool = False
    endpointing_ms: int | None = None  # None: kettle's default endpoint silence
    endpointing: bool = True  # false: results are never speech_final
    utterance_end_ms: int | None = None
    vad_events: bool = False
    punctuate: bool = False
    smart_format: bool = False

    @property
    def pcm_encoding(self) -> str:
        """The encoding's name in kernels.pcm."""
        return ENCODINGS[self.encoding]

    @property
    def frame_bytes(self) -> int:
        return (2 if self.encoding == "linear16" else 1) * self.channels

    @property
    def formatted(self) -> bool:
        """Whisper's punctuated, formatted text (else Deepgram's plain lowercase words)."""
        return self.punctuate or self.smart_format

    def session_config(self) -> SessionConfig:
        extra: dict[str, Any] = {}
        if self.endpointing_ms is not None:
            ms = min(max(self.endpointing_ms, MIN_ENDPOINTING_MS), MAX_ENDPOINTING_MS)
            extra["endpoint_silence_ms"] = ms
        return SessionConfig(
            language=self.language,
            partials=self.interim_results,
            word_timestamps=True,  # every final Results carries words
            vad_events=True,
            **extra,
        )


def parse_flag(name: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value == "true":
        return True
    if value == "false":
        return False
    raise ListenParamError(f"{name} must be true or false, not {raw!r}")


def parse_int(name: str, raw: str, low: int, high: int) -> int:
    text = raw.strip()
    if not (text.isascii() and text.isdigit()):
        raise ListenParamError(f"{name} must be an integer, not {raw!r}")
    value = int(text)
    if not low <= value <= high:
        raise ListenParamError(f"{name} must be within {low}..{high}, not {value}")
    return value


def parse_language(raw: str) -> str | None:
    tag = raw.strip()
    if tag.lower() == "multi":
        return None
    primary = tag.split("-")[0].split("_")[0].lower()
    if primary not in LANGUAGES:
        raise ListenParamError(f"language {raw!r} is not one kettle's models know")
    return primary


def parse_listen_query(query: str, *, multilingual: bool, model_name: str) -> ListenParams:
    """The handshake's query string; ListenParamError (HTTP 400) names what is wrong.

    Parameters kettle does not implement (diarize, keywords, ...) are ignored, as Deepgram
    ignores those a model does not support; ``multichannel=true`` is refused, because
    results per channel cannot be given.
    """
    try:
        pairs = parse_qs(query, keep_blank_values=True, errors="strict")
    except (UnicodeDecodeError, ValueError) as exc:
        raise ListenParamError(f"query string cannot be decoded: {exc}") from None
    one: dict[str, str] = {}
    for name, values in pairs.items():
        if len(set(values)) > 1:
            raise ListenParamError(f"{name} is given more than once with different values")
        one[name] = values[0]
    encoding = one.get("encoding")
    if encoding is None:
        raise ListenParamError(
            "encoding is required: kettle's live endpoint takes raw audio "
            f"({', '.join(ENCODINGS)}), not containers"
        )
    encoding = encoding.strip().lower()
    if encoding not in ENCODINGS:
        raise ListenParamError(f"encoding must be one of {', '.join(ENCODINGS)}, not {encoding!r}")
    rate = DEFAULT_SAMPLE_RATES[encoding]
    if "sample_rate" in one:
        rate = parse_int("sample_rate", one["sample_rate"], MIN_SAMPLE_RATE, MAX_SAMPLE_RATE)
    channels = parse_int("channels", one["channels"], 1, 2) if "channels" in one else 1
    if "multichannel" in one and parse_flag("multichannel", one["multichannel"]):
        raise ListenParamError("multichannel=true is not supported: channels are mixed down")
    language: str | None = "en"
    if "language" in one:
        language = parse_language(one["language"])
    if language not in (None, "en") and not multilingual:
        raise ListenParamError(f"language {language!r}: model {model_name} is English-only")
    endpointing, endpointing_ms = True, None
    if "endpointing" in one:
        raw = one["endpointing"].strip().lower()
        if raw == "false":
            endpointing = False
        elif raw != "true":
            endpointing_ms = parse_int("endpointing", raw, 0, MAX_ENDPOINTING_MS)
    utterance_end_ms = None
    if "utterance_end_ms" in one:
        utterance_end_ms = parse_int(
            "utterance_end_ms", one["utterance_end_ms"], 1, MAX_UTTERANCE_END_MS
        )
    flags = {
        name: parse_flag(name, one[name]) if name in one else False
        for name in ("interim_results", "vad_events", "punctuate", "smart_format")
    }
    return ListenParams(
        encoding=encoding,
        sample_rate=rate,
        channels=channels,
        model=one.get("model"),
        language=language,
        endpointing_ms=endpointing_ms,
        endpointing=endpointing,
        utterance_end_ms=utterance_end_ms,
        **flags,
    )


def listen_credentials(
    authorization: str | None, subprotocols: Sequence[str]
) -> tuple[str | None, str | None]:
    """(the API key presented, the subprotocol to accept) for a Deepgram handshake.

    ``Authorization: Token KEY`` (the SDK's API key) or ``Bearer KEY`` (its access token),
    else the subprotocol pair ``token``, KEY that browsers use (``token`` is then accepted).
    """
    if authorization:
        scheme, _, credentials = authorization.strip().partition(" ")
        if scheme.lower() == "token" and credentials.strip():
            return credentials.strip(), None
        key = bearer_token(authorization)
        if key is not None:
            return key, None
    offered = [p.strip() for p in subprotocols]
    if len(offered) >= 2 and offered[0].lower() == SUBPROTOCOL and offered[1]:
        return offered[1], SUBPROTOCOL
    return None, None


# -- actions the codec asks of its runner --------------------------------------------------


@dataclass(frozen=True)
class Send:
    """Send one JSON text frame. ``kind`` is partial, final or other (for the outbox's
    stale-partial policy); ``utterance`` and ``end`` (16 kHz samples) are set for results."""

    message: Mapping[str, Any]
    kind: str = "other"
    utterance: int = -1
    end: int = 0

    @property
    def text(self) -> str:
        return json.dumps(self.message, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class FinalizeStream:
    """End the open utterance now (``Finalize``)."""


@dataclass(frozen=True)
class StopStream:
    """No more audio: finish what is held (``CloseStream``); ``reason`` goes to Done."""

    reason: str | None = None


@dataclass(frozen=True)
class Close:
    """Close the connection after everything sent before this."""

    code: int
    reason: str = ""


Action = Send | FinalizeStream | StopStream | Close


# -- the codec -------------------------------------------------------------------------------


class DeepgramLiveCodec:
    """One connection's protocol state: client frames and engine events in, actions out."""

    def __init__(
        self, params: ListenParams, *, request_id: str, created: str, model: ModelIdentity
    ) -> None:
        self.params = params
        self.request_id = request_id
        self._created = created
        self._model = model
        self._sha256 = hashlib.sha256()
        self._bytes = 0
        self._stopped = False
        self._open: set[int] = set()  # starts of utterances begun and not yet resolved
        self._flushes: deque[set[int]] = deque()  # per Finalize: the utterances it waits for
        self._last_word_end: float | None = None  # armed UtteranceEnd: seconds
        self._last_speech_start = -1.0  # seconds, of the latest SpeechStarted

    # -- client side -----------------------------------------------------------------------

    @property
    def audio_seconds(self) -> float:
        """Audio received so far, whole sample frames, at the input rate."""
        return self._bytes // self.params.frame_bytes / self.params.sample_rate

    def on_audio(self, data: bytes) -> list[Action]:
        """A binary frame (its decoding is the runner's). Empty means end of stream, as in
        Deepgram's older API."""
        if self._stopped:
            return []
        if not data:
            return self._stop()
        self._sha256.update(data)
        self._bytes += len(data)
        return self._utterance_end_due()

    def on_text(self, text: str) -> list[Action]:
        if self._stopped:
            return []
        try:
            obj = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            return [self._schema_error("message is not valid JSON", text)]
        kind = obj.get("type") if isinstance(obj, dict) else None
        if kind == "KeepAlive":
            return []
        if kind == "Finalize":
            if not self._bytes:
                # No audio, so no stream to finalize: answered here, at once.
                return [FinalizeStream(), self._empty_final()]
            return [FinalizeStream()]
        if kind == "CloseStream":
            return self._stop()
        if kind == "Configure":
            keyterms = isinstance(obj, dict) and obj.get("keyterms") is not None
            return [
                Send(
                    {
                        "type": "ConfigureFailure",
                        "request_id": self.request_id,
                        "code": (
                            "CONFIGURE_KEYTERMS_NOT_SUPPORTED"
                            if keyterms
                            else "CONFIGURE_NOT_SUPPORTED"
                        ),
                        "description": "kettle's models take no keyterms or feature changes",
                    }
                )
            ]
        return [
            self._schema_error(
                "expected a JSON object whose type is KeepAlive, Finalize, CloseStream or "
                "Configure",
                text,
            )
        ]

    def on_idle(self) -> list[Action]:
        """The runner's idle timeout: end as CloseStream does (nothing is lost)."""
        return [] if self._stopped else self._stop("idle")

    def _stop(self, reason: str | None = None) -> list[Action]:
        self._stopped = True
        return [StopStream(reason)]

    def _schema_error(self, description: str, text: str) -> Send:
        return Send(
            {
                "type": "Error",
                "variant": "SchemaError",
                "description": description,
                "message": text[:_ECHO_LIMIT],
            }
        )

    # -- engine side -------------------------------------------------------------------------

    def on_event(self, event: Event) -> list[Action]:
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
            return [self._empty_final()] * self._resolve(event.start)
        if isinstance(event, Error):
            return self._on_error(event)
        if isinstance(event, Done):
            return self._on_done(event)
        return []

    def _on_final(self, event: Final) -> list[Action]:
        from_finalize = self._resolve(event.start) > 0
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
            if self._last_speech_start > samples_to_seconds(event.start):
                # Speech began again before this final came: was the gap long enough?
                if self._last_speech_start - last >= self.params.utterance_end_ms / 1000:
                    out.append(self._utterance_end(last))
                self._last_word_end = None
            else:
                self._last_word_end = last
                out += self._utterance_end_due()
        return out

    def _on_speech_started(self, event: SpeechStarted) -> list[Action]:
        self._open.add(event.start)
        start = samples_to_seconds(event.start)
        self._last_speech_start = start
        out: list[Action] = []
        if self._last_word_end is not None:
            assert self.params.utterance_end_ms is not None
            if start - self._last_word_end >= self.params.utterance_end_ms / 1000:
                out.append(self._utterance_end(self._last_word_end))
            self._last_word_end = None  # else the speech goes on: no end yet
        if self.params.vad_events:
            out.append(Send({"type": "SpeechStarted", "channel": [0, 1], "timestamp": start}))
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
        out: list[Action] = [
            Send(
                {
                    "type": "Error",
                    "variant": "InternalError" if event.code == "internal" else event.code,
                    "description": event.message,
                }
            )
        ]
        if event.fatal:
            out.append(Close(CLOSE_INTERNAL, "internal error"))
        return out

    def _on_done(self, event: Done) -> list[Action]:
        out: list[Action] = []
        if self._last_word_end is not None:
            out += self._utterance_end_due()
        out.append(Send(self.metadata()))
        if event.reason == "idle":
            out.append(Close(CLOSE_INTERNAL, IDLE_REASON))
        elif event.reason == "shutdown":
            out.append(Close(CLOSE_GOING_AWAY, "server shutting down"))
        else:
            out.append(Close(CLOSE_NORMAL))
        return out

    def _utterance_end_due(self) -> list[Action]:
        if self._last_word_end is None or self.params.utterance_end_ms is None:
            return []
        if self.audio_seconds - self._last_word_end < self.params.utterance_end_ms / 1000:
            return []
        last, self._last_word_end = self._last_word_end, None
        return [self._utterance_end(last)]

    def _utterance_end(self, last_word_end: float) -> Send:
        return Send({"type": "UtteranceEnd", "channel": [0, 1], "last_word_end": last_word_end})

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
            else _spread(text, begin, finish)
        )
        shown = [w for w in shown if w["word"]]
        confidence = (
            round(sum(w["confidence"] for w in shown) / len(shown), 4) if final and shown else 0.0
        )
        transcript = text.strip() if self.params.formatted else plain_transcript(text)
        return Send(
            {
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
                    "model_info": self._model.info(),
                    "model_uuid": self._model.uuid,
                },
            },
            kind="final" if final else "partial",
            utterance=utterance,
            end=end,
        )

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
            "models": [self._model.uuid],
            "model_info": {self._model.uuid: self._model.info()},
        }


def word_fields(raw: str, start: float, end: float, confidence: float) -> dict[str, Any]:
    display = raw.strip()
    return {
        "word": normalize_word(display),
        "start": round(start, 3),
        "end": round(end, 3),
        "confidence": round(confidence, 4),
        "punctuated_word": display,
    }


def plain_transcript(text: str) -> str:
    """Deepgram's unpunctuated transcript: lowercase words, punctuation removed."""
    plain = (normalize_word(w) for w in split_words(text))
    return " ".join(w for w in plain if w)


def _spread(text: str, start: float, end: float) -> list[dict[str, Any]]:
    """A hypothesis's words timed evenly over its window, with no claimed confidence."""
    words = split_words(text)
    if not words:
        return []
    step = max(end - start, 0.0) / len(words)
    return [
        word_fields(w, start + i * step, start + (i + 1) * step, 0.0) for i, w in enumerate(words)
    ]


__all__ = [
    "LISTEN_PATH",
    "Action",
    "Close",
    "DeepgramLiveCodec",
    "FinalizeStream",
    "ListenParamError",
    "ListenParams",
    "ModelIdentity",
    "Send",
    "StopStream",
    "listen_credentials",
    "parse_flag",
    "parse_int",
    "parse_language",
    "parse_listen_query",
    "plain_transcript",
    "word_fields",
]
