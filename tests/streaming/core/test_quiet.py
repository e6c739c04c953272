"""Silero's end of speech also asks for the speculative final (quiet.py), while webrtcvad (here
the energy classifier) still hears voice: partials wait while it stands, the final uses it,
and Silero hearing speech again, or webrtcvad not ending the utterance in time, voids it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from kettle.streaming.core.events import Final
from kettle.streaming.core.quiet import (
    CHUNK_SAMPLES,
    HOLD_SAMPLES,
    QUIET_CHUNKS,
    QuietTracker,
    SileroStream,
)
from kettle.streaming.core.session import Session, SessionConfig
from kettle.streaming.core.speculation import Speculation
from kettle.streaming.core.vad import EnergyClassifier
from kettle.transcribe.audio.read import load_audio
from kettle.transcribe.errors import ConfigError
from kettle.transcribe.model.fake import FakeDecoder
from kettle.transcribe.types import DecodeRequest, Purpose

from tests.streaming.core.conftest import ALONE, SR, play

CONFIG = replace(ALONE, quiet_chunks=QUIET_CHUNKS)
TAIL = CONFIG.planner_config().final_tail


class Chunks:
    """A fake streaming Silero: speech in the chunks that lie inside ``spans`` (samples)."""

    def __init__(self, *spans: tuple[int, int]) -> None:
        self.spans = spans
        self.read = 0

    def __call__(self, chunk: np.ndarray) -> float:
        assert chunk.shape[0] == CHUNK_SAMPLES
        start, self.read = self.read, self.read + CHUNK_SAMPLES
        return 0.9 if any(a <= start and self.read <= b for a, b in self.spans) else 0.1


def voiced(seconds: float, *, seed: int = 0) -> np.ndarray:
    """Noise the energy classifier calls voiced in every frame (speech, then breath)."""
    return np.random.default_rng(seed).normal(0, 0.3, int(seconds * SR)).astype(np.float32)


def last_chunk_end(until: int) -> int:
    return until // CHUNK_SAMPLES * CHUNK_SAMPLES


def run(probe: Chunks, audio: np.ndarray) -> tuple[list[DecodeRequest], list[Final], Session]:
    session = Session(CONFIG, classifier=EnergyClassifier(), chunk_probe=probe)
    requests: list[DecodeRequest] = []
    events = play(session, FakeDecoder(), audio, requests.append)
    return requests, [e for e in events if isinstance(e, Final)], session


def window_end(request: DecodeRequest) -> int:
    assert isinstance(request.cache_key, tuple)
    return int(request.cache_key[3])


def test_silero_end_asks_the_speculative_final_and_the_final_uses_it() -> None:
    speech_end = last_chunk_end(2 * SR)
    requests, finals, _ = run(Chunks((0, 2 * SR)), voiced(2.8))
    speculative = [r for r in requests if r.purpose is Purpose.SPECULATIVE]
    assert len(speculative) == 1
    spec = speculative[0]
    assert window_end(spec) == speech_end + TAIL
    # Asked once QUIET_CHUNKS quiet chunks had been heard, with nothing after it but the
    # final: partials wait while Silero's end stands, and the stop's final is that decode.
    after = requests[requests.index(spec) + 1 :]
    assert after == []
    assert len(finals) == 1 and finals[0].text


def test_the_speculation_is_asked_no_sooner_than_quiet_chunks_after_the_end() -> None:
    speech_end = last_chunk_end(2 * SR)
    session = Session(CONFIG, classifier=EnergyClassifier(), chunk_probe=Chunks((0, 2 * SR)))
    audio = voiced(2.8)
    asked_at = None
    for i in range(0, audio.shape[0], 320):
        session.feed_audio(audio[i : i + 320])
        for request in session.poll_requests():
            if request.purpose is Purpose.SPECULATIVE and asked_at is None:
                asked_at = i + 320
            session.on_result(FakeDecoder().decode_batch([request])[0])
    assert asked_at is not None
    assert speech_end + QUIET_CHUNKS * CHUNK_SAMPLES <= asked_at
    assert asked_at <= speech_end + (QUIET_CHUNKS + 1) * CHUNK_SAMPLES + 320


def test_speech_heard_again_voids_it_and_the_final_is_decoded_anew() -> None:
    speech_end = last_chunk_end(2 * SR)
    probe = Chunks((0, 2 * SR), (int(2.4 * SR), 3 * SR))
    requests, finals, _ = run(probe, voiced(3.4))
    speculative = [r for r in requests if r.purpose is Purpose.SPECULATIVE]
    assert window_end(speculative[0]) == speech_end + TAIL
    later = requests[requests.index(speculative[0]) + 1 :]
    assert any(r.purpose is Purpose.PARTIAL for r in later)  # partials go on
    # The stop's final covers the speech heard after: a later speculation or a final.
    assert max(window_end(r) for r in later if r.kind.name == "FINAL") > 3 * SR
    assert len(finals) == 1


def test_webrtcvad_resuming_leaves_it_standing() -> None:
    # Silero's end at 1.5 s; the classifier hears voice to 2 s, a short silence (its pause),
    # then voice again (breath, noise) that Silero hears as none.
    gap = np.zeros(int(0.15 * SR), np.float32)
    audio = np.concatenate([voiced(2.0), gap, voiced(0.5, seed=1)])
    requests, finals, _ = run(Chunks((0, int(1.5 * SR))), audio)
    speculative = [r for r in requests if r.purpose is Purpose.SPECULATIVE]
    assert [window_end(r) for r in speculative] == [last_chunk_end(int(1.5 * SR)) + TAIL]
    assert requests[-1] is speculative[0] and len(finals) == 1


def test_it_lapses_when_webrtcvad_does_not_end_the_utterance_in_time() -> None:
    speech_end = last_chunk_end(SR)
    requests, finals, _ = run(Chunks((0, SR)), voiced(1.0 + HOLD_SAMPLES / SR + 1.0))
    speculative = [r for r in requests if r.purpose is Purpose.SPECULATIVE]
    assert [window_end(r) for r in speculative] == [speech_end + TAIL]  # one try per end
    later = requests[requests.index(speculative[0]) + 1 :]
    partials = [r for r in later if r.purpose is Purpose.PARTIAL]
    assert partials and window_end(partials[0]) > speech_end + HOLD_SAMPLES
    assert later[-1].purpose is Purpose.FINAL and len(finals) == 1


def test_a_quiet_speculation_matches_any_end_up_to_its_target() -> None:
    spec = Speculation()
    spec.request(window_end=1000, target=5000, speech_end=700, quiet=True)
    assert spec.matches(700, speech_end=400) and spec.matches(5000, speech_end=4800)
    assert not spec.matches(600, speech_end=600) and not spec.matches(5001, speech_end=4800)
    spec.invalidate()
    assert not spec.quiet and spec.quiet_tried == 700 and not spec.matches(700, speech_end=700)
    plain = Speculation()
    plain.request(window_end=1000, target=5000, speech_end=700)
    assert plain.matches(900, speech_end=700) and not plain.matches(900, speech_end=800)


def test_the_tracker_reports_an_end_after_enough_quiet_chunks() -> None:
    tracker = QuietTracker(3, Chunks((0, 4 * CHUNK_SAMPLES)))
    tracker.feed(np.zeros(4 * CHUNK_SAMPLES + 100, np.float32))  # a part-chunk waits
    assert tracker.ended(since=0) is None and tracker.speech_end == 4 * CHUNK_SAMPLES
    tracker.feed(np.zeros(2 * CHUNK_SAMPLES, np.float32))
    assert tracker.ended(since=0) is None  # two quiet chunks
    tracker.feed(np.zeros(CHUNK_SAMPLES - 100, np.float32))
    assert tracker.ended(since=0) == 4 * CHUNK_SAMPLES
    assert tracker.ended(since=4 * CHUNK_SAMPLES) is None  # no speech after that point
    assert tracker.spoke_after(0) and not tracker.spoke_after(4 * CHUNK_SAMPLES)


def test_a_session_with_its_own_classifier_and_no_probe_has_no_tracker() -> None:
    requests, _, _ = run(Chunks(), voiced(0.1))  # a probe given: tracked, nothing heard
    assert not [r for r in requests if r.purpose is Purpose.SPECULATIVE]
    session = Session(CONFIG, classifier=EnergyClassifier())
    assert session._quiet is None
    assert Session(replace(CONFIG, quiet_chunks=None), chunk_probe=Chunks())._quiet is None


def test_a_bad_setting_is_refused() -> None:
    with pytest.raises(ConfigError, match="quiet_chunks"):
        SessionConfig(quiet_chunks=0)


def test_silero_as_a_stream_hears_jfks_end_soon_after_it() -> None:
    jfk = load_audio(Path(__file__).parents[2] / "data" / "jfk.flac")
    tracker = QuietTracker(QUIET_CHUNKS, SileroStream())
    ends = []
    audio = np.concatenate([jfk, np.zeros(SR, np.float32)])
    for i in range(0, audio.shape[0], 320):
        tracker.feed(audio[i : i + 320])
        end = tracker.ended(since=0)
        if end is not None and (not ends or ends[-1][0] != end):
            ends.append((end, i + 320))
    # JFK's last word ends about 10.6 s in (Silero, read whole): heard within 0.2 s of it,
    # at most (QUIET_CHUNKS + 1) chunks later; and pauses between phrases are heard too.
    last_end, heard_at = ends[-1]
    assert 10.3 * SR <= last_end <= 10.9 * SR
    assert heard_at - last_end <= (QUIET_CHUNKS + 1) * CHUNK_SAMPLES
    assert len(ends) >= 2
