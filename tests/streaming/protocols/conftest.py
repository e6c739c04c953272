"""Shared helpers for the protocol codecs' tests: Deepgram's live and Flux codecs driven by
text messages, with what they sent decoded."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from kettle.streaming.protocols.base import Action, CodecContext, Limits, ModelInfo, Send
from kettle.streaming.protocols.deepgram import DeepgramLiveCodec
from kettle.streaming.protocols.deepgram_flux import DeepgramFluxCodec
from kettle.streaming.protocols.deepgram_flux_wire import parse_flux_query
from kettle.streaming.protocols.deepgram_wire import parse_listen_query

SESSION = "0123456789abcdef0123456789abcdef"
MODEL = ModelInfo("tiny.en", False)


class AllowAll:
    """A rate gate that lets every message through."""

    def check(self) -> str:
        return "allow"


@dataclass
class Driven:
    """A codec, and every message it sent with the error code it was counted under."""

    codec: DeepgramLiveCodec | DeepgramFluxCodec
    sent: list[tuple[dict[str, Any], str | None]] = field(default_factory=list)

    def take(self, actions: list[Action]) -> list[Action]:
        for action in actions:
            if isinstance(action, Send) and action.message.text:
                self.sent.append((json.loads(action.message.text), action.error_code))
        return actions

    def text(self, obj: Any) -> list[Action]:
        raw = obj if isinstance(obj, str) else json.dumps(obj)
        return self.take(self.codec.on_text(raw, AllowAll()))


def _context() -> CodecContext:
    return CodecContext(SESSION, MODEL, Limits(1 << 20, 20.0))


@pytest.fixture
def live_codec() -> Any:
    """A factory: a Deepgram live codec on the query's settings (raw 16 kHz audio)."""

    def make(query: str = "encoding=linear16&sample_rate=16000") -> Driven:
        params = parse_listen_query(query, multilingual=False, model_name=MODEL.name)
        return Driven(DeepgramLiveCodec(_context(), params, created="2025-01-01T00:00:00.000Z"))

    return make


@pytest.fixture
def flux_codec() -> Any:
    """A factory: a Deepgram Flux codec on the query's settings (flux-general-en)."""

    def make(query: str = "model=flux-general-en") -> Driven:
        params = parse_flux_query(query, multilingual=False, model_name=MODEL.name)
        driven = Driven(DeepgramFluxCodec(_context(), params))
        driven.take(driven.codec.start())
        return driven

    return make
