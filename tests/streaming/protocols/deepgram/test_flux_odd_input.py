"""Deepgram Flux (/v2/listen): speech after any sequence of odd input is transcribed
(odd_input.OddInput), read back from the ``EndOfTurn`` transcripts the client receives."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from hypothesis import strategies as st
from hypothesis.stateful import initialize, rule
from kettle.streaming.protocols.base import CodecContext, Limits, ModelInfo
from kettle.streaming.protocols.deepgram.flux import DeepgramFluxCodec
from kettle.streaming.protocols.deepgram.flux_wire import parse_flux_query
from kettle.streaming.protocols.deepgram.wire import ListenParamError

from tests.streaming.protocols.api_models import FLUX_MODELS
from tests.streaming.protocols.driver import Driver, Sent
from tests.streaming.protocols.odd_input import (
    FRAME_LIMIT,
    RARELY,
    OddInput,
    machine_settings,
    tone_driver,
)

SESSION = "0123456789abcdef0123456789abcdef"
BASE = {"model": "flux-general-en", "encoding": "linear16", "sample_rate": "16000"}

# The handshake's query: raw PCM at any rate, and the end-of-turn settings (a combination
# Flux refuses, such as an eager threshold over eot_threshold, falls back to the defaults).
QUERIES = st.fixed_dictionaries(
    {"sample_rate": st.sampled_from(["16000", "8000", "24000", "44100", "48000"])},
    optional={
        "eot_threshold": st.sampled_from(["0.5", "0.7", "0.9", "1.0"]),
        "eager_eot_threshold": st.sampled_from(["0.3", "0.5", "0.9"]),
        "eot_timeout_ms": st.sampled_from(["500", "1000", "5000", "60000"]),
        "keyterm": st.sampled_from(["kettle", "Lima"]),
    },
)
# Configure's fields, valid and invalid (out of range, wrong type, eager over eot).
THRESHOLDS = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {},
        optional={
            "eot_threshold": st.sampled_from([0.5, 0.8, 1.0, 0.2, 1.5, "0.7", True, None]),
            "eager_eot_threshold": st.sampled_from([0.3, 0.6, 0.9, 0.1, "x", None]),
            "eot_timeout_ms": st.sampled_from([500, 2000, 60000, 100, 70000, 1.5, "800", None]),
        },
    ),
    st.sampled_from([[], "fast", 3]),
)
CONFIGURES = st.fixed_dictionaries(
    {"type": st.just("Configure")},
    optional={
        "thresholds": THRESHOLDS,
        "keyterms": st.one_of(
            st.lists(st.sampled_from(["kettle", " Mike ", ""]), max_size=3),
            st.sampled_from([None, "kettle", [3], ["x"] * 600]),
        ),
        "language_hints": st.sampled_from([[], ["en"], None]),
        "profanity_filter": st.sampled_from([False, True]),
    },
)
# JSON objects Flux does not know: a Warning each, ignored.
UNKNOWN = ['{"type": "Dance"}', '{"type": 1}', '{"kind": "CloseStream"}', '{"type": "Finalize"}']
# Not a JSON object: Flux's fatal UNPARSABLE_CLIENT_MESSAGE, the connection closes.
UNPARSABLE = ["{", "[]", "null", "", "not json", '"CloseStream"']


def plain_words(text: str) -> list[str]:
    return re.findall(r"[a-z']+", text.lower())


class DeepgramFluxOddInput(OddInput):
    query: dict[str, str] = BASE
    fatal = False  # an unparsable message closed the connection

    def make_driver(self) -> Driver:
        context = CodecContext(SESSION, ModelInfo("tiny.en", False), Limits(FRAME_LIMIT, 1e9))
        try:
            query = urlencode(self.query)
            params = parse_flux_query(query, multilingual=False, model_name="tiny.en")
        except ListenParamError:
            params = parse_flux_query(urlencode(BASE), multilingual=False, model_name="tiny.en")
        return tone_driver(DeepgramFluxCodec(context, params))

    @initialize(query=QUERIES)
    def handshake(self, query: dict[str, str]) -> None:
        self.query = {**BASE, **query}
        self.driver = self.make_driver()
        self._format = self.driver.audio

    # -- the client's side ---------------------------------------------------------------------

    def send_audio(self, data: bytes) -> None:
        self.driver.binary(data)  # (over the limit: a Warning, dropped; empty: nothing)

    def end_stream(self) -> None:
        self.driver.text({"type": "CloseStream"})

    def endings(self) -> list[Callable[[], None]]:
        return [self.end_stream, lambda: self.unparsable("{", 0)]

    def finalize(self) -> bool:
        self.driver.text({"type": "ForceEndTurn"})
        return True

    @rule(kind=st.sampled_from(["ForceEndTurn", "KeepAlive"]), times=st.integers(1, 3))
    def control(self, kind: str, times: int) -> None:
        for _ in range(times):
            self.driver.text({"type": kind})

    @rule(message=CONFIGURES)
    def configure(self, message: dict[str, Any]) -> None:
        self.driver.text(message)

    @rule(text=st.sampled_from(UNKNOWN))
    def unknown(self, text: str) -> None:
        self.driver.text(text)

    @rule(text=st.sampled_from(UNPARSABLE), go=RARELY)
    def unparsable(self, text: str, go: int) -> None:
        if go == 0:
            if not self.ended:
                self.ended = self.fatal = True
            self.driver.text(text)

    @rule(go=RARELY)
    def close_stream(self, go: int) -> None:
        if go == 0:
            self.driver.text({"type": "CloseStream"})
            self.ended = True

    # -- what the client reads ------------------------------------------------------------------

    def turn_infos(self) -> list[dict[str, Any]]:
        return [s.obj for s in self.driver.sent if s.obj["type"] == "TurnInfo"]

    def transcript_words(self) -> list[str]:
        words: list[str] = []
        for info in self.turn_infos():
            if info["event"] == "EndOfTurn":
                words += plain_words(info["transcript"])
        return words

    def check_shape(self, message: Sent) -> None:
        obj = message.obj
        FLUX_MODELS[obj["type"]].model_validate(obj)
        json.dumps(obj)

    def check_close(self) -> None:
        driver = self.driver
        sent = [s.obj for s in driver.sent]
        assert sent[0]["type"] == "Connected"
        assert [m["sequence_id"] for m in sent] == list(range(len(sent)))
        if self.fatal:
            assert sent[-1]["type"] == "Error" and driver.sent[-1].closing, sent[-1]
            assert sent[-1]["code"] == "UNPARSABLE_CLIENT_MESSAGE"
            assert driver.closed == 1011
        else:
            assert not any(s.closing for s in driver.sent), "Flux says nothing at the end"
            assert driver.closed == 1000
        # Flux's turn rules: each turn starts, ends once, and the next one is numbered on;
        # an EndOfTurn reads as the EagerEndOfTurn before it unless a TurnResumed came.
        index, open_turn, eager = 0, False, None
        for info in self.turn_infos():
            event = info["event"]
            assert info["turn_index"] == index, (index, info)
            if event == "StartOfTurn":
                assert not open_turn, info
                open_turn = True
                continue
            assert open_turn, info
            if event == "EagerEndOfTurn":
                assert eager is None and info["transcript"], info
                eager = info["transcript"]
            elif event == "TurnResumed":
                eager = None
            elif event == "EndOfTurn":
                assert eager is None or info["transcript"] == eager, (eager, info)
                open_turn, eager, index = False, None, index + 1
        assert not open_turn, "a turn started and never ended"


DeepgramFluxOddInput.TestCase.settings = machine_settings()
TestDeepgramFluxOddInput = DeepgramFluxOddInput.TestCase
