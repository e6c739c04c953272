"""A long utterance's partial waits while Silero hears no speech at its window's end
(end_check.py), so the speculative final does not queue behind it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from kettle.streaming.core.agreement import Agreement
from kettle.streaming.core.audio_buffer import AudioBuffer
from kettle.streaming.core.context import Context
from kettle.streaming.core.end_check import (
    LOOK_SAMPLES,
    MAX_HOLD_SAMPLES,
    TAIL_CHUNKS,
    EndCheck,
    silero_probe,
)
from kettle.streaming.core.planner import Plan
from kettle.streaming.core.session import Session, SessionConfig
from kettle.streaming.core.utterances import Utterance
from kettle.streaming.core.vad import EnergyClassifier
from kettle.transcribe.audio.read import load_audio
from kettle.transcribe.errors import ConfigError
from kettle.transcribe.model.fake import FakeDecoder
from kettle.transcribe.types import DecodeKind, DecodeRequest

from tests.streaming.core.conftest import ALONE, SR, play

LONG = 6 * SR
# No tail windows: their check that a final fell short reads Silero too (tail.py).
CHECKED = SessionConfig(**{**ALONE.__dict__, "partial_end_check_s": 6.0, "tail_window_s": None})


class Probe:
    """A fake Silero: every chunk reads ``speech`` (a probability); records its inputs."""

    def __init__(self, speech: float) -> None:
        self.speech = speech
        self.calls: list[np.ndarray] = []

    def __call__(self, audio: np.ndarray) -> np.ndarray:
        assert audio.shape[0] % 512 == 0
        self.calls.append(audio)
        return np.full(audio.shape[0] // 512, self.speech, np.float32)


def voiced(seconds: float, *, seed: int = 0) -> np.ndarray:
    """Noise loud enough for the energy classifier to call every frame voiced."""
    return np.random.default_rng(seed).normal(0, 0.3, int(seconds * SR)).astype(np.float32)


def requests_of(session: Session, audio: np.ndarray) -> list[tuple[DecodeKind, int]]:
    """Play ``audio`` into ``session`` (``play``: 20 ms chunks, then stop, each request decoded
    at once by a fake model): (kind, window end) of each request."""
    out: list[tuple[DecodeKind, int]] = []

    def seen(request: DecodeRequest) -> None:
        assert isinstance(request.cache_key, tuple)
        out.append((request.kind, int(request.cache_key[3])))

    play(session, FakeDecoder(), audio, seen)
    return out


def partial_ends(requests: list[tuple[DecodeKind, int]]) -> list[int]:
    return [end for kind, end in requests if kind is DecodeKind.PARTIAL]


def test_a_long_utterances_partials_wait_while_silero_hears_no_speech() -> None:
    quiet, loud = Probe(0.1), Probe(0.9)
    audio = voiced(9.0)
    held = requests_of(Session(CHECKED, classifier=EnergyClassifier(), speech_probe=quiet), audio)
    asked = requests_of(Session(CHECKED, classifier=EnergyClassifier(), speech_probe=loud), audio)
    # Up to 6 s into the utterance both ask the same partials; after it, where the probe
    # hears no speech, each partial waits MAX_HOLD_SAMPLES and then goes anyway.
    early = [e for e in partial_ends(asked) if e < LONG]
    assert early and [e for e in partial_ends(held) if e < LONG] == early
    late_held = [e for e in partial_ends(held) if e >= LONG]
    late_asked = [e for e in partial_ends(asked) if e >= LONG]
    assert len(late_held) >= 2 and len(late_held) < len(late_asked)
    assert late_held[0] >= late_asked[0] + MAX_HOLD_SAMPLES
    assert min(np.diff(late_held)) >= min(np.diff(late_asked)) + MAX_HOLD_SAMPLES - 320
    assert [k for k, _ in held if k is DecodeKind.FINAL]  # the final comes either way
    assert quiet.calls and loud.calls
    assert all(len(c) == LOOK_SAMPLES for c in quiet.calls + loud.calls)


def test_the_check_reads_the_last_audio_of_long_utterances_only() -> None:
    audio = voiced(8.0, seed=1)
    buf = AudioBuffer()
    buf.append(audio)
    probe = Probe(0.3)
    check = EndCheck(LONG, probe)
    assert check.speech_ended(7 * SR, 7 * SR + 100, buf)
    np.testing.assert_array_equal(
        probe.calls[-1], audio[7 * SR + 100 - LOOK_SAMPLES : 7 * SR + 100]
    )
    assert not check.speech_ended(LONG - 1, 7 * SR, buf)  # too short: Silero not asked
    assert len(probe.calls) == 1
    probe.speech = 0.5  # Silero's own threshold counts as speech
    assert not check.speech_ended(LONG, 7 * SR, buf)


def partial(end: int) -> Plan:
    utt = Utterance(0, 0, Agreement(), SessionConfig().utterance_settings())
    return Plan(utt, DecodeKind.PARTIAL, 0, end, Context(0, (), ""), "")


def test_a_wait_reads_silero_a_chunk_at_a_time_and_ends_after_max_hold() -> None:
    buf = AudioBuffer()
    buf.append(voiced(8.0, seed=4))
    probe = Probe(0.1)
    check = EndCheck(LONG, probe, max_hold=3000)
    first = 6 * SR + 320
    waits = [check.holds(partial(first + k * 320), buf) for k in range(12)]
    # Held from the first ask until 3000 samples later (10 asks of 320), then let go.
    assert waits == [True] * 10 + [False, True]
    assert len(probe.calls) == 7  # asks 0, 2, 4, 6, 8, 10 and 11: 512 samples apart while waiting
    probe.speech = 0.9
    assert not check.holds(partial(first + 13 * 320), buf)  # speech back: the wait is over
    final = Plan(partial(7 * SR).utterance, DecodeKind.FINAL, 0, 7 * SR, Context(0, (), ""), "")
    assert not check.holds(final, buf)


def test_no_check_when_switched_off() -> None:
    probe = Probe(0.0)
    config = SessionConfig(**{**ALONE.__dict__, "partial_end_check_s": None, "tail_window_s": None})
    session = Session(config, classifier=EnergyClassifier(), speech_probe=probe)
    assert [e for e in partial_ends(requests_of(session, voiced(8.0, seed=2))) if e > LONG]
    assert not probe.calls


def test_a_bad_setting_is_refused() -> None:
    with pytest.raises(ConfigError, match="partial_end_check_s"):
        SessionConfig(partial_end_check_s=-1.0)


def test_silero_hears_speech_in_speech_and_none_in_room_hush() -> None:
    jfk = load_audio(Path(__file__).parents[2] / "data" / "jfk.flac")
    whole = silero_probe(jfk[: len(jfk) // 512 * 512])
    end = (int(np.argmax(whole)) + 1) * 512  # the end of the chunk Silero is surest of
    end = max(end, LOOK_SAMPLES)
    assert silero_probe(jfk[end - LOOK_SAMPLES : end])[-TAIL_CHUNKS:].max() >= 0.5
    hush = np.random.default_rng(3).normal(0, 1e-4, LOOK_SAMPLES).astype(np.float32)
    assert silero_probe(hush)[-TAIL_CHUNKS:].max() < 0.5
