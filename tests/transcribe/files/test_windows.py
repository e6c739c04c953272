"""Window packing (pure) and VAD windows on real speech, silence and noise."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest
from kettle.transcribe.audio.read import RawFormat, load_audio
from kettle.transcribe.errors import ConfigError
from kettle.transcribe.files.windows import Window, WindowConfig, pack_windows, split_windows
from kettle.transcribe.types import SAMPLE_RATE

SR = SAMPLE_RATE


def test_pack_greedy_and_cover_partition() -> None:
    spans = [(0, 10), (20, 35), (40, 50), (60, 61)]
    windows = pack_windows(spans, 100, max_samples=25)
    assert [w.spans for w in windows] == [((0, 10), (20, 35)), ((40, 50), (60, 61))]
    assert all(w.num_samples <= 25 for w in windows)
    covers = [w.cover for w in windows]
    assert covers[0][0] == 0 and covers[-1][1] == 100
    assert all(a[1] == b[0] for a, b in pairwise(covers))


def test_long_span_is_cut_hard() -> None:
    windows = pack_windows([(5, 5 + 70)], 100, max_samples=30)
    assert [w.spans for w in windows] == [((5, 35),), ((35, 65),), ((65, 75),)]


def test_no_spans_no_windows() -> None:
    assert pack_windows([], 1000, 30) == []
    assert split_windows(np.zeros(0, np.float32)) == []


def test_to_source_maps_across_joined_spans() -> None:
    w = Window(0, ((SR, 2 * SR), (5 * SR, 7 * SR)), (0, 8 * SR))
    assert w.num_samples == 3 * SR
    assert w.to_source(0.0) == pytest.approx(1.0)
    assert w.to_source(0.5) == pytest.approx(1.5)
    assert w.to_source(1.0) == pytest.approx(5.0)  # the joint maps to the second span's start
    assert w.to_source(2.5) == pytest.approx(6.5)
    assert w.to_source(99.0) == pytest.approx(7.0)  # clamped to the window
    assert w.to_source(-1.0) == pytest.approx(1.0)
    audio = np.arange(8 * SR, dtype=np.float32)
    joined = w.audio(audio)
    assert len(joined) == 3 * SR
    assert joined[SR] == 5 * SR


def test_config_validation() -> None:
    with pytest.raises(ConfigError):
        WindowConfig(max_window_s=31)
    with pytest.raises(ConfigError):
        WindowConfig(vad_threshold=1.5)
    with pytest.raises(ConfigError):
        WindowConfig(min_silence_ms=-1)


def test_without_vad_fixed_windows() -> None:
    audio = np.zeros(75 * SR, np.float32)
    windows = split_windows(audio, WindowConfig(vad=False, max_window_s=30))
    assert [w.num_samples for w in windows] == [30 * SR, 30 * SR, 15 * SR]
    default = split_windows(audio, WindowConfig(vad=False))
    assert [w.num_samples for w in default] == [20 * SR, 20 * SR, 20 * SR, 15 * SR]


def test_silence_and_noise_have_no_speech() -> None:
    rng = np.random.default_rng(0)
    assert split_windows(np.zeros(20 * SR, np.float32)) == []
    noise = (0.05 * rng.standard_normal(20 * SR)).astype(np.float32)
    windows = split_windows(noise)
    assert sum(w.num_samples for w in windows) < 2 * SR


def test_real_speech_windows_fit_and_cover_the_speech(eval_clips) -> None:
    clips = [c for c in eval_clips if c.category == "librispeech"]
    parts, offsets = [], []
    pos = 0
    gap = np.zeros(3 * SR, np.float32)
    for clip in clips:
        audio = load_audio(clip.path, RawFormat() if clip.path.suffix == ".raw" else None)
        offsets.append((pos, pos + len(audio)))
        parts += [audio, gap]
        pos += len(audio) + len(gap)
    recording = np.concatenate(parts)
    windows = split_windows(recording)
    assert len(windows) >= 2
    assert all(0 < w.num_samples <= 30 * SR for w in windows)
    starts = [w.start for w in windows]
    assert starts == sorted(starts)
    # Every clip's middle is inside some window's speech.
    for a, b in offsets:
        mid = (a + b) // 2
        assert any(s <= mid < e for w in windows for s, e in w.spans)
    # Most of the 3 s gaps are dropped from the windows.
    speech = sum(w.num_samples for w in windows)
    assert speech < len(recording) - len(clips) * 1.5 * SR


def test_to_source_end_times_stay_in_the_earlier_span() -> None:
    w = Window(0, ((SR, 2 * SR), (5 * SR, 7 * SR)), (0, 8 * SR))
    assert w.to_source(1.0, end=True) == pytest.approx(2.0)
    assert w.to_source(0.0, end=True) == pytest.approx(1.0)
    assert w.to_source(1.5, end=True) == pytest.approx(5.5)
    assert w.to_source(3.0, end=True) == pytest.approx(7.0)


def test_slice_maps_window_time_to_source_spans() -> None:
    w = Window(0, ((SR, 2 * SR), (5 * SR, 7 * SR)), (0, 8 * SR))
    assert w.slice(0.5, 2.0) == [(SR + SR // 2, 2 * SR), (5 * SR, 6 * SR)]
    assert w.slice(1.0, 3.0) == [(5 * SR, 7 * SR)]
    assert w.slice(2.5, 9.0) == [(6 * SR + SR // 2, 7 * SR)]
    assert w.slice(3.0, 3.0) == []
