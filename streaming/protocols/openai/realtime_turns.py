"""OpenAI Realtime ``turn_detection``: server_vad and semantic_vad settings, and the default a
transcription model implies.

- Each type's fields are its table's (openai_fields: SERVER_VAD, SEMANTIC_VAD), ``type``
  required as in OpenAI's reference; a field of the other type is not read. server_vad's
  response settings (``create_response``, ``interrupt_response``, ``idle_timeout_ms``) and
  semantic_vad's are checked and echoed (a transcription session makes no responses).
- ``server_vad``'s threshold (0..1) picks webrtcvad's aggressiveness (0.5 -> 2, kettle's
  default); ``silence_duration_ms`` is the endpoint's pause, ``prefix_padding_ms`` the audio
  kept before speech.
- ``semantic_vad`` has no model behind it in kettle: its ``eagerness`` sets the endpoint's
  pause instead (``low`` 1000 ms, ``medium`` and ``auto`` 500 ms, server_vad's default,
  ``high`` 250 ms), so a lower eagerness waits longer before it ends the turn, as OpenAI's
  does (whose low/medium/high wait at most 8/4/2 s for the turn to look finished).
- A session whose transcription model is ``gpt-realtime-whisper`` or ``gpt-live-transcribe``
  (or a dated variant) has no turn detection unless the client sets one, as at OpenAI, where
  these models have no server-side endpointing and the client commits (LiveKit's STT on its
  own VAD, Pipecat's on its pipeline's). Unlike OpenAI, kettle accepts a turn_detection for
  them. Every other model keeps server_vad's default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kettle.streaming.protocols.openai.errors import FieldRefused, check_object
from kettle.streaming.protocols.openai.fields import TURN_DETECTION_TYPE, TURN_DETECTIONS

EAGERNESS_SILENCE_MS = {"low": 1000, "medium": 500, "auto": 500, "high": 250}
NO_TURN_DETECTION_MODELS = ("gpt-realtime-whisper", "gpt-live-transcribe")
PARAM = "session.audio.input.turn_detection"


TurnRefused = FieldRefused  # (message, param, code)


@dataclass(frozen=True)
class TurnDetection:
    type: str = "server_vad"
    threshold: float = 0.5
    prefix_padding_ms: int = 300
    silence_duration_ms: int = 500
    eagerness: str | None = None  # semantic_vad only
    # Accepted and echoed; they concern responses, which transcription sessions have none of.
    extra: tuple[tuple[str, Any], ...] = ()

    def body(self) -> dict[str, Any]:
        if self.type == "semantic_vad":
            return {"type": self.type, "eagerness": self.eagerness or "auto", **dict(self.extra)}
        return {
            "type": self.type,
            "threshold": self.threshold,
            "prefix_padding_ms": self.prefix_padding_ms,
            "silence_duration_ms": self.silence_duration_ms,
            **dict(self.extra),
        }

    @property
    def aggressiveness(self) -> int:
        return min(3, int(self.threshold * 4))


def model_default(model: str) -> TurnDetection | None:
    """The turn detection a session gets with ``model`` when the client sets none."""
    return None if model.startswith(NO_TURN_DETECTION_MODELS) else TurnDetection()


def parse(value: object, current: TurnDetection | None) -> TurnDetection | None:
    """A ``turn_detection`` object (fields it leaves out keep ``current``'s values), read
    through its type's table (openai_fields: SERVER_VAD or SEMANTIC_VAD)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise TurnRefused(f"Invalid type for '{PARAM}': it must be an object or null.", PARAM,
                          "invalid_type")  # fmt: skip
    kind = check_object(TURN_DETECTION_TYPE, value, PARAM)["type"]
    got = check_object(TURN_DETECTIONS[kind], value, PARAM)
    base = current or TurnDetection()
    eagerness = got.get("eagerness", "auto") if kind == "semantic_vad" else None
    silence = base.silence_duration_ms
    if eagerness is not None:
        silence = EAGERNESS_SILENCE_MS[eagerness]
    used = {"type", "threshold", "prefix_padding_ms", "silence_duration_ms", "eagerness"}
    # A response's settings (create_response, ...): checked, and echoed as they came.
    extra = tuple((k, v) for k, v in got.items() if k not in used)
    return TurnDetection(
        str(kind),
        float(got.get("threshold", base.threshold)),
        int(got.get("prefix_padding_ms", base.prefix_padding_ms)),
        int(got.get("silence_duration_ms", silence)),
        eagerness,
        extra,
    )
