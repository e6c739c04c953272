"""Fixtures shared by the protocol tests: an OpenAI Realtime codec driven without a Session
(what it sends, and how much audio it passes on), for tests of what it accepts and refuses."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from kettle.streaming.protocols.base import Action, CodecContext, FeedAudio, ModelInfo, Send
from kettle.streaming.protocols.openai_models import MODEL_ALIASES
from kettle.streaming.protocols.openai_realtime import RealtimeCodec


class AllowAll:
    def check(self) -> str:
        return "allow"


class RealtimeDriver:
    """A RealtimeCodec fed client events: ``out`` holds the events it sent, ``error_codes``
    the codes its Sends carry for ``kettle_errors{code}``, ``fed`` the audio bytes passed on."""

    def __init__(self, multilingual: bool = False) -> None:
        model = ModelInfo("tiny.en", multilingual, aliases=MODEL_ALIASES)
        self.codec = RealtimeCodec(CodecContext("sess1", model))
        self.out: list[dict[str, Any]] = []
        self.error_codes: list[str] = []
        self.fed = 0
        self.apply(self.codec.start())

    def apply(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, Send):
                self.out.append(json.loads(action.message.text))
                if action.error_code is not None:
                    self.error_codes.append(action.error_code)
            elif isinstance(action, FeedAudio):
                self.fed += len(action.data)

    def send(self, event: Any) -> list[dict[str, Any]]:
        """Send one event (as JSON text); the events the codec answered with."""
        before = len(self.out)
        self.apply(self.codec.on_text(json.dumps(event), AllowAll()))
        return self.out[before:]

    def send_object(self, event: Any) -> list[dict[str, Any]]:
        """Send one event as a parsed object (a fields.Recording, say)."""
        before = len(self.out)
        self.apply(self.codec.on_event_object(event, AllowAll()))
        return self.out[before:]


@pytest.fixture
def realtime() -> Callable[..., RealtimeDriver]:
    """Make a RealtimeDriver (``multilingual``: the served model's)."""
    return RealtimeDriver
