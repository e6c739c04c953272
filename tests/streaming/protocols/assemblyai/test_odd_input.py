"""AssemblyAI v3 (/v3/ws): speech after any sequence of odd input is transcribed
(odd_input.OddInput), read back from the end-of-turn ``Turn`` messages the client keeps (the
last of each ``turn_order``)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from hypothesis import strategies as st
from hypothesis.stateful import initialize, rule
from kettle.streaming.protocols.assemblyai.live import AssemblyAICodec
from kettle.streaming.protocols.assemblyai.wire import parse_query
from kettle.streaming.protocols.base import CodecContext, Limits, ModelInfo

from tests.streaming.protocols.api_models import ASSEMBLYAI_MODELS
from tests.streaming.protocols.driver import Driver, Sent
from tests.streaming.protocols.odd_input import (
    FRAME_LIMIT,
    RARELY,
    OddInput,
    audio_sizes,
    machine_settings,
    tone_driver,
)

SESSION = "0123456789abcdef0123456789abcdef"
INVALID_MESSAGE, AUDIO_VIOLATION = 3006, 3007

# The handshake's query: raw PCM at any rate, both model families, and the turn settings.
QUERIES = st.fixed_dictionaries(
    {
        "encoding": st.just("pcm_s16le"),
        "sample_rate": st.sampled_from(["16000", "8000", "24000", "44100", "48000"]),
    },
    optional={
        "speech_model": st.sampled_from(["universal-streaming-english", "u3-rt-pro"]),
        "format_turns": st.sampled_from(["true", "false"]),
        "end_of_turn_confidence_threshold": st.sampled_from(["0", "0.4", "1"]),
        "min_turn_silence": st.sampled_from(["0", "160", "800"]),
        "max_turn_silence": st.sampled_from(["400", "1280", "5000"]),
        "keyterms_prompt": st.sampled_from(['["kettle"]', "Lima"]),
    },
)

# UpdateConfiguration's fields: (value, whether AssemblyAI takes it); one it refuses closes
# the connection with 3006.
FIELDS: dict[str, st.SearchStrategy[tuple[Any, bool]]] = {
    "keyterms_prompt": st.sampled_from(
        [(["kettle", "Mike"], True), ([], True), ("kettle", False), ([3], False), ({}, False)]
    ),
    "end_of_turn_confidence_threshold": st.sampled_from(
        [(0, True), (0.7, True), (1, True), (1.5, False), ("x", False), (True, False)]
    ),
    "min_turn_silence": st.sampled_from([(0, True), (400, True), (-1, False), ("x", False)]),
    "min_end_of_turn_silence_when_confident": st.sampled_from([(160, True), (1.5, False)]),
    "max_turn_silence": st.sampled_from([(1000, True), (60000, True), (70000, False)]),
    "vad_threshold": st.sampled_from([(0.5, True)]),  # (accepted, and not kettle's)
    "format_turns": st.sampled_from([(True, True)]),
    "unknown_field": st.sampled_from([("anything", True)]),
}
LEGACY = "min_end_of_turn_silence_when_confident"
UPDATES = st.fixed_dictionaries({}, optional=FIELDS)
# Not a JSON object with a known type: 3006, the connection closes.
MALFORMED = ["{", "[]", "null", "", "not json", '{"type": 1}', '{"type": "Dance"}', '{"a": 1}']


def plain_words(text: str) -> list[str]:
    return re.findall(r"[a-z']+", text.lower())


class AssemblyAIOddInput(OddInput):
    query: dict[str, str] = {"encoding": "pcm_s16le", "sample_rate": "16000"}  # noqa: RUF012
    error: int | None = None  # the close code of the error the sequence asked for
    taken = 0  # audio bytes the stream took

    def make_driver(self) -> Driver:
        context = CodecContext(SESSION, ModelInfo("tiny.en", False), Limits(FRAME_LIMIT, 1e9))
        params = parse_query(urlencode(self.query), multilingual=False)
        return tone_driver(AssemblyAICodec(context, params, clock=lambda: 1_000_000.0))

    @initialize(query=QUERIES)
    def handshake(self, query: dict[str, str]) -> None:
        self.query = query
        self.driver = self.make_driver()
        self._format = self.driver.audio

    def fail(self, code: int) -> None:
        if not self.ended:
            self.ended, self.error = True, code

    # -- the client's side ---------------------------------------------------------------------

    def send_audio(self, data: bytes) -> None:
        if len(data) > FRAME_LIMIT:  # (over 1000 ms, or the server's limit: 3007)
            self.fail(AUDIO_VIOLATION)
        elif not self.ended:
            self.taken += len(data)
        self.driver.binary(data)

    def end_stream(self) -> None:
        self.driver.text({"type": "Terminate"})

    def endings(self) -> list[Callable[[], None]]:
        return [
            self.end_stream,
            lambda: self.malformed("not json", 0),
            lambda: self.update({"max_turn_silence": (70000, False)}, 0),
            lambda: self.audio_that_ends(FRAME_LIMIT + 2, 0),
        ]

    def finalize(self) -> bool:
        self.driver.text({"type": "ForceEndpoint"})
        return True

    @rule(
        size=audio_sizes().filter(lambda n: n <= FRAME_LIMIT),
        noise=st.booleans(),
        seed=st.integers(0, 2**16),
    )
    def audio(self, size: int, noise: bool, seed: int) -> None:
        """Audio the stream takes (one over the limit: ``audio_that_ends``)."""
        super().audio(size, noise, seed)

    @rule(size=st.sampled_from([FRAME_LIMIT + 1, 4 * FRAME_LIMIT]), go=RARELY)
    def audio_that_ends(self, size: int, go: int) -> None:
        if go == 0:
            self.audio_message(bytes(size))

    @rule(kind=st.sampled_from(["ForceEndpoint", "KeepAlive"]), times=st.integers(1, 3))
    def control(self, kind: str, times: int) -> None:
        for _ in range(times):
            self.driver.text({"type": kind})

    @rule(fields=UPDATES, go=RARELY)
    def update(self, fields: dict[str, tuple[Any, bool]], go: int) -> None:
        if go != 0:  # (most updates are valid)
            fields = {k: v for k, v in fields.items() if v[1]}
        if "min_turn_silence" in fields and LEGACY in fields:
            # The old name of min_turn_silence: with both, kettle reads the new one only.
            fields = {**fields, LEGACY: (fields[LEGACY][0], True)}
        valid = all(ok for _, ok in fields.values())
        if not valid:
            self.fail(INVALID_MESSAGE)
        self.driver.text({"type": "UpdateConfiguration", **{k: v for k, (v, _) in fields.items()}})

    @rule(text=st.sampled_from(MALFORMED), go=RARELY)
    def malformed(self, text: str, go: int) -> None:
        if go == 0:
            self.fail(INVALID_MESSAGE)
            self.driver.text(text)

    @rule(go=RARELY)
    def terminate(self, go: int) -> None:
        if go == 0:
            self.driver.text({"type": "Terminate"})
            self.ended = True

    # -- what the client reads ------------------------------------------------------------------

    def ended_turns(self) -> dict[int, dict[str, Any]]:
        """The last end-of-turn Turn of each turn_order, as a client keeps them."""
        turns: dict[int, dict[str, Any]] = {}
        for message in self.driver.sent:
            obj = message.obj
            if obj["type"] == "Turn" and obj["end_of_turn"]:
                turns[obj["turn_order"]] = obj
        return turns

    def transcript_words(self) -> list[str]:
        turns = self.ended_turns()
        return [w for order in sorted(turns) for w in plain_words(turns[order]["transcript"])]

    def check_shape(self, message: Sent) -> None:
        obj = message.obj
        if obj["type"] == "Error":
            assert isinstance(obj["error_code"], int) and isinstance(obj["error"], str), obj
        else:
            ASSEMBLYAI_MODELS[obj["type"]].model_validate(obj)
        json.dumps(obj)

    def check_close(self) -> None:
        driver = self.driver
        sent = [s.obj for s in driver.sent]
        assert sent[0]["type"] == "Begin"
        assert driver.sent[-1].closing and not any(s.closing for s in driver.sent[:-1])
        kinds = [m["type"] for m in sent]
        if self.error is not None:
            assert sent[-1]["type"] == "Error", sent[-1]
            assert sent[-1]["error_code"] == self.error == driver.closed, (sent[-1], driver.closed)
            assert "Termination" not in kinds
        else:
            assert kinds.count("Termination") == 1 and kinds[-1] == "Termination", kinds
            assert driver.closed == 1000
            seconds = self.taken // 2 / int(self.query["sample_rate"])
            assert sent[-1]["audio_duration_seconds"] == round(seconds), (sent[-1], seconds)
        # Turns are numbered 0, 1, 2, ... as they end, none skipped.
        orders = sorted(self.ended_turns())
        assert orders == list(range(len(orders))), orders


AssemblyAIOddInput.TestCase.settings = machine_settings()
TestAssemblyAIOddInput = AssemblyAIOddInput.TestCase
