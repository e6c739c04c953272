"""The session state machine, driven by scripted audio, a fake model and no clock."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kettle.streaming.agreement import normalized, split_words
from kettle.streaming.events import Done, Error, Event, Final, Partial
from kettle.streaming.session import Session, SessionConfig
from kettle.streaming.vad import EnergyClassifier
from kettle.transcribe.errors import AudioError, ConfigError
from kettle.transcribe.fake import FakeDecoder, scripted_audio, synth_voice
from kettle.transcribe.types import SAMPLE_RATE, DecodeKind, DecodeRequest

SR = SAMPLE_RATE


@dataclass
class Run:
    events: list[Event] = field(default_factory=list)
    requests: list[DecodeRequest] = field(default_factory=list)
    log: list[object] = field(default_factory=list)  # requests and events interleaved

    @property
    def finals(self) -> list[Final]:
        return [e for e in self.events if isinstance(e, Final)]

    @property
    def partials(self) -> list[Partial]:
        return [e for e in self.events if isinstance(e, Partial)]


def drive(
    audio: np.ndarray,
    config: SessionConfig | None = None,
    *,
    decoder: FakeDecoder | None = None,
    chunks: Callable[[int], int] = lambda i: 320,
    lag: int = 0,
    stop: bool = True,
) -> Run:
    """Feed audio in chunks; answer requests after `lag` more chunks (0: at once)."""
    dec = decoder or FakeDecoder()
    session = Session(config or SessionConfig(), session_id="t", classifier=EnergyClassifier())
    run = Run()
    waiting: list[tuple[int, DecodeRequest]] = []

    def settle(step: int, force: bool = False) -> None:
        while True:
            for r in session.poll_requests():
                run.requests.append(r)
                run.log.append(("request", r.kind.value, r.cache_key))
                waiting.append((step, r))
            new = session.poll_events()
            run.events += new
            run.log += new
            due = [w for w in waiting if force or step - w[0] >= lag]
            if not due:
                return
            for w in due:
                waiting.remove(w)
                (result,) = dec.decode_batch([w[1]])
                session.on_result(result)

    pos, i = 0, 0
    while pos < len(audio):
        n = chunks(i)
        session.feed_audio(audio[pos : pos + n])
        pos += n
        i += 1
        settle(i)
    if stop:
        session.stop()
        settle(i, force=True)
    return run


ONE = scripted_audio([("silence", 1.0), ("voice", 2.0), ("silence", 1.0)])


def test_exact_events_for_one_utterance() -> None:
    run = drive(ONE)
    start, end = 38 * 320, int(3.2 * SR)
    assert run.events == [
        Partial(0, start, start + 16000, "alpha", ""),
        Partial(0, start, start + 24000, "alpha bravo", "alpha"),
        Partial(0, start, start + 32000, "alpha bravo charlie", "alpha bravo"),
        # At the pause the speculative final runs over [start, speech end + tail]; its text
        # is shown as a partial at once, and it is the final when the endpoint confirms.
        Partial(0, start, end, "alpha bravo charlie delta", "alpha bravo charlie"),
        Final(0, start, end, "alpha bravo charlie delta", (), "en"),
        Done(4 * SR, 1, None),
    ]
    kinds = [(r.kind, r.cache_key) for r in run.requests]
    # The last partial (2.76 s) ended before the speech (3.0 s): no window to reuse.
    assert kinds[-2] == (DecodeKind.PARTIAL, ("t", 0, start, start + 32000))
    assert kinds[-1] == (DecodeKind.FINAL, ("t", 0, start, end))
    assert all(r.stream_key == ("t", 0) for r in run.requests)
    assert run.requests[-1].prefix == "alpha bravo"  # stable when it was asked for


ONE_HIT = scripted_audio([("silence", 1.0), ("voice", 1.66), ("silence", 1.0)])


def test_speculative_final_reuses_the_last_partials_window() -> None:
    dec = FakeDecoder()
    run = drive(ONE_HIT, decoder=dec)
    start, partial_end, end = 38 * 320, 38 * 320 + 32000, int(2.86 * SR)
    kinds = [(r.kind, r.cache_key) for r in run.requests]
    # The partial at 2.76 s was asked for 100 ms into the silence, so it held all the speech
    # (to 2.66 s): the speculative final decodes exactly its window, an encoder-cache hit ...
    assert kinds[-2:] == [
        (DecodeKind.PARTIAL, ("t", 0, start, partial_end)),
        (DecodeKind.FINAL, ("t", 0, start, partial_end)),
    ]
    assert dec.cache_stats().hits == 1
    # ... while the final reports the utterance's own end.
    assert run.finals == [Final(0, start, end, "alpha bravo charlie", (), "en")]


def test_partials_hold_back_when_silence_begins() -> None:
    # Voice to 2.5 s: the partial due at 2.76 s (260 ms into the silence) is not asked for;
    # the speculative final at the pause (2.7 s) covers the utterance instead.
    audio = scripted_audio([("silence", 1.0), ("voice", 1.5), ("silence", 1.0)])
    run = drive(audio)
    ends = [r.cache_key[3] for r in run.requests if r.kind is DecodeKind.PARTIAL]
    assert max(ends) <= int(2.5 * SR) + 6 * 320
    assert [r.kind for r in run.requests][-1] is DecodeKind.FINAL


def test_partials_off_means_no_partial_requests() -> None:
    dec = FakeDecoder()
    run = drive(ONE, SessionConfig(partials=False), decoder=dec)
    assert [r.kind for r in run.requests] == [DecodeKind.FINAL]
    assert run.finals == [Final(0, 12160, 51200, "alpha bravo charlie delta", (), "en")]
    assert not run.partials


def test_speculative_final_is_ready_at_the_endpoint() -> None:
    run = drive(ONE)
    # The final was emitted in the same step as the endpoint decision: it was ready, and
    # nothing was decoded after the pause's speculative final.
    session_final = run.log.index(run.finals[0])
    assert run.log[session_final - 1] == run.partials[-1]
    assert run.requests[-1].kind is DecodeKind.FINAL


def test_speculative_final_is_discarded_when_speech_resumes() -> None:
    audio = scripted_audio(
        [("silence", 0.5), ("voice", 1.2), ("silence", 0.3), ("voice", 1.0), ("silence", 1.0)]
    )
    run = drive(audio)
    finals = [r for r in run.requests if r.kind is DecodeKind.FINAL]
    assert len(finals) == 2  # one speculated too early, one used
    (final,) = run.finals
    assert final.end == int((0.5 + 1.2 + 0.3 + 1.0 + 0.2) * SR)
    assert final.text == "alpha bravo charlie delta"


def test_no_speculation_when_off() -> None:
    run = drive(ONE, SessionConfig(speculative_final=False))
    finals = [r for r in run.requests if r.kind is DecodeKind.FINAL]
    assert len(finals) == 1 and len(run.finals) == 1


THREE = scripted_audio(
    [
        ("voice", 1.5),
        ("silence", 1.0),
        ("voice", 1.5),
        ("silence", 1.0),
        ("voice", 1.5),
        ("silence", 1.0),
    ]
)


def test_utterance_without_speech_gets_no_final_and_no_number() -> None:
    def text_for(r: DecodeRequest) -> str:
        assert r.cache_key is not None
        return "" if r.cache_key[1] == 1 else "some words here"

    run = drive(THREE, decoder=FakeDecoder(text_for=text_for))
    assert [f.utterance for f in run.finals] == [0, 1]
    assert run.finals[1].start > 3 * SR  # the third utterance took number 1
    assert {p.utterance for p in run.partials} == {0, 1}
    assert run.events[-1] == Done(len(THREE), 2, None)


def test_number_shown_in_partials_is_released_when_the_final_is_empty() -> None:
    flip = iter(range(10_000))

    def text_for(r: DecodeRequest) -> str:
        assert r.cache_key is not None
        if r.cache_key[1] != 1:
            return "fine words"
        if r.kind is DecodeKind.FINAL:
            return ""
        return "uh" if next(flip) % 2 else "oh"  # never agrees: nothing stable

    run = drive(THREE, decoder=FakeDecoder(text_for=text_for))
    assert [f.utterance for f in run.finals] == [0, 1]
    second = [p for p in run.partials if p.start > 2 * SR and p.start < 4 * SR]
    assert second and {p.utterance for p in second} == {1}
    assert all(not p.stable for p in second)


def test_final_starts_with_the_stable_words_even_when_the_model_disagrees() -> None:
    def text_for(r: DecodeRequest) -> str:
        if r.kind is DecodeKind.FINAL:
            return "Something else entirely."
        n = len(r.audio) // 8000
        return " ".join(["one", "two", "three", "four", "five", "six", "seven"][:n])

    run = drive(ONE, SessionConfig(word_timestamps=True), decoder=FakeDecoder(text_for=text_for))
    stable = run.partials[-1].stable
    assert stable
    (final,) = run.finals
    assert normalized(split_words(final.text))[: len(stable.split())] == stable.split()
    assert [w.word for w in final.words][: len(stable.split())] == stable.split()
    assert all(final.start / SR <= w.start <= w.end for w in final.words)


def test_stable_words_are_never_revised() -> None:
    audio = scripted_audio([("voice", 6.0), ("silence", 1.0)])
    run = drive(audio, decoder=FakeDecoder(seconds_per_word=0.3))
    seen: list[str] = []
    for event in run.events:
        if isinstance(event, Partial):
            stable = normalized(split_words(event.stable))
            assert stable[: len(seen)] == seen
            assert normalized(split_words(event.text))[: len(stable)] == stable
            seen = stable
        elif isinstance(event, Final):
            assert normalized(split_words(event.text))[: len(seen)] == seen


def test_word_times_are_absolute_stream_seconds() -> None:
    run = drive(ONE, SessionConfig(word_timestamps=True))
    (final,) = run.finals
    assert [w.word for w in final.words] == final.text.split()
    assert final.words[0].start >= 1.0 and final.words[-1].end <= final.end / SR + 1e-6


def test_max_length_cuts_lose_and_double_nothing() -> None:
    voice = synth_voice(14.0)
    voice[int(4.5 * SR) : int(4.5 * SR) + 320] *= 0.01  # a quiet frame to cut at
    audio = np.concatenate([voice, np.zeros(SR, dtype=np.float32)])
    run = drive(audio, SessionConfig(max_utterance_s=5.0))
    finals = run.finals
    assert len(finals) >= 3
    assert finals[0].start == 0 and finals[0].end == int(4.5 * SR)
    for a, b in itertools.pairwise(finals):
        assert b.start == a.end
    assert int(14.1 * SR) <= finals[-1].end <= int(14.2 * SR)
    assert [f.utterance for f in finals] == list(range(len(finals)))
    assert all(f.end - f.start <= 5 * SR for f in finals)


@settings(max_examples=20, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=1, max_value=9000), min_size=1, max_size=30),
    lag=st.integers(min_value=0, max_value=4),
)
def test_same_finals_however_the_audio_is_chunked(sizes: list[int], lag: int) -> None:
    audio = np.concatenate(
        [
            scripted_audio([("silence", 0.3), ("voice", 1.1), ("silence", 0.3), ("voice", 0.6)]),
            synth_voice(7.0),
            scripted_audio([("silence", 0.8), ("voice", 0.9), ("silence", 0.2)]),
        ]
    )
    config = SessionConfig(max_utterance_s=3.0)
    reference = drive(audio, config)
    run = drive(audio, config, chunks=lambda i: sizes[i % len(sizes)], lag=lag)
    assert run.finals == reference.finals
    # Nothing lost or doubled: back-to-back cuts meet exactly.
    cut = [f for f in reference.finals if f.end - f.start >= 2 * SR]
    assert any(b.start == a.end for a, b in itertools.pairwise(cut))
    assert run.events[-1] == reference.events[-1]


def test_stop_sends_remaining_finals_then_done_and_ignores_later_input() -> None:
    session = Session(SessionConfig(), session_id="t", classifier=EnergyClassifier())
    session.feed_audio(synth_voice(1.5))
    (partial_request,) = session.poll_requests()
    session.feed_audio(synth_voice(0.5))  # arrives while the partial is in flight
    session.stop("bye")
    assert session.poll_events() == [] and session.poll_requests() == []
    dec = FakeDecoder()
    session.on_result(dec.decode_batch([partial_request])[0])
    (final_request,) = session.poll_requests()
    assert final_request.kind is DecodeKind.FINAL and len(final_request.audio) == 2 * SR
    session.on_result(dec.decode_batch([final_request])[0])
    events = session.poll_events()
    assert [type(e) for e in events] == [Final, Done]
    assert events[-1] == Done(2 * SR, 1, "bye")
    session.feed_audio(synth_voice(1.0))
    session.stop()
    session.finalize()
    assert session.poll_events() == [] and session.samples_fed == 2 * SR


def test_finalize_ends_the_utterance_now() -> None:
    session = Session(SessionConfig(partials=False), session_id="t", classifier=EnergyClassifier())
    session.feed_audio(synth_voice(1.0))
    session.finalize()
    (req,) = session.poll_requests()
    assert req.kind is DecodeKind.FINAL and len(req.audio) == SR
    session.finalize()  # nothing open: no effect
    assert session.poll_requests() == []


def test_final_says_why_its_utterance_ended() -> None:
    audio = scripted_audio(
        [("silence", 1.0), ("voice", 1.0), ("silence", 1.0), ("voice", 1.0), ("silence", 0.2)]
    )
    assert [f.reason for f in drive(audio).finals] == ["endpoint", "stop"]
    session = Session(SessionConfig(partials=False), session_id="t", classifier=EnergyClassifier())
    session.feed_audio(synth_voice(1.0))
    session.finalize()
    (req,) = session.poll_requests()
    session.on_result(FakeDecoder().decode_batch([req])[0])
    (final,) = session.poll_events()
    assert isinstance(final, Final) and final.reason == "finalize"
    # The reason is not part of equality: two finals with the same content are equal.
    assert final == Final(final.utterance, final.start, final.end, final.text, (), "en")


def test_overloaded_notice_at_most_once_per_five_seconds_and_partials_thin() -> None:
    session = Session(SessionConfig(), session_id="t", classifier=EnergyClassifier())
    voice = synth_voice(20.0)
    notices = 0
    ends = []
    for i in range(0, len(voice), 320):
        session.feed_audio(voice[i : i + 320])
        for r in session.poll_requests():
            ends.append(i)
            session.on_dropped(r.request_id, overloaded=True)  # every partial skipped
        notices += sum(1 for e in session.poll_events() if e == Error("overloaded", e.message))
    assert 3 <= notices <= 4  # ~20 s / 5 s
    gaps = np.diff(ends)
    assert gaps[-1] >= 4 * SR - 320  # the interval stretched to 8 x 0.5 s


def test_a_final_that_fails_for_good_gives_an_internal_error_and_keeps_numbering() -> None:
    session = Session(SessionConfig(), session_id="t", classifier=EnergyClassifier())
    dec = FakeDecoder()
    audio = scripted_audio([("voice", 2.0), ("silence", 1.0), ("voice", 1.0), ("silence", 1.0)])
    events: list[Event] = []
    for i in range(0, len(audio), 320):
        session.feed_audio(audio[i : i + 320])
        for r in session.poll_requests():
            if r.kind is DecodeKind.FINAL and r.cache_key is not None and r.cache_key[1] == 0:
                session.on_failed(r.request_id, "boom")
            else:
                session.on_result(dec.decode_batch([r])[0])
        events += session.poll_events()
    errors = [e for e in events if isinstance(e, Error)]
    assert errors and errors[0].code == "internal" and not errors[0].fatal
    finals = [e for e in events if isinstance(e, Final)]
    # Utterance 0 had shown partials, so it is closed with its last partial's text.
    assert [f.utterance for f in finals] == [0, 1]
    last_partial = [p for p in events if isinstance(p, Partial) and p.utterance == 0][-1]
    assert finals[0].text == last_partial.text
    assert events.index(errors[0]) < events.index(finals[0])


def test_bad_audio_is_refused_and_loses_nothing() -> None:
    session = Session(SessionConfig(), session_id="t", classifier=EnergyClassifier())
    with pytest.raises(AudioError):
        session.feed_audio(np.zeros((2, 10), dtype=np.float32))
    with pytest.raises(AudioError):
        session.feed_audio(np.array(["a"]))
    session.feed_audio(np.array([np.nan, 0.0], dtype=np.float32))
    session.feed_audio(np.zeros(10, dtype=np.int16))
    assert session.samples_fed == 12


@pytest.mark.parametrize(
    "kwargs",
    [
        {"language": "english"},
        {"partial_interval_s": 0.0},
        {"endpoint_silence_ms": 0},
        {"vad_aggressiveness": 7},
        {"max_utterance_s": 60.0},
        {"preroll_ms": 5000},
        {"onset_ms": 0},
    ],
)
def test_bad_session_config_is_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        SessionConfig(**kwargs)


def test_end_decisions_kept_are_bounded(monkeypatch) -> None:
    import kettle.streaming.session as session_module

    monkeypatch.setattr(session_module, "ENDPOINTS_KEPT", 2)
    session = Session(SessionConfig(), session_id="t", classifier=EnergyClassifier())
    dec = FakeDecoder()
    audio = scripted_audio([("silence", 0.5)] + [("voice", 1.0), ("silence", 1.0)] * 4)
    finals: list[Final] = []
    for pos in range(0, len(audio), 320):
        session.feed_audio(audio[pos : pos + 320])
        for request in session.poll_requests():
            session.on_result(dec.decode_batch([request])[0])
        finals += [e for e in session.poll_events() if isinstance(e, Final)]
    assert [f.utterance for f in finals] == [0, 1, 2, 3]
    assert list(session.endpoints) == [2, 3]  # only the most recent finals' decisions
