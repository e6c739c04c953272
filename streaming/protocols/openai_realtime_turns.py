"""OpenAI Realtime ``turn_detection``: server_vad and semantic_vad settings, and the default a
transcription model implies.

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

EAGERNESS_SILENCE_MS = {"low": 1000, "medium": 500, "auto": 500, "high": 250}
NO_TURN_DETECTION_MODELS = ("gpt-realtime-whisper", "gpt-live-transcribe")
PARAM = "session.audio.input.turn_detection"


class TurnRefused(Exception):
    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


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
    """A ``turn_detection`` object (fields it leaves out keep ``current``'s values)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise TurnRefused(f"{PARAM} must be an object or null", PARAM)
    kind = value.get("type", "server_vad")
    if kind not in ("server_vad", "semantic_vad"):
        raise TurnRefused(f"{PARAM}.type must be server_vad or semantic_vad, not {kind!r}",
                          f"{PARAM}.type")  # fmt: skip
    base = current or TurnDetection()
    threshold = value.get("threshold", base.threshold)
    number = isinstance(threshold, int | float) and not isinstance(threshold, bool)
    if not number or not 0 <= threshold <= 1:
        raise TurnRefused(f"{PARAM}.threshold must be a number from 0 to 1", f"{PARAM}.threshold")
    eagerness = value.get("eagerness", "auto") if kind == "semantic_vad" else None
    if eagerness is not None and eagerness not in EAGERNESS_SILENCE_MS:
        raise TurnRefused(f"{PARAM}.eagerness must be one of {', '.join(EAGERNESS_SILENCE_MS)}",
                          f"{PARAM}.eagerness")  # fmt: skip
    silence_default = base.silence_duration_ms
    if eagerness is not None and "silence_duration_ms" not in value:
        silence_default = EAGERNESS_SILENCE_MS[eagerness]
    ints = {}
    for name, low, high, default in (
        ("prefix_padding_ms", 0, 2000, base.prefix_padding_ms),
        ("silence_duration_ms", 40, 10000, silence_default),
    ):
        got = value.get(name, default)
        if isinstance(got, bool) or not isinstance(got, int) or not low <= got <= high:
            raise TurnRefused(f"{PARAM}.{name} must be an integer from {low} to {high}",
                              f"{PARAM}.{name}")  # fmt: skip
        ints[name] = got
    known = {"type", "threshold", "prefix_padding_ms", "silence_duration_ms", "eagerness"}
    extra = tuple((k, v) for k, v in value.items() if k not in known)
    return TurnDetection(
        str(kind),
        float(threshold),
        ints["prefix_padding_ms"],
        ints["silence_duration_ms"],
        eagerness,
        extra,
    )
