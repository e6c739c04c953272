"""Deepgram live (/v1/listen): speech after any sequence of odd input is transcribed
(odd_input.OddInput), read back from the final ``Results`` the client receives."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from hypothesis import strategies as st
from hypothesis.stateful import initialize, rule
from kettle.streaming.protocols.base import CodecContext, Limits, ModelInfo
from kettle.streaming.protocols.deepgram.live import DeepgramLiveCodec
from kettle.streaming.protocols.deepgram.wire import parse_listen_query

from tests.streaming.protocols.api_models import DEEPGRAM_V1_MODELS
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

# The handshake's query: raw PCM at any rate Deepgram takes, and the options that change
# what the stream sends (interim results, endpointing, utterance ends, VAD events, formatting).
QUERIES = st.fixed_dictionaries(
    {
        "encoding": st.just("linear16"),
        "sample_rate": st.sampled_from(["16000", "8000", "24000", "44100", "48000"]),
    },
    optional={
        "channels": st.sampled_from(["1", "2"]),
        "interim_results": st.sampled_from(["true", "false"]),
        "endpointing": st.sampled_from(["false", "10", "300", "1200"]),
        "utterance_end_ms": st.sampled_from(["1000", "2500"]),
        "vad_events": st.sampled_from(["true", "false"]),
        "punctuate": st.sampled_from(["true", "false"]),
        "smart_format": st.sampled_from(["true", "false"]),
        "keyterm": st.sampled_from(["kettle", "Lima"]),
    },
)

KEYTERMS = st.one_of(
    st.none(),
    st.lists(st.sampled_from(["kettle", " Mike ", "", "kilo lima"]), max_size=3),
    st.just(["x"] * 600),  # over the limit: ConfigureFailure
    st.sampled_from(["kettle", 3, [1, 2], {"a": "b"}]),  # not a list of strings: SchemaError
)
FEATURES = st.one_of(
    st.none(),
    st.dictionaries(
        st.sampled_from(["punctuate", "smart_format", "numerals", "diarize"]),
        st.booleans(),
        max_size=3,
    ),
    st.sampled_from([{"punctuate": "yes"}, [True], "on"]),  # malformed: SchemaError
)
CONFIGURES = st.fixed_dictionaries(
    {"type": st.just("Configure")}, optional={"keyterms": KEYTERMS, "features": FEATURES}
)
MALFORMED = [
    "{",
    "[]",
    "null",
    "",
    "not json",
    '{"type": 1}',
    '{"type": "Dance"}',
    '{"kind": "KeepAlive"}',
    '{"type": "closestream"}',
]


def plain_words(text: str) -> list[str]:
    """A transcript's words as the speech's: lowercase, without punctuation."""
    return re.findall(r"[a-z']+", text.lower())


class DeepgramLiveOddInput(OddInput):
    query: dict[str, str] = {"encoding": "linear16", "sample_rate": "16000"}  # noqa: RUF012
    too_big = False  # an audio message over the limit ended the stream
    taken = 0  # audio bytes the stream took
    finalizes = 0  # Finalize messages the stream took: each is answered (from_finalize)

    def make_driver(self) -> Driver:
        context = CodecContext(SESSION, ModelInfo("tiny.en", False), Limits(FRAME_LIMIT, 1e9))
        params = parse_listen_query(urlencode(self.query), multilingual=False, model_name="tiny.en")
        return tone_driver(DeepgramLiveCodec(context, params, created="2026-12-01T08:00:00.000Z"))

    @initialize(query=QUERIES)
    def handshake(self, query: dict[str, str]) -> None:
        self.query = query
        self.driver = self.make_driver()
        self._format = self.driver.audio

    # -- the client's side ---------------------------------------------------------------------

    def send_audio(self, data: bytes) -> None:
        if not self.ended:
            if not data:
                self.ended = True  # an empty binary frame is a CloseStream
            elif len(data) > FRAME_LIMIT:
                self.ended = self.too_big = True  # DataError, its finals, Metadata, 1009
            else:
                self.taken += len(data)
        self.driver.binary(data)

    def end_stream(self) -> None:
        self.driver.text({"type": "CloseStream"})

    def endings(self) -> list[Callable[[], None]]:
        return [
            self.end_stream,
            lambda: self.audio_message(b""),
            lambda: self.audio_message(bytes(FRAME_LIMIT + 2)),
        ]

    def finalize(self) -> bool:
        self.finalizes += not self.ended
        self.driver.text({"type": "Finalize"})
        return True

    @rule(kind=st.sampled_from(["KeepAlive", "Finalize"]), times=st.integers(1, 3))
    def control(self, kind: str, times: int) -> None:
        for _ in range(times):
            if kind == "Finalize":
                self.finalize()
            else:
                self.driver.text({"type": kind})

    @rule(message=CONFIGURES)
    def configure(self, message: dict[str, Any]) -> None:
        self.driver.text(message)

    @rule(text=st.sampled_from(MALFORMED))
    def malformed(self, text: str) -> None:
        self.driver.text(text)

    @rule(go=RARELY)
    def close_stream(self, go: int) -> None:
        if go == 0:
            self.driver.text({"type": "CloseStream"})
            self.ended = True

    @rule(size=st.sampled_from([0, FRAME_LIMIT + 1, 4 * FRAME_LIMIT]), go=RARELY)
    def audio_that_ends(self, size: int, go: int) -> None:
        """An empty message (CloseStream) or one over the limit (1009)."""
        if go == 0:
            self.audio_message(bytes(size))

    @rule(
        size=audio_sizes().filter(lambda n: 0 < n <= FRAME_LIMIT),
        noise=st.booleans(),
        seed=st.integers(0, 2**16),
    )
    def audio(self, size: int, noise: bool, seed: int) -> None:
        """Audio the stream takes (those that end it: ``audio_that_ends``)."""
        super().audio(size, noise, seed)

    # -- what the client reads ------------------------------------------------------------------

    def transcript_words(self) -> list[str]:
        words: list[str] = []
        for message in self.driver.sent:
            obj = message.obj
            if obj["type"] == "Results" and obj["is_final"]:
                words += plain_words(obj["channel"]["alternatives"][0]["transcript"])
        return words

    def check_shape(self, message: Sent) -> None:
        obj = message.obj
        DEEPGRAM_V1_MODELS[obj["type"]].model_validate(obj)
        json.dumps(obj)
        if obj["type"] == "Error":
            assert obj["variant"] in ("SchemaError", "DataError"), obj

    def check_close(self) -> None:
        driver = self.driver
        sent = driver.sent
        kinds = [s.obj["type"] for s in sent]
        assert kinds.count("Metadata") == 1 and kinds[-1] == "Metadata", kinds
        assert sent[-1].closing and not any(s.closing for s in sent[:-1])
        assert driver.closed == (1009 if self.too_big else 1000), driver.closed
        if self.too_big:
            errors = [s.obj for s in sent if s.obj["type"] == "Error"]
            assert errors and errors[-1]["variant"] == "DataError", errors
        metadata = sent[-1].obj
        frame = 2 * int(self.query.get("channels", "1"))
        rate = int(self.query["sample_rate"])
        assert metadata["duration"] == round(self.taken // frame / rate, 3), metadata
        # Every Finalize is answered by one final Results marked from_finalize.
        answers = [s.obj for s in sent if s.obj["type"] == "Results" and s.obj["from_finalize"]]
        assert len(answers) == self.finalizes, (len(answers), self.finalizes)


DeepgramLiveOddInput.TestCase.settings = machine_settings()
TestDeepgramLiveOddInput = DeepgramLiveOddInput.TestCase
