"""Deepgram live's (``/v1/listen``) server messages, encoded: ``Results`` (with the channel index
and the outbox's key), ``SpeechStarted``, ``UtteranceEnd``, ``Error`` in its variants, the
Configure replies and the ``Metadata`` that ends a stream with its close. The codec (live.py)
decides what is said; this says it. No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kettle.streaming.core.backlog import FINAL, OTHER, PARTIAL
from kettle.streaming.core.events import Error
from kettle.streaming.protocols.base import (
    CLOSE_TOO_BIG,
    ModelInfo,
    OutMessage,
    Send,
    compact_json,
)
from kettle.streaming.protocols.deepgram.results import results_body
from kettle.streaming.protocols.deepgram.wire import ModelIdentity, kettle_version
from kettle.transcribe.types import Word

_ECHO_LIMIT = 1000  # characters of a refused client message echoed back in its Error
# Deepgram's close reason (with 1011) for a socket that sent nothing for its audio timeout,
# word for word: clients match on it.
NET_0001 = (
    "Deepgram did not receive audio data or a text message within the timeout window. "
    "See https://dpgr.am/net0001"
)
# The stop reason, and close reason (with 1009), of an audio message over the frame limit.
FRAME_TOO_BIG = "audio message over the frame limit"
# Kettle's error codes -> Deepgram's Error variants (others keep their code).
_ERROR_VARIANTS = {"internal": "InternalError", "bad_audio": "DataError"}


def send(obj: Mapping[str, Any], error_code: str | None = None) -> Send:
    return Send(OutMessage(OTHER, compact_json(obj)), error_code=error_code)


class LiveWriter:
    """One connection's message encoder. ``channels``: the engine streams (one per channel
    with multichannel); ``features`` (punctuate, smart_format) a Configure may change."""

    def __init__(
        self,
        request_id: str,
        model: ModelInfo,
        *,
        channels: int,
        features: dict[str, bool],
        created: str,
    ) -> None:
        self.request_id = request_id
        self.features = features
        self._channels = channels
        self._created = created
        version = kettle_version()
        self._model = ModelIdentity(model.name, version)
        # A second model refines the finals when the server has one: say which served.
        finals = model.final_model
        self._final_model = ModelIdentity(finals, version) if finals else self._model

    def _index(self, channel: int) -> list[int]:
        """Deepgram's ``[channel, channels]``."""
        return [channel, self._channels]

    def results(
        self,
        channel: int,
        start: int,
        end: int,
        text: str,
        words: Sequence[Word] | None,
        utterance: int,
        *,
        speech_final: bool = False,
        from_finalize: bool = False,
        speaker: int | None = None,
        speaker_confidence: float | None = None,
    ) -> Send:
        """A Results message; ``words`` None means interim (untimed hypothesis words)."""
        final = words is not None
        model = self._final_model if final else self._model
        obj = results_body(
            start,
            end,
            text,
            words,
            channel_index=self._index(channel),
            formatted=any(self.features.values()),  # punctuate or smart_format
            request_id=self.request_id,
            model=model,
            speech_final=speech_final,
            from_finalize=from_finalize,
            speaker=speaker,
            speaker_confidence=speaker_confidence,
        )
        # The outbox keeps partials per utterance: channels' utterance numbers must not meet.
        key = (
            utterance
            if self._channels == 1 or utterance < 0
            else utterance * self._channels + channel
        )
        return Send(OutMessage(FINAL if final else PARTIAL, compact_json(obj), key, end))

    def speech_started(self, channel: int, timestamp: float) -> Send:
        return send(
            {"type": "SpeechStarted", "channel": self._index(channel), "timestamp": timestamp}
        )

    def utterance_end(self, channel: int, last_word_end: float) -> Send:
        obj = {
            "type": "UtteranceEnd",
            "channel": self._index(channel),
            "last_word_end": last_word_end,
        }
        return send(obj)

    def error(self, variant: str, description: str, code: str | None = None) -> Send:
        return send({"type": "Error", "variant": variant, "description": description}, code)

    def schema_error(self, description: str, text: str) -> Send:
        """A client message refused, echoed back (its first ``_ECHO_LIMIT`` characters)."""
        obj = {
            "type": "Error",
            "variant": "SchemaError",
            "description": description,
            "message": text[:_ECHO_LIMIT],
        }
        return send(obj, "bad_message")

    def engine_error(self, event: Error) -> Send:
        variant = _ERROR_VARIANTS.get(event.code, event.code)
        obj = {"type": "Error", "variant": variant, "description": event.message}
        message = OutMessage(OTHER, compact_json(obj), closing=event.fatal, fatal=event.fatal)
        return Send(message, error_code=event.code)

    def configure_failure(self, code: str, description: str) -> Send:
        failure = {
            "type": "ConfigureFailure",
            "request_id": self.request_id,
            "code": code,
            "description": description,
        }
        return send(failure, "bad_message")

    def configure_success(self, keyterms: tuple[str, ...] | None) -> Send:
        success: dict[str, Any] = {"type": "ConfigureSuccess", "request_id": self.request_id}
        if keyterms is not None:
            success["keyterms"] = list(keyterms)
        return send(success)

    def metadata(self, sha256: str, duration: float, channels: int) -> dict[str, Any]:
        """The Metadata message that ends a stream."""
        return {
            "type": "Metadata",
            "transaction_key": "deprecated",
            "request_id": self.request_id,
            "sha256": sha256,
            "created": self._created,
            "duration": round(duration, 3),
            "channels": channels,
            "models": list(dict.fromkeys([self._model.uuid, self._final_model.uuid])),
            "model_info": {m.uuid: m.info() for m in (self._model, self._final_model)},
        }

    @staticmethod
    def closing(metadata: Mapping[str, Any], reason: str | None) -> Send:
        """The Metadata, and the close after it: 1000 (or 1001 at shutdown); a connection
        past the audio timeout gets Deepgram's 1011 NET-0001, one with an audio message over
        the limit 1009."""
        text = compact_json(metadata)
        if reason == "idle":
            message = OutMessage(OTHER, text, closing=True, fatal=True, close_reason=NET_0001)
        elif reason == FRAME_TOO_BIG:
            message = OutMessage(
                OTHER, text, closing=True, close_code=CLOSE_TOO_BIG, close_reason=FRAME_TOO_BIG
            )
        else:
            message = OutMessage(OTHER, text, closing=True)
        return Send(message)


__all__ = ["FRAME_TOO_BIG", "NET_0001", "LiveWriter"]
