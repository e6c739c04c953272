"""benchmarks/_ttfs_turns.py: who speaks in an eval file, clips joined into one turn with
short pauses, and the turns chosen round-robin over the length buckets."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from _ttfs_turns import GAP_S, LEAD_S, SR, Clip, Turn, bucket_of, choose, join, speaker_of


def clip(name: str, seconds: float, speech: tuple[float, float], speaker: str = "a") -> Clip:
    audio = np.full(round(seconds * SR), 0.1, np.float32)
    return Clip(name, audio, name.upper(), speaker, *speech)


def turn(name: str, speech_s: float, speaker: str) -> Turn:
    return Turn(name, np.zeros(SR, np.float32), "", 0.5, 0.5 + speech_s, (name,), speaker)


@pytest.mark.parametrize(
    ("file", "category", "speaker"),
    [
        ("audio/ls__1089-134686-0000.flac", "librispeech", "librispeech-1089"),
        ("audio/ls__1272-128104-0001_forte_test_audio_1.flac", "librispeech", "librispeech-1272"),
        ("audio/lv__sense_and_sensibility_01_austen_64kb-0870.wav", "librivox", "librivox"),
        ("audio/arctic__cmu_arctic_us_axb_a0005.wav", "arctic_accent", "cmu_arctic_us_axb"),
        ("audio/ps__cards_003.wav", "command_short", "pocketsphinx-cards"),
        ("audio/fleurs__fleurs-en-004.ogg", "fleurs", "fleurs-en-004"),  # each its own
    ],
)
def test_speaker_of(file: str, category: str, speaker: str) -> None:
    assert speaker_of(file, category) == speaker


def test_a_clip_alone_keeps_its_audio_after_the_lead() -> None:
    one = join([clip("x", 2.0, (0.3, 1.8))])
    assert len(one.audio) == round((LEAD_S + 2.0) * SR)
    assert one.speech_start_s == pytest.approx(LEAD_S + 0.3)
    assert one.speech_end_s == pytest.approx(LEAD_S + 1.8)
    assert one.reference == "X"


def test_joined_clips_meet_at_their_speech_with_the_gap_between() -> None:
    both = join([clip("x", 2.0, (0.3, 1.5)), clip("y", 3.0, (0.6, 2.5))])
    first_speech = 1.5 - 0.3
    second_speech = 2.5 - 0.6
    assert both.speech_start_s == pytest.approx(LEAD_S + 0.3)
    assert both.speech_s == pytest.approx(first_speech + GAP_S + second_speech, abs=1e-3)
    assert both.reference == "X Y" and both.clips == ("x", "y") and both.speaker == "a"
    # The last clip keeps its tail: 0.5 s after its speech.
    assert len(both.audio) / SR == pytest.approx(both.speech_end_s + 0.5, abs=1e-3)


@pytest.mark.parametrize(("seconds", "bucket"), [(1.2, "<3 s"), (3.0, "3-6 s"), (25.0, "10-20 s")])
def test_bucket_of(seconds: float, bucket: str) -> None:
    assert bucket_of(seconds) == bucket


def test_choose_goes_round_the_buckets_then_the_speakers_then_cycles() -> None:
    pool = [turn("s1", 2, "a"), turn("s2", 2, "a"), turn("s3", 2, "b"), turn("l1", 12, "a")]
    names = [t.name for t in choose(pool, 6)]
    assert names == ["s1", "l1", "s3", "s2", "s1#2", "l1#2"]
