"""OpenAI Realtime server events' bodies (without ``event_id`` and ``type``, which the codec
adds): the session object, errors, and an item's transcription delta, completed and failed
events."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kettle.streaming.protocols.openai.logprobs import languages, word_logprobs
from kettle.streaming.protocols.openai.realtime_settings import LOGPROBS, RealtimeSettings
from kettle.transcribe.types import Word

# Why a session ended (Done.reason) -> the error code and message it is reported with.
DONE_REASONS = {
    "idle": ("session_expired", "the session was idle too long and has ended"),
    "max_duration": ("session_expired", "the session hit its maximum duration"),
    "shutdown": ("server_shutdown", "the server is shutting down"),
}


def session(settings: RealtimeSettings, session_id: str, model_name: str) -> dict[str, Any]:
    s = settings
    fmt: dict[str, Any] = {"type": s.format}
    if s.format == "audio/pcm":
        fmt["rate"] = s.input_rate
    transcription: dict[str, Any] = {
        "model": model_name,
        "language": s.language,
        "prompt": s.prompt or "",
        "delay": s.delay,
    }
    if s.languages:
        transcription["languages"] = list(s.languages)
    if s.keyterms:
        transcription["keywords"] = list(s.keyterms)
    return {
        "type": "transcription",
        "id": session_id,
        "object": "realtime.transcription_session",
        "audio": {
            "input": {
                "format": fmt,
                "noise_reduction": None,
                "transcription": transcription,
                "turn_detection": s.turn_detection.body() if s.turn_detection else None,
            }
        },
        "include": [LOGPROBS] if s.logprobs else None,
    }


def error(
    message: str,
    *,
    code: str,
    kind: str = "invalid_request_error",
    param: str | None = None,
    client_event: str | None = None,
) -> dict[str, Any]:
    return {
        "error": {
            "type": kind,
            "code": code,
            "message": message,
            "param": param,
            "event_id": client_event,
        }
    }


def done_error(reason: str | None) -> dict[str, Any]:
    code, message = DONE_REASONS.get(reason or "", ("session_closed", "the session ended"))
    return error(message, code=code, kind="server_error")


def delta(item_id: str, text: str, words: Sequence[Word] | None) -> dict[str, Any]:
    """``words``: the logprobs' words (None: logprobs were not asked for)."""
    body: dict[str, Any] = {"item_id": item_id, "content_index": 0, "delta": text}
    if words is not None:
        body["logprobs"] = word_logprobs(words)
    return body


def completed(
    item_id: str,
    transcript: str,
    seconds: float,
    codes: Sequence[str],
    words: Sequence[Word] | None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "item_id": item_id,
        "content_index": 0,
        "transcript": transcript,
        "usage": {"type": "duration", "seconds": round(seconds, 3)},
        "languages": languages(codes),
    }
    if words is not None:
        body["logprobs"] = word_logprobs(words)
    return body


def failed(item_id: str, code: str, message: str) -> dict[str, Any]:
    return {
        "item_id": item_id,
        "content_index": 0,
        "error": {"type": "server_error", "code": code, "message": message, "param": None},
    }
