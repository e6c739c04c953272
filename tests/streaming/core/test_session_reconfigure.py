"""Session.reconfigure: language, prompt and word timestamps for the utterances opened after
it (the open one keeps its own), the VAD's settings from the next frame, and the context
history's prompt that restarts where a new prompt was set."""

from __future__ import annotations

import dataclasses

import numpy as np
from kettle.streaming.core.context import ContextHistory, Spoken
from kettle.streaming.core.events import Event, Final, Partial, SpeechStarted
from kettle.streaming.core.session import Session, SessionConfig
from kettle.streaming.core.vad import EnergyClassifier, Segmenter, SegmenterConfig, SpeechStart
from kettle.transcribe.model.fake import FakeDecoder, scripted_audio
from kettle.transcribe.types import SAMPLE_RATE, DecodeRequest

SR = SAMPLE_RATE
# Utterances over 1.0..3.0 s and 4.0..5.5 s.
TWO = scripted_audio([("silence", 1.0), ("voice", 2.0), ("silence", 1.0), ("voice", 1.5),
                      ("silence", 1.0)])  # fmt: skip


class Driven:
    def __init__(self, config: SessionConfig) -> None:
        self.session = Session(config, session_id="r", classifier=EnergyClassifier())
        self.decoder = FakeDecoder()
        self.events: list[Event] = []
        self.requests: list[DecodeRequest] = []

    def feed(self, audio: np.ndarray, chunk: int = 320) -> None:
        for pos in range(0, len(audio), chunk):
            self.session.feed_audio(audio[pos : pos + chunk])
            self.settle()

    def settle(self) -> None:
        while True:
            batch = self.session.poll_requests()
            self.events.extend(self.session.poll_events())
            if not batch:
                return
            self.requests.extend(batch)
            for result in self.decoder.decode_batch(batch):
                self.session.on_result(result)

    def of_utterance(self, ordinal: int) -> list[DecodeRequest]:
        return [r for r in self.requests if r.stream_key == ("r", ordinal)]


def test_the_open_utterance_keeps_its_settings_and_the_next_takes_the_new() -> None:
    config = SessionConfig(vad_events=True, multilingual=True)
    run = Driven(config)
    run.feed(TWO[: 2 * SR])  # inside the first utterance
    run.session.reconfigure(
        dataclasses.replace(config, language="de", prompt="Kettle.", word_timestamps=True)
    )
    run.settle()
    run.feed(TWO[2 * SR :])
    run.session.stop()
    run.settle()
    first, second = run.of_utterance(0), run.of_utterance(1)
    assert {(r.language, r.prompt) for r in first} == {(None, None)}
    assert not any(r.word_timestamps for r in first)
    assert {(r.language, r.prompt) for r in second} == {("de", "Kettle.")}
    assert [r.word_timestamps for r in second if r.kind.name == "FINAL"] == [True]
    finals = [e for e in run.events if isinstance(e, Final)]
    assert [(f.language, bool(f.words)) for f in finals] == [("en", False), ("de", True)]
    starts = [e.retunes for e in run.events if isinstance(e, SpeechStarted)]
    assert starts == [0, 1]


def test_a_new_prompt_restarts_the_prompt_text_where_it_was_set() -> None:
    history = ContextHistory(30 * SR, prompt="Old prompt.")
    history.add(Spoken(0, SR, "Before.", "en"))
    history.add(Spoken(2 * SR, 3 * SR, "After.", "en"))
    # No context (other language): every earlier final is prompt text.
    assert history.context(4 * SR, 5 * SR, None, 250).prompt == "Old prompt. Before. After."
    moved = history.context(4 * SR, 5 * SR, None, 250, prompt="New.", since=2 * SR)
    assert moved.prompt == "New. After."


def test_finals_forgotten_still_make_the_prompt_and_keep_its_tail() -> None:
    history = ContextHistory(2 * SR, prompt="P.")
    for i in range(60):
        history.add(Spoken(i * SR, i * SR + SR // 2, f"word{i:02d}.", "en"))
    history.forget_before(59 * SR)
    prompt = history.context(60 * SR, 61 * SR, None, 250).prompt
    assert prompt.endswith("word58. word59.") and len(prompt) == 200
    assert prompt == " ".join(["P.", *(f"word{i:02d}." for i in range(60))])[-200:]


def test_vad_settings_change_from_now_on() -> None:
    config = SessionConfig(vad_events=True)
    run = Driven(config)
    run.feed(TWO[: SR // 2])
    run.session.reconfigure(dataclasses.replace(config, endpoint_silence_ms=1500, preroll_ms=100))
    run.feed(TWO[SR // 2 :])
    run.session.stop()
    run.settle()
    starts = [e.start for e in run.events if isinstance(e, SpeechStarted)]
    assert len(starts) == 1  # the 1 s pause no longer ends the utterance
    assert SR - 100 * SR // 1000 - 2 * 320 <= starts[0] < SR  # 100 ms of pre-roll


def test_a_longer_preroll_never_reaches_past_what_was_kept() -> None:
    seg = Segmenter(SegmenterConfig(preroll_ms=100), EnergyClassifier())
    seg.feed(TWO[: SR // 2])  # silence: the session keeps only 100 ms (and the run) of it
    kept = seg.earliest_needed()
    seg.reconfigure(SegmenterConfig(preroll_ms=2000))
    events = seg.feed(TWO[SR // 2 : 2 * SR])
    (start,) = [e.start for e in events if isinstance(e, SpeechStart)]
    assert start == kept


def test_after_a_finalize_that_ends_a_request_no_earlier_final_is_context_or_prompt() -> None:
    # A plain finalize keeps the first final as the second utterance's context; one that ends
    # a request (a Wyoming round) leaves the next request to start as a stream starts.
    seen = {}
    for new_request in (False, True):
        run = Driven(SessionConfig())
        run.feed(TWO[: int(3.6 * SR)])  # the first utterance has ended and is final
        run.session.finalize(new_request=new_request)
        run.feed(TWO[int(3.6 * SR) :])
        run.session.stop()
        run.settle()
        assert len([e for e in run.events if isinstance(e, Final)]) == 2
        seen[new_request] = {(r.context, r.prompt) for r in run.of_utterance(1)}
    assert any(context for context, _ in seen[False])
    assert seen[True] == {(None, None)}


def first_stable_partial(run: Driven, ordinal: int) -> int:
    """How many of the utterance's partials came before the first with stable words."""
    number = {
        e.start: i for i, e in enumerate(e for e in run.events if isinstance(e, SpeechStarted))
    }
    starts = [s for s, n in number.items() if n == ordinal]
    partials = [e for e in run.events if isinstance(e, Partial) and e.start == starts[0]]
    return next(i for i, p in enumerate(partials) if p.stable)


def test_a_requests_first_words_may_take_fewer_agreeing_partials() -> None:
    # Three utterances; a new request begins before the third.
    long = scripted_audio([("silence", 1.0), ("voice", 4.0), ("silence", 1.0)])
    config = SessionConfig(vad_events=True, stable_agree_first=2)
    run, plain = Driven(config), Driven(dataclasses.replace(config, stable_agree_first=None))
    for r in (run, plain):
        r.feed(long)
        r.feed(long)
        r.session.finalize(new_request=True)
        r.feed(long)
        r.session.stop()
        r.settle()
    later = [first_stable_partial(plain, i) for i in range(3)]
    assert [first_stable_partial(run, i) for i in range(3)] == [
        later[0] - 1,
        later[1],
        later[2] - 1,
    ]
