"""The session state machine, driven by scripted audio, a fake model and no clock."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kettle.streaming.core.agreement import normalized, split_words
from kettle.streaming.core.events import Done, Error, Event, Final, Partial
from kettle.streaming.core.session import Session, SessionConfig
from kettle.streaming.core.speculation import fill_tail
from kettle.streaming.core.vad import EnergyClassifier
from kettle.transcribe.errors import AudioError, ConfigError
from kettle.transcribe.model.fake import FakeDecoder, scripted_audio, synth_voice
from kettle.transcribe.types import SAMPLE_RATE, DecodeKind, DecodeRequest, DecodeResult

from tests.streaming.core.conftest import ALONE, Run, drive, window_key

SR = SAMPLE_RATE

ONE = scripted_audio([("silence", 1.0), ("voice", 2.0), ("silence", 1.0)])


def test_exact_events_for_one_utterance() -> None:
    run = drive(ONE)
    start, end = 38 * 320, int(3.2 * SR)
    assert run.events == [
        Partial(0, start, start + 16000, "alpha", ""),
        Partial(0, start, start + 24000, "alpha bravo", "alpha"),
        Partial(0, start, start + 32000, "alpha bravo charlie", "alpha bravo"),
        # At the hush (60 ms of silence) the speculative final runs over [start, speech end +
        # tail]; its text is shown at once as a partial of the audio heard (3.06 s), and it
        # is the final when the endpoint confirms.
        Partial(0, start, int(3.06 * SR), "alpha bravo charlie delta", "alpha bravo charlie"),
        Final(0, start, end, "alpha bravo charlie delta", (), "en"),
        Done(4 * SR, 1, None),
    ]
    kinds = [(r.kind, r.cache_key) for r in run.requests]
    # The last partial (2.76 s) ended before the speech (3.0 s): no window to reuse.
    assert kinds[-2] == (DecodeKind.PARTIAL, ("t", 0, start, start + 32000))
    assert kinds[-1] == (DecodeKind.FINAL, ("t", 0, start, end, "filled from", int(3.06 * SR)))
    assert all(r.stream_key == ("t", 0) for r in run.requests)
    assert run.requests[-1].prefix == "alpha bravo"  # stable when it was asked for


def test_partials_hold_back_when_silence_begins() -> None:
    # Voice to 2.5 s: the partial due at 2.76 s (260 ms into the silence) is not asked for;
    # the speculative final at the pause (2.7 s) covers the utterance instead.
    audio = scripted_audio([("silence", 1.0), ("voice", 1.5), ("silence", 1.0)])
    run = drive(audio)
    ends = [window_key(r)[3] for r in run.requests if r.kind is DecodeKind.PARTIAL]
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


def test_speculative_final_asked_at_the_hush_fills_the_tail_not_heard_yet() -> None:
    # Defaults: a final's window keeps 300 ms after the last voiced frame (3.0 s), the hush
    # comes at 60 ms. The speculation is asked for then, its last 240 ms filled from the
    # silence heard so far, and it is the final (no second final decode) once the endpoint
    # confirms the silence.
    run = drive(ONE, SessionConfig())
    (spec,) = [r for r in run.requests if r.kind is DecodeKind.FINAL]
    _, _, start, end, *filled = window_key(spec)
    hush = int(3.06 * SR)
    assert (end, filled) == (int(3.3 * SR), ["filled from", hush])
    assert spec.speculative and len(spec.audio) == end - start
    heard = ONE[start:hush]
    expected = fill_tail(heard, silence=hush - 3 * SR, missing=end - hush)
    np.testing.assert_array_equal(spec.audio, expected)
    (final,) = run.finals
    assert final.text == "alpha bravo charlie delta"
    # Asked for in the step that completed the hush: before the tail's last 240 ms came.
    asked = run.log.index(("request", "final", spec.cache_key))
    pause_partials = [e for e in run.log[asked:] if isinstance(e, Partial)]
    assert pause_partials and pause_partials[0].end == hush


def test_a_filled_speculation_is_dropped_when_speech_resumes_in_the_tail() -> None:
    # Speech comes back 250 ms into the silence: after the speculation was asked for, inside
    # the tail it filled. The filled guess is not used; the final covers all the speech.
    audio = scripted_audio(
        [("silence", 0.5), ("voice", 1.2), ("silence", 0.25), ("voice", 1.0), ("silence", 1.0)]
    )
    run = drive(audio, SessionConfig())
    filled = [r for r in run.requests if r.kind is DecodeKind.FINAL and len(window_key(r)) > 4]
    assert filled  # the first pause's speculation
    (final,) = run.finals
    assert final.text == "alpha bravo charlie delta"
    assert final.end >= int((0.5 + 1.2 + 0.25 + 1.0) * SR)  # to past the second voice


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
        return "" if window_key(r)[1] == 1 else "some words here"

    run = drive(THREE, decoder=FakeDecoder(text_for=text_for))
    assert [f.utterance for f in run.finals] == [0, 1]
    assert run.finals[1].start > 3 * SR  # the third utterance took number 1
    assert {p.utterance for p in run.partials} == {0, 1}
    assert run.events[-1] == Done(len(THREE), 2, None)


def test_number_shown_in_partials_is_released_when_the_final_is_empty() -> None:
    flip = iter(range(10_000))

    def text_for(r: DecodeRequest) -> str:
        assert r.cache_key is not None
        if window_key(r)[1] != 1:
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


@pytest.mark.parametrize("config", [ALONE, SessionConfig()], ids=["alone", "context"])
def test_stable_words_are_never_revised(config: SessionConfig) -> None:
    audio = scripted_audio([("voice", 6.0), ("silence", 1.0)] * 2)
    run = drive(audio, config, decoder=FakeDecoder(seconds_per_word=0.3))
    seen: list[str] = []
    for event in run.events:
        if isinstance(event, Partial):
            stable = normalized(split_words(event.stable))
            assert stable[: len(seen)] == seen
            assert normalized(split_words(event.text))[: len(stable)] == stable
            seen = stable
        elif isinstance(event, Final):
            assert normalized(split_words(event.text))[: len(seen)] == seen
            seen = []
    assert len(run.finals) == 2


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


def test_partials_thin_when_skipped_for_load() -> None:
    # (The overloaded notice is the engine's: tests/streaming/engine/test_load.py.)
    session = Session(SessionConfig(), session_id="t", classifier=EnergyClassifier())
    voice = synth_voice(20.0)
    ends = []
    for i in range(0, len(voice), 320):
        session.feed_audio(voice[i : i + 320])
        for r in session.poll_requests():
            ends.append(i)
            session.on_dropped(r.request_id, overloaded=True)  # every partial skipped
        assert not [e for e in session.poll_events() if isinstance(e, Error)]
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
            if r.kind is DecodeKind.FINAL and r.cache_key is not None and window_key(r)[1] == 0:
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
def test_bad_session_config_is_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        SessionConfig(**kwargs)


def test_end_decisions_kept_are_bounded(monkeypatch) -> None:
    import kettle.streaming.core.utterances as session_module

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


# --- finals and partials in context (the defaults) -----------------------------------------

CONTEXT = SessionConfig(word_timestamps=True)
# A final's window keeps final_tail_ms after the last voiced frame; the utterance itself ends
# the segmenter's 200 ms after it.
PAST_END = (CONTEXT.final_tail_ms - 200) / 1000


def _requests_of(run: Run, kind: DecodeKind) -> list[DecodeRequest]:
    return [r for r in run.requests if r.kind is kind]


def test_finals_are_decoded_in_context_and_emit_only_new_words() -> None:
    run = drive(THREE, CONTEXT)
    f0, f1, f2 = run.finals
    # Each window starts at the first utterance and holds the earlier ones' audio; the
    # fake decoder, like the real adapter, returns only what follows the forced context,
    # so each final has its own three words and no more.
    assert [f.text for f in (f0, f1, f2)] == ["alpha bravo charlie"] * 3
    finals = [r for r in _requests_of(run, DecodeKind.FINAL)]
    assert [r.context for r in finals] == [None, f0.text, f"{f0.text} {f1.text}"]
    for r, f in zip(finals, (f0, f1, f2), strict=True):
        assert r.cache_key is not None and window_key(r)[2] == f0.start  # window start
        # The window ends final_tail_ms after the last voiced frame, past the utterance's end.
        assert window_key(r)[3] == f.end + int(PAST_END * SR)
        assert len(r.audio) == window_key(r)[3] - f0.start
    assert [f.utterance for f in run.finals] == [0, 1, 2]


def test_partials_are_decoded_in_the_same_context() -> None:
    run = drive(THREE, CONTEXT)
    f0 = run.finals[0]
    later = [r for r in _requests_of(run, DecodeKind.PARTIAL) if window_key(r)[1] == 1]
    assert later and all(r.context == f0.text and window_key(r)[2] == f0.start for r in later)
    texts = [p.text for p in run.partials if p.utterance == 1]
    assert texts and all(t.startswith("alpha") and len(t.split()) <= 3 for t in texts)


def test_word_times_in_context_are_absolute() -> None:
    run = drive(THREE, CONTEXT)
    for f in run.finals:
        assert [w.word for w in f.words] == f.text.split()
        assert f.start / SR <= f.words[0].start
        assert f.words[-1].end <= f.end / SR + PAST_END + 1e-6  # within the window's tail
        assert all(a.end <= b.start for a, b in itertools.pairwise(f.words))


def test_numbering_stays_gapless_when_an_utterance_in_the_context_was_empty() -> None:
    def text_for(r: DecodeRequest) -> str:
        assert r.cache_key is not None
        return "" if window_key(r)[1] == 1 else f"words of {window_key(r)[1]}"

    run = drive(THREE, SessionConfig(), decoder=FakeDecoder(text_for=text_for))
    assert [(f.utterance, f.text) for f in run.finals] == [(0, "words of 0"), (1, "words of 2")]
    last = _requests_of(run, DecodeKind.FINAL)[-1]
    # The empty utterance's audio lies inside the window, with no text for it.
    assert last.context == "words of 0" and window_key(last)[2] == run.finals[0].start


def test_an_utterance_read_as_nothing_lends_its_audio_to_the_next() -> None:
    # A short word the model doubts alone ("Eight." before a pause the endpoint took) comes
    # back in the next utterance's decode, which hears its audio with no text forced for it.
    def text_for(r: DecodeRequest) -> str:
        assert r.cache_key is not None
        return "" if window_key(r)[1] == 0 else f"words of {window_key(r)[1]}"

    run = drive(THREE, SessionConfig(), decoder=FakeDecoder(text_for=text_for))
    assert [(f.utterance, f.text) for f in run.finals] == [(0, "words of 1"), (1, "words of 2")]
    second = [r for r in _requests_of(run, DecodeKind.FINAL) if window_key(r)[1] == 1][-1]
    first = next(r for r in run.requests if window_key(r)[1] == 0)
    assert second.context is None  # no text for the lent audio
    assert window_key(second)[2] == window_key(first)[2]  # the window starts where it did


def test_context_span_and_the_30_s_window_bound_the_context() -> None:
    run = drive(THREE, SessionConfig(context_s=2.0))
    assert all(r.context is None for r in run.requests)  # each start is 2.5 s after the last
    many = scripted_audio([("voice", 1.5), ("silence", 1.0)] * 16)
    run = drive(many, SessionConfig())
    finals = _requests_of(run, DecodeKind.FINAL)
    assert len(run.finals) == 16
    starts = {f.start for f in run.finals}
    for r in run.requests:
        assert r.cache_key is not None and len(r.audio) <= 30 * SR
        assert window_key(r)[2] in starts or r.context is None
    assert window_key(finals[-1])[2] > run.finals[0].start
    assert finals[-1].context and len(finals[-1].context.split()) >= 20


def test_context_stops_where_the_voice_changes() -> None:
    def part(what: str, seconds: float, f0: float = 140.0) -> np.ndarray:
        if what == "voice":
            return synth_voice(seconds, f0=f0)
        return np.zeros(round(seconds * SR), dtype=np.float32)

    # Two utterances in one voice, then one in another (a higher pitch: another spectrum).
    pieces = [("voice", 1.5, 140.0), ("silence", 1.0, 0.0)] * 2
    pieces += [("voice", 1.5, 260.0), ("silence", 1.0, 0.0)]
    audio = np.concatenate([part(what, seconds, f0) for what, seconds, f0 in pieces])
    run = drive(audio, SessionConfig())  # the gate is on by default
    f0, f1, f2 = run.finals
    finals = _requests_of(run, DecodeKind.FINAL)
    assert finals[1].context == f0.text  # same voice: in context
    assert finals[2].context is None and finals[2].cache_key is not None
    assert window_key(finals[2])[2] == f2.start  # new voice: its window starts with it
    # Without the gate the third utterance hears both earlier ones.
    ungated = _requests_of(drive(audio, SessionConfig(voice_gate=0)), DecodeKind.FINAL)
    assert ungated[2].context == f"{f0.text} {f1.text}"


def test_no_context_when_a_multilingual_model_detects_the_language() -> None:
    run = drive(THREE, SessionConfig(multilingual=True))
    assert all(r.context is None for r in run.requests)
    run = drive(THREE, SessionConfig(multilingual=True, language="en"))
    assert _requests_of(run, DecodeKind.FINAL)[-1].context


@pytest.mark.parametrize("config", [ALONE, SessionConfig()], ids=["alone", "context"])
def test_max_length_cuts_in_context_lose_and_double_nothing(config: SessionConfig) -> None:
    voice = synth_voice(14.0)
    voice[int(4.5 * SR) : int(4.5 * SR) + 320] *= 0.01
    audio = np.concatenate([voice, np.zeros(SR, dtype=np.float32)])
    run = drive(audio, replace(config, max_utterance_s=5.0))
    finals = run.finals
    for a, b in itertools.pairwise(finals):
        assert b.start == a.end
    assert [f.utterance for f in finals] == list(range(len(finals)))
    if config.context_s > 0:
        # One word per 0.5 s of voice (27 in all): none lost or said twice at a cut.
        assert len(" ".join(f.text for f in finals).split()) == 27
    # A cut's final window ends at the cut: the next utterance's audio is not in it (the
    # speculations at hushes end in their own silence).
    for r in [r for r in _requests_of(run, DecodeKind.FINAL) if not r.speculative][:-1]:
        assert r.cache_key is not None and window_key(r)[3] in {f.end for f in finals}


def test_the_last_word_of_a_partial_never_becomes_stable() -> None:
    audio = scripted_audio([("voice", 6.0), ("silence", 1.0)])
    run = drive(audio, SessionConfig(), decoder=FakeDecoder(seconds_per_word=0.3))
    shown = [p for p in run.partials if p.text]
    assert shown
    for p in shown:
        assert len(p.stable.split()) <= len(p.text.split()) - 1
    assert run.finals[0].text.startswith(shown[-1].stable)


def test_undecoded_samples_counts_from_the_oldest_utterance_without_a_final() -> None:
    session = Session(SessionConfig(partials=False), session_id="t", classifier=EnergyClassifier())
    assert session.undecoded_samples == 0
    session.feed_audio(np.zeros(SR, dtype=np.float32))
    assert session.undecoded_samples <= 0.4 * SR  # what a pre-roll may still need
    session.feed_audio(synth_voice(1.0))
    assert 0.9 * SR <= session.undecoded_samples <= 1.3 * SR
    session.feed_audio(np.zeros(SR, dtype=np.float32))
    (req,) = session.poll_requests()
    assert session.undecoded_samples >= 1.9 * SR
    session.on_result(FakeDecoder().decode_batch([req])[0])
    # The context kept for later windows does not count: it is decoded.
    assert session.undecoded_samples <= 0.4 * SR


def test_partials_and_finals_carry_their_beam_and_encoder_length() -> None:
    config = SessionConfig(partial_beam_size=3, partial_encode_s=10.0)
    run = drive(ONE, config)
    partials = [r for r in run.requests if r.kind is DecodeKind.PARTIAL]
    finals = [r for r in run.requests if r.kind is DecodeKind.FINAL]
    assert partials and finals
    assert {(r.beam_size, r.encode_min_s) for r in partials} == {(3, 10.0)}
    assert {(r.beam_size, r.encode_min_s) for r in finals} == {(5, 10.0)}
    run = drive(ONE, SessionConfig(final_encode_s=30.0))
    finals = [r for r in run.requests if r.kind is DecodeKind.FINAL]
    assert {r.encode_min_s for r in finals} == {None}  # Whisper's 30 s
    with pytest.raises(ConfigError):
        SessionConfig(partial_encode_s=31.0)
    with pytest.raises(ConfigError):
        SessionConfig(stable_agree=1)


class ConfidentNonSpeech(FakeDecoder):
    """Says "beep beep" with a confident log-probability and a no-speech probability of 0.55:
    what tiny.en does on a tone the VAD passes as speech."""

    def decode_batch(self, requests: Sequence[DecodeRequest]) -> list[DecodeResult]:
        return [
            replace(r, text="Beep beep", no_speech_prob=0.55, avg_logprob=-0.2)
            for r in super().decode_batch(requests)
        ]


def test_a_confident_decode_of_non_speech_yields_no_words() -> None:
    run = drive(ONE, SessionConfig(), decoder=ConfidentNonSpeech())
    assert not [e for e in run.events if isinstance(e, (Partial, Final)) and e.text]
    assert isinstance(run.events[-1], Done) and run.events[-1].utterances == 0


class PoliteNonSpeech(FakeDecoder):
    """Says "Thank you so much." with the given no-speech probability: what tiny.en
    says on babble now and then."""

    def __init__(self, no_speech_prob: float) -> None:
        super().__init__()
        self.no_speech_prob = no_speech_prob

    def decode_batch(self, requests: Sequence[DecodeRequest]) -> list[DecodeResult]:
        return [
            replace(r, text="Thank you so much.", no_speech_prob=self.no_speech_prob)
            for r in super().decode_batch(requests)
        ]


def test_whispers_phrase_for_non_speech_yields_no_words_unless_said_with_confidence() -> None:
    run = drive(ONE, SessionConfig(), decoder=PoliteNonSpeech(0.3))
    assert not [e for e in run.events if isinstance(e, (Partial, Final)) and e.text]
    run = drive(ONE, SessionConfig(), decoder=PoliteNonSpeech(0.05))
    assert [f.text for f in run.finals] == ["Thank you so much."]


class MumblingNonSpeech(FakeDecoder):
    """Says a sentence the model is unsure of (mean log-probability ``avg_logprob``) over
    sound it is a little unsure is speech: tiny.en on reversed-speech babble."""

    def __init__(self, avg_logprob: float) -> None:
        super().__init__()
        self.avg_logprob = avg_logprob

    def decode_batch(self, requests: Sequence[DecodeRequest]) -> list[DecodeResult]:
        said = "Yeah, that's a good one."
        return [
            replace(r, text=said, no_speech_prob=0.47, avg_logprob=self.avg_logprob)
            for r in super().decode_batch(requests)
        ]


def test_a_decode_unsure_of_speech_and_of_its_words_yields_no_words() -> None:
    run = drive(ONE, SessionConfig(), decoder=MumblingNonSpeech(-1.2))
    assert not [e for e in run.events if isinstance(e, (Partial, Final)) and e.text]
    run = drive(ONE, SessionConfig(), decoder=MumblingNonSpeech(-0.4))
    assert [f.text for f in run.finals] == ["Yeah, that's a good one."]


class DoubtfulBabble(FakeDecoder):
    """Partials say the same sentence again and again at a no-speech probability of
    ``partial_no_speech``; the final's decode finds no speech (tiny.en on babble)."""

    def __init__(self, partial_no_speech: float) -> None:
        super().__init__()
        self.partial_no_speech = partial_no_speech

    def decode_batch(self, requests: Sequence[DecodeRequest]) -> list[DecodeResult]:
        out = []
        for request, result in zip(requests, super().decode_batch(requests), strict=True):
            final = request.kind is DecodeKind.FINAL
            no_speech = 0.9 if final else self.partial_no_speech
            out.append(replace(result, text="Yeah, that's a good one.", no_speech_prob=no_speech))
        return out


def test_partials_the_model_doubts_are_speech_make_no_word_stable() -> None:
    run = drive(ONE, SessionConfig(), decoder=DoubtfulBabble(0.4))
    partials = [e for e in run.events if isinstance(e, Partial)]
    assert partials and not [p for p in partials if p.stable]
    assert not [f for f in run.finals if f.text]
    # Sure of speech, the same partials agree, and their stable words reach the final.
    run = drive(ONE, SessionConfig(), decoder=DoubtfulBabble(0.05))
    assert [e for e in run.events if isinstance(e, Partial) and e.stable]
    assert [f.text for f in run.finals if f.text]


def test_a_stream_may_trust_partials_up_to_a_higher_no_speech_bar() -> None:
    # Wyoming's rounds: partials at 0.4 (quiet or noisy speech) make words stable there.
    config = SessionConfig(stable_max_no_speech=0.5)
    run = drive(ONE, config, decoder=DoubtfulBabble(0.4))
    assert [e for e in run.events if isinstance(e, Partial) and e.stable]
    run = drive(ONE, config, decoder=DoubtfulBabble(0.6))  # above it: still none
    assert not [e for e in run.events if isinstance(e, Partial) and e.stable]
    with pytest.raises(ConfigError):
        SessionConfig(stable_max_no_speech=1.5)


def test_pausing_from_a_pause_long_enough_to_hold_partials_until_the_endpoint() -> None:
    """The engine reads ``pausing`` to keep the model free for a final that is near."""
    session = Session(ALONE, session_id="t", classifier=EnergyClassifier())
    states = []
    audio = scripted_audio([("silence", 0.5), ("voice", 1.5), ("silence", 1.0)])
    for start in range(0, len(audio), 320):  # 20 ms messages
        session.feed_audio(audio[start : start + 320])
        states.append(session.pausing)
    in_speech = states[25 + 70]  # 1.4 s into the voice
    pausing_at = states.index(True) * 0.02
    assert not states[0] and not in_speech
    assert 2.0 + 0.1 <= pausing_at <= 2.0 + 0.2  # about 120 ms into the silence
    assert not states[-1]  # the endpoint closed the utterance: no pause is pending


def test_keyterms_are_every_requests_hotwords_and_change_for_later_requests() -> None:
    config = replace(ALONE, keyterms=("Kettle", "Ilya"))
    session = Session(config, session_id="t", classifier=EnergyClassifier())
    dec = FakeDecoder()
    seen: list[str | None] = []
    audio = scripted_audio([("silence", 1.0), ("voice", 2.0), ("silence", 1.0)] * 2)
    for pos in range(0, len(audio), 320):
        if pos == 4 * SR:
            session.set_keyterms(("Pipecat",))
        session.feed_audio(audio[pos : pos + 320])
        for request in session.poll_requests():
            seen.append(request.hotwords)
            session.on_result(dec.decode_batch([request])[0])
        session.poll_events()
    assert session.keyterms == ("Pipecat",)
    assert "Kettle. Ilya." in seen and seen[-1] == "Pipecat."
    assert seen.index("Pipecat.") > len(seen) - seen[::-1].index("Kettle. Ilya.") - 1


def test_endpoint_silence_changes_for_the_pauses_after_it() -> None:
    """A 600 ms pause ends no utterance at a 1000 ms endpoint, and does at 300 ms."""
    session = Session(
        replace(ALONE, endpoint_silence_ms=1000), session_id="t", classifier=EnergyClassifier()
    )
    dec = FakeDecoder()
    finals: list[Final] = []
    audio = scripted_audio([("voice", 1.0), ("silence", 0.6)] * 2 + [("silence", 1.2)])
    for pos in range(0, len(audio), 320):
        if pos == round(1.6 * SR):
            session.set_endpoint_silence(300)
        session.feed_audio(audio[pos : pos + 320])
        for request in session.poll_requests():
            session.on_result(dec.decode_batch([request])[0])
        finals += [e for e in session.poll_events() if isinstance(e, Final)]
    assert session.config.endpoint_silence_ms == 300
    # The first pause (under 1000 ms) joined the first two voices; the second ended at 300.
    assert len(finals) == 1 and finals[0].end < round(3.0 * SR)
    with pytest.raises(ConfigError):
        session.set_endpoint_silence(5)


def test_keyterms_must_be_normalized() -> None:
    with pytest.raises(ConfigError):
        SessionConfig(keyterms=(" Kettle",))


def test_a_hush_asks_for_the_speculative_final_before_the_pause() -> None:
    config = replace(ALONE, hush_ms=60)
    run = drive(ONE, config)
    finals = [r for r in run.requests if r.kind is DecodeKind.FINAL]
    assert len(finals) == 1 and finals[0].speculative  # the endpoint found it ready
    assert run.finals[0].text == drive(ONE).finals[0].text


def test_finalize_in_a_hush_takes_the_speculative_final() -> None:
    session = Session(replace(ALONE, hush_ms=60), session_id="t", classifier=EnergyClassifier())
    dec = FakeDecoder()
    audio = scripted_audio([("silence", 1.0), ("voice", 2.0), ("silence", 0.12)])
    requests: list[DecodeRequest] = []
    events: list[Event] = []
    for pos in range(0, len(audio), 320):
        session.feed_audio(audio[pos : pos + 320])
        for request in session.poll_requests():
            requests.append(request)
            session.on_result(dec.decode_batch([request])[0])
        events += session.poll_events()
    assert requests[-1].speculative  # asked at 60 ms of silence, answered
    session.finalize()  # 120 ms into the silence: before the pause
    assert session.poll_requests() == []  # nothing more to decode
    (final,) = [e for e in session.poll_events() if isinstance(e, Final)]
    assert final.reason == "finalize" and final.text
