"""OpenAI Realtime (transcription): speech after any sequence of odd input is transcribed
(odd_input.OddInput); every event validates against the official SDK's models."""

from __future__ import annotations

import base64
from typing import Any

import pydantic
from hypothesis import strategies as st
from hypothesis.stateful import rule
from kettle.streaming.protocols.base import CodecContext, Limits, ModelInfo
from kettle.streaming.protocols.openai.realtime import RealtimeCodec
from kettle.streaming.protocols.openai.rest import MODEL_ALIASES
from openai.types.realtime import RealtimeServerEvent

from tests.streaming.protocols.driver import Driver, Sent
from tests.streaming.protocols.odd_input import FRAME_LIMIT, OddInput, machine_settings, tone_driver

EVENTS: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(RealtimeServerEvent)
COMPLETED = "conversation.item.input_audio_transcription.completed"
LOGPROBS = "item.input_audio_transcription.logprobs"
MALFORMED = [
    "{",
    "[]",
    '{"type": 1}',
    '{"type": "response.create"}',
    "null",
    '{"type": "input_audio_buffer.append"}',
    '{"type": "input_audio_buffer.append", "audio": "!!"}',
]

TURN_DETECTION = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {"type": st.just("server_vad")},
        optional={
            "threshold": st.sampled_from([0.0, 0.5, 1.0, 1.5]),
            "prefix_padding_ms": st.sampled_from([0, 300, 5000]),
            "silence_duration_ms": st.sampled_from([200, 500, 1200, 3000]),
        },
    ),
    st.just({"type": "semantic_vad", "eagerness": "high"}),
    st.just({"type": "nonsense"}),
)
INPUT = st.fixed_dictionaries(
    {},
    optional={
        "turn_detection": TURN_DETECTION,
        "transcription": st.fixed_dictionaries(
            {},
            optional={
                "model": st.sampled_from(["whisper-1", "gpt-4o-transcribe", "tiny.en", "nope"]),
                "language": st.sampled_from(["en", "de", "", 5]),
                "prompt": st.sampled_from(["", "kilo", 7]),
            },
        ),
        "noise_reduction": st.sampled_from([None, {"type": "near_field"}, {"type": "x"}]),
        "format": st.sampled_from(
            [
                {"type": "audio/pcm", "rate": 24000},
                {"type": "audio/pcm"},
                {"type": "audio/pcm", "rate": 16000},
            ]
        ),
    },
)


class RealtimeOddInput(OddInput):
    byte_stream = False  # every append holds whole samples

    def make_driver(self) -> Driver:
        model = ModelInfo("tiny.en", False, aliases=MODEL_ALIASES)
        context = CodecContext("s1", model, Limits(FRAME_LIMIT, 1e9))
        return tone_driver(RealtimeCodec(context))

    def send_audio(self, data: bytes) -> None:
        audio = base64.b64encode(data).decode()
        self.driver.text({"type": "input_audio_buffer.append", "audio": audio})

    def end_stream(self) -> None:
        self.driver.text({"type": "input_audio_buffer.commit"})

    def finalize(self) -> bool:
        self.driver.text({"type": "input_audio_buffer.commit"})
        return True

    def transcript_words(self) -> list[str]:
        texts = [s.obj["transcript"] for s in self.driver.sent if s.obj["type"] == COMPLETED]
        return " ".join(texts).split()

    @rule(kind=st.sampled_from(["commit", "clear"]), times=st.integers(1, 3), tagged=st.booleans())
    def control(self, kind: str, times: int, tagged: bool) -> None:
        for i in range(times):
            event: dict[str, Any] = {"type": f"input_audio_buffer.{kind}"}
            if tagged:
                event["event_id"] = f"client_{i}"
            self.driver.text(event)

    @rule(
        inp=INPUT, include=st.sampled_from([None, [], ["item.input_audio_transcription.logprobs"]])
    )
    def update(self, inp: dict[str, Any], include: list[str] | None) -> None:
        session: dict[str, Any] = {"type": "transcription", "audio": {"input": inp}}
        if include is not None:
            session["include"] = include
        self.driver.text({"type": "session.update", "session": session})

    @rule(text=st.sampled_from(MALFORMED))
    def malformed(self, text: str) -> None:
        self.driver.text(text)

    @rule()
    def binary(self) -> None:
        self.driver.binary(b"\x00\x01")

    def check_shape(self, message: Sent) -> None:
        EVENTS.validate_python(message.obj)

    def check_close(self) -> None:
        assert self.driver.closed is None  # nothing here ends a Realtime session
        assert self.driver.sent[0].obj["type"] == "session.created"


RealtimeOddInput.TestCase.settings = machine_settings()
TestRealtimeOddInput = RealtimeOddInput.TestCase
