"""Helpers shared by the Deepgram tests: the live codec over raw audio and what it sent
(``codec``, ``messages``, ``final``), the transcript a prerecorded answer renders, and the
official SDK pointed at kettle (``environment``, ``finals_text``)."""

from __future__ import annotations

import json
from typing import Any

from deepgram.environment import DeepgramClientEnvironment
from kettle.streaming.core.events import Final
from kettle.streaming.protocols.base import (
    Action,
    AudioReceived,
    CodecContext,
    Limits,
    ModelInfo,
    Send,
)
from kettle.streaming.protocols.deepgram.live import DeepgramLiveCodec
from kettle.streaming.protocols.deepgram.wire import ModelIdentity, parse_listen_query
from kettle.transcribe.transcript import Segment, Transcript
from kettle.transcribe.types import SAMPLE_RATE, Word

from tests.streaming.protocols.api_models import DEEPGRAM_V1_MODELS

SR = SAMPLE_RATE

# -- the live codec ------------------------------------------------------------------------

RAW = "encoding=linear16&sample_rate=16000"  # raw audio: both are required
SESSION = "0123456789abcdef0123456789abcdef"
RECEIVED = AudioReceived()
MODELS = DEEPGRAM_V1_MODELS  # the SDK's message models, validated strictly (pydantic v2)
LIMIT = 1 << 20  # max_frame_bytes


def codec(query: str = RAW, *, final_model: str | None = None) -> DeepgramLiveCodec:
    context = CodecContext(SESSION, ModelInfo("tiny.en", False, final_model), Limits(LIMIT, 20.0))
    params = parse_listen_query(query, multilingual=False, model_name="tiny.en")
    return DeepgramLiveCodec(context, params, created="2026-12-01T08:00:00.000Z")


def messages(actions: list[Action]) -> list[dict[str, Any]]:
    """The JSON of every Send, each validated strictly by the SDK's model for its type."""
    out = []
    for action in actions:
        if isinstance(action, Send):
            obj = json.loads(action.message.text)  # every text frame is JSON
            MODELS[obj["type"]].model_validate(obj)
            out.append(obj)
    return out


def final(
    utterance: int,
    start_s: float,
    end_s: float,
    text: str,
    reason: str | None,
    words: tuple[Word, ...] | None = None,
) -> Final:
    if words is None:
        tokens = text.split()
        step = (end_s - start_s) / max(len(tokens), 1)
        words = tuple(
            Word(" " + t, start_s + i * step, start_s + (i + 1) * step, 0.9)
            for i, t in enumerate(tokens)
        )
    return Final(utterance, int(start_s * SR), int(end_s * SR), text, words, "en", reason=reason)


# -- a prerecorded answer ------------------------------------------------------------------

REST_MODEL = ModelIdentity("tiny.en", "0.1.0")
REST_TRANSCRIPT = Transcript(
    duration_s=4.25,
    language="en",
    segments=(
        Segment(
            0.5,
            1.5,
            "Hello, world.",
            (Word(" Hello,", 0.5, 0.9, 0.8), Word(" world.", 1.0, 1.5, 0.6)),
        ),
        Segment(2.0, 3.0, "Bye!", (Word(" Bye!", 2.0, 3.0, 1.0),)),
    ),
    model="tiny.en",
)


# -- the official SDK --------------------------------------------------------------------------

JFK_REFERENCE = (
    "And so my fellow Americans, ask not what your country can do for you, "
    "ask what you can do for your country."
)


def environment(url: str) -> DeepgramClientEnvironment:
    """The only change to the SDK: its base URLs point at kettle."""
    ws = url.replace("http", "ws", 1)
    return DeepgramClientEnvironment(base=url, production=ws, agent=ws, agent_rest=url)


def is_results(message: Any) -> bool:
    return getattr(message, "type", None) == "Results"


def finals_text(messages: list[Any]) -> str:
    return " ".join(
        m.channel.alternatives[0].transcript
        for m in messages
        if is_results(m) and m.is_final and m.channel.alternatives[0].transcript
    )
