"""kettle v1: speech after any sequence of odd input is transcribed (odd_input.OddInput)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import rule
from kettle.streaming.protocols.base import CodecContext, Limits, ModelInfo
from kettle.streaming.protocols.kettle_v1.live import KettleV1Codec
from kettle.streaming.protocols.kettle_v1.wire import StreamSettings

from tests.streaming.protocols.driver import Driver, Sent
from tests.streaming.protocols.odd_input import (
    FRAME_LIMIT,
    RARELY,
    OddInput,
    machine_settings,
    tone_driver,
)

_NUMBER = (int, float)
# Each server message's fields and their types, as docs/protocol.md (revision 1.2) gives them.
SHAPES: dict[str, dict[str, Any]] = {
    "ready": {"session_id": str, "protocol": int, "model": str, "sample_rate": int},
    "partial": {"utterance": int, "start": _NUMBER, "end": _NUMBER, "text": str, "stable": str},
    "final": {"utterance": int, "start": _NUMBER, "end": _NUMBER, "text": str, "language": str},
    "revision": {"utterance": int, "start": _NUMBER, "end": _NUMBER, "text": str},
    "error": {"code": str, "message": str},
    "done": {"audio_seconds": _NUMBER, "utterances": int},
}
CODES = {"bad_message", "bad_audio", "overloaded", "rate_limited", "audio_backlog", "internal"}

CONFIGS = st.fixed_dictionaries(
    {},
    optional={
        "encoding": st.sampled_from(["pcm_s16le", "pcm_f32le", "mulaw", "opus", 7]),
        "sample_rate": st.sampled_from([8000, 11025, 16000, 24000, 44100, 48000, 7999, 96000]),
        "channels": st.sampled_from([1, 2, 0, 9]),
        "partials": st.sampled_from([True, False, "yes"]),
        "word_timestamps": st.booleans(),
        "revisions": st.booleans(),
        "language": st.sampled_from(["en", None, "xx", 3]),
    },
)


class KettleV1OddInput(OddInput):
    def make_driver(self) -> Driver:
        context = CodecContext("s1", ModelInfo("tiny.en", False), Limits(FRAME_LIMIT, 1e9))
        return tone_driver(KettleV1Codec(context, StreamSettings()))

    def send_audio(self, data: bytes) -> None:
        self.driver.binary(data)

    def end_stream(self) -> None:
        self.driver.text({"type": "stop"})

    def finalize(self) -> bool:
        self.driver.text({"type": "finalize"})
        return True

    @rule(config=CONFIGS)
    def config(self, config: dict[str, Any]) -> None:
        if self.format.encoding == "mulaw" or config.get("encoding") == "mulaw":
            config = {**config, "encoding": "pcm_s16le"}  # (no mulaw encoder for the tones)
        self.driver.text({"type": "config", **config})

    @rule(kind=st.sampled_from(["finalize", "keepalive"]), times=st.integers(1, 3))
    def control(self, kind: str, times: int) -> None:
        for _ in range(times):
            self.driver.text({"type": kind})

    @rule(text=st.sampled_from(["{", "[]", '{"type": 1}', '{"type": "pause"}', "null", ""]))
    def malformed(self, text: str) -> None:
        self.driver.text(text)

    @rule(go=RARELY)
    def stop(self, go: int) -> None:
        if go == 0:
            self.driver.text({"type": "stop"})
            self.ended = True

    def check_shape(self, message: Sent) -> None:
        obj = message.obj
        fields = SHAPES[obj["type"]]
        for name, kind in fields.items():
            assert isinstance(obj[name], kind), (name, obj)
        if obj["type"] == "error":
            assert obj["code"] in CODES, obj
            assert obj.get("fatal", False) is False, obj  # nothing here is fatal
        json.dumps(obj)

    def check_close(self) -> None:
        sent = self.driver.sent
        assert sent[0].obj["type"] == "ready"
        assert sent[-1].obj["type"] == "done" and self.driver.closed == 1000
        assert [s.obj["type"] for s in sent].count("done") == 1
        finals = [s.obj["utterance"] for s in sent if s.obj["type"] == "final"]
        assert finals == list(range(len(finals)))  # numbered 0, 1, 2, ... with no gaps
        assert sent[-1].obj["utterances"] == len(finals)


KettleV1OddInput.TestCase.settings = machine_settings()
TestKettleV1OddInput = KettleV1OddInput.TestCase
