"""OpenAI Realtime transcription sessions (GA event shapes) as a codec, on `/v1/realtime`.

The client appends base64 audio; kettle's VAD (``turn_detection`` server_vad) or the client's
commits (``turn_detection`` null) cut it into items; each item gets
``conversation.item.input_audio_transcription.delta`` events that only ever append (stable
text: words two successive hypotheses agreed on, then the final's rest) and one
``.completed`` with the whole transcript.

How kettle's stream maps onto items (the session runs with ``vad_events``):

- server_vad: one utterance of kettle's VAD is one item: ``speech_started`` when it opens,
  ``speech_stopped`` and ``committed`` when it closes, deltas after the commit, ``completed``
  at its final (an empty transcript when it held no words).
- manual (null): an item is all audio between two commits. ``commit`` ends the open utterance
  (``Finalize``); every utterance that began before the session's ``Finalized`` marker belongs
  to the item, whose transcript is their finals joined.
- ``commit`` with server_vad ends the open utterance, whose item is then committed as usual;
  with none open, the audio since the VAD's last utterance (if 100 ms or more) becomes an
  item of its own with an empty transcript.
- ``clear`` drops the uncommitted audio: the open utterance is ended and its text discarded.
- ``session.update`` works at any time, as at OpenAI; after audio it applies to what comes
  next (Session.reconfigure): ``language``, ``languages``, ``prompt`` and ``include`` to the
  utterances kettle's VAD opens after it (with server_vad: the next item; an item already
  open or committed keeps what it began with); ``keywords``, ``delay`` and turn detection
  (on, off, and server_vad's threshold, prefix_padding_ms and silence_duration_ms) from
  now on; ``format`` to the audio appended after it (the stream goes on at 16 kHz).
  ``transcription.model`` may name any model name kettle takes, all of which are the model
  it serves. Only what cannot change is refused, the session going on unchanged: another
  ``session.type``, a ``model`` (a realtime session's) other than the one served, a
  ``voice`` (a transcription session has no audio output).
- Client events are read through their tables (openai_fields: CLIENT_EVENT_TABLES, and the
  session object's): a field of the wrong type, out of range, not in its enum or missing
  though required gets an ``error`` event with OpenAI's code (``invalid_type``,
  ``decimal_above_max_value``, ``invalid_value``, ``missing_required_parameter``, ...), the
  field's ``param`` and the client's ``event_id`` (when that is itself valid: a string of at
  most 512 characters); the event is not carried out (a refused append passes no audio on),
  and the session goes on.
- Deltas of an item come only after its ``committed`` event, as OpenAI's do.
- ``transcription.delay`` "high" or "xhigh" turns partials off: deltas then come from finals
  only (later, and independent of how fast partials were decoded); lower delays (the
  default) send stable words as they settle.
- Turn detection (server_vad's fields, semantic_vad's eagerness, the no-turn-detection
  default of gpt-realtime-whisper and gpt-live-transcribe): openai_realtime_turns.py.
  ``noise_reduction`` is accepted and reported null (kettle does none).
- ``transcription.model`` takes the names the REST API takes (openai_realtime_settings.py);
  ``session.updated`` reports the model kettle serves.
- ``include: ["item.input_audio_transcription.logprobs"]``: ``logprobs`` on deltas and
  completed events, one entry per word (openai_logprobs.py). A delta carries the final words
  settled since the item's previous delta (a word first sent as a partial's stable text gets
  its entry once its final is in), so an item's deltas' logprobs add up to its completed
  event's.
- ``completed`` carries ``languages``: the languages of the item's finals (``[]`` when it
  holds no words).
- Usage is ``{"type": "duration", "seconds": ...}``: the item's audio.
- Corrections, only with kettle's URL parameter ``kettle_revisions=true`` (the route's; the
  session object takes no such field): when a later refinement reads one of an item's
  finals otherwise, another ``completed`` event for the same ``item_id`` and
  ``content_index`` (a fresh ``event_id``) carries the item's whole corrected transcript,
  after its first ``completed`` event; none for a cleared or failed item. Without the
  parameter the stream asks for no revisions.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from kettle.kernels.pcm import ENCODINGS
from kettle.streaming.protocols.base import (
    Action,
    FeedAudio,
    Finalize,
    RateGate,
    Reconfigure,
    StreamSetup,
)
from kettle.streaming.protocols.lifecycle import Move
from kettle.streaming.protocols.openai import realtime_events as bodies
from kettle.streaming.protocols.openai.errors import FieldRefused, check_object
from kettle.streaming.protocols.openai.fields import CLIENT_EVENT_TABLES, MAX_EVENT_ID
from kettle.streaming.protocols.openai.realtime_items import Finalizing, Item
from kettle.streaming.protocols.openai.realtime_ledger import ItemLedger
from kettle.streaming.protocols.openai.realtime_settings import (
    MIN_COMMIT_MS,
    RealtimeSettings,
    UpdateRefused,
    apply_update,
    audio_setup,
)
from kettle.transcribe.errors import ConfigError


class RealtimeCodec(ItemLedger):
    """One Realtime transcription session. See the module docstring."""

    # Declared again (ItemLedger sets it): mypy cannot infer it here otherwise.
    settings: RealtimeSettings

    def session_body(self) -> dict[str, Any]:
        return bodies.session(self.settings, f"sess_{self._writer.tag}", self.context.model.name)

    # -- Codec ----------------------------------------------------------------------------

    def start(self) -> list[Action]:
        return [self._writer.send("session.created", {"session": self.session_body()})]

    def stream_setup(self) -> StreamSetup:
        return StreamSetup(audio_setup(self.settings.format), self.settings.session_config())

    def on_binary(self, data: bytes) -> list[Action]:
        return [
            self._writer.error(
                "binary messages are not part of the Realtime API; send "
                "input_audio_buffer.append events with base64 audio",
                code="invalid_message",
            )
        ]

    def on_leftover(self, leftover_bytes: int, frame_bytes: int) -> list[Action]:
        return []  # half a 16-bit sample at the very end: nothing a client can act on

    def fatal_error(self, message: str) -> str:
        return self._writer.fatal_text(message)

    def on_text(self, text: str, rate: RateGate) -> list[Action]:
        try:
            obj = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            return [self._writer.error("the message is not valid JSON", code="invalid_json")]
        return self.on_event_object(obj, rate)

    def on_event_object(self, obj: object, rate: RateGate) -> list[Action]:
        """One client event, parsed: each event type's fields are read through its table
        (openai_fields.CLIENT_EVENT_TABLES); a refused field is an ``error`` naming it, with
        the client's ``event_id``, and the event is not carried out."""
        if not isinstance(obj, Mapping) or not isinstance(obj.get("type"), str):
            return [
                self._writer.error(
                    "an event must be a JSON object with a string 'type'",
                    code="invalid_event",
                    param="type",
                )
            ]
        kind = obj["type"]
        table = CLIENT_EVENT_TABLES.get(kind)
        if kind == "session.update" or table is None:
            verdict = rate.check()  # only updates and unknown events may be dropped
            if verdict == "drop":
                return []
            if verdict == "notify":
                per_second = self.context.limits.max_messages_per_second
                return [
                    self._writer.error(
                        f"more than {per_second:g} events per second; events over the rate "
                        "are dropped",
                        code="rate_limit_exceeded",
                        client_event=_event_id(obj),
                    )
                ]
        if table is None:
            return [
                self._writer.error(
                    f"event type {kind!r} is not supported in a transcription session",
                    code="invalid_event",
                    param="type",
                    client_event=_event_id(obj),
                )
            ]
        try:
            got = check_object(table, obj, "")
        except FieldRefused as exc:
            return [
                self._writer.error(
                    exc.message, code=exc.code, param=exc.param, client_event=_event_id(obj)
                )
            ]
        client_event = got.get("event_id")
        if kind == "input_audio_buffer.append":
            return self._append(got, client_event)
        if kind == "input_audio_buffer.commit":
            return self._commit(client_event)
        if kind == "input_audio_buffer.clear":
            return self._clear()
        return self._update(got["session"], client_event)

    def _update(self, session: object, client_event: str | None) -> list[Action]:
        try:
            settings = apply_update(self.settings, session, self.context.model)
        except UpdateRefused as exc:
            return [
                self._writer.error(
                    exc.message, code=exc.code, param=exc.param, client_event=client_event
                )
            ]
        try:
            config = settings.session_config()
        except ConfigError as exc:
            return [self._writer.error(str(exc), param="session", client_event=client_event)]
        actions: list[Action] = []
        if settings.format != self.settings.format:
            self._input.switch_format(settings)
            if self.audio_started:  # (else the stream opens with it)
                actions.append(Reconfigure(audio=audio_setup(settings.format)))
        if self.audio_started and config != self.settings.session_config():
            actions.append(Reconfigure(session=config))  # for what the stream decodes next
            self._retunes.retuned(settings)
        self.settings = settings
        return [*actions, self._writer.send("session.updated", {"session": self.session_body()})]

    def _append(self, obj: Mapping[str, Any], client_event: str | None) -> list[Action]:
        audio = obj.get("audio")
        if not isinstance(audio, str):
            return [
                self._writer.error(
                    "input_audio_buffer.append needs 'audio', base64 text",
                    param="audio",
                    client_event=client_event,
                )
            ]
        try:
            data = base64.b64decode(audio, validate=True)
        except (binascii.Error, ValueError):
            return [
                self._writer.error(
                    "'audio' is not valid base64", param="audio", client_event=client_event
                )
            ]
        limit = self.context.limits.max_frame_bytes
        if len(data) > limit:
            return [
                self._writer.error(
                    f"{len(data)} bytes of audio in one event is over the limit "
                    f"of {limit}; it was dropped",
                    param="audio",
                    client_event=client_event,
                )
            ]
        # Each append holds whole samples of the session's format: a stray byte would shift
        # every sample after it (and lose all later speech), so it is dropped, and said so.
        width = ENCODINGS[audio_setup(self.settings.format).encoding]
        stray = len(data) % width
        actions: list[Action] = []
        if stray:
            data = data[: len(data) - stray]
            actions.append(
                self._writer.error(
                    f"'audio' ends with {stray} byte(s) that are not a whole {width}-byte "
                    "sample; they were dropped",
                    param="audio",
                    client_event=client_event,
                )
            )
        if not data:
            return actions
        if self._life.awaiting_audio:
            self._retunes.retuned(self.settings)  # the stream opens with these
        self._life.move(Move.AUDIO)
        self._input.append(len(data))
        return [*actions, FeedAudio(data)]

    def _commit(self, client_event: str | None) -> list[Action]:
        buffer = self._input
        buffered = buffer.buffered_ms
        if buffered < MIN_COMMIT_MS:
            return [self._empty_commit(buffered, client_event)]
        start_ms, buffer.boundary_ms = buffer.boundary_ms, buffer.appended_ms
        if self.settings.turn_detection is not None:
            # The open utterance (if any) stops now and is committed when that arrives; what
            # else the buffer held is decided at the marker (see _finalized).
            self._closed_by_commit = False
            item = Item("", logprobs=self.settings.logprobs)
            self._pending.append(Finalizing("vad_commit", item, start_ms, client_event))
            return [Finalize()]
        item = Item(self._writer.item_id(), assigned=False, seconds=buffered / 1000,
                    logprobs=self.settings.logprobs)  # fmt: skip
        self._pending.append(Finalizing("commit", item))
        return [self._committed(item), Finalize()]

    def _clear(self) -> list[Action]:
        self._input.boundary_ms = self._input.appended_ms
        actions: list[Action] = [self._writer.send("input_audio_buffer.cleared", {})]
        for _, item in self._by_start.values():
            if item is not None and not item.committed:
                item.cleared = True  # its audio is dropped: nothing more is said of it
        if self.audio_started:
            self._pending.append(Finalizing("clear"))
            actions.append(Finalize())
        return actions


def _event_id(obj: Mapping[str, Any]) -> str | None:
    """The client's ``event_id`` to answer an error with: its own, when it is one (a string
    of at most 512 characters), else none."""
    got = obj.get("event_id")
    return got if isinstance(got, str) and len(got) <= MAX_EVENT_ID else None


__all__ = ["RealtimeCodec"]
