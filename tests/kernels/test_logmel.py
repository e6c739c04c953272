"""Log-mel kernels: equality with faster-whisper, incremental == full, argument errors."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any, cast

import numpy as np
import pytest
from faster_whisper.audio import pad_or_trim
from faster_whisper.feature_extractor import FeatureExtractor
from hypothesis import given, settings
from hypothesis import strategies as st
from kettle.kernels.logmel import IncrementalLogMel, log_mel, log_mel_batch
from kettle.kernels.melfilters import hann_window, mel_filters

# Never exact equality: the kernels and faster-whisper's extractor (and the incremental and
# the full path) group frames and products differently, so float32 rounding differs. Measured
# on these inputs (AVX2): at most 2.4e-7 from faster-whisper, 1.2e-7 incremental vs full, i.e.
# 1-2 ulps of features near 1. 1e-5 leaves 40x for another CPU's vector width, and is far
# below what a real fault moves (a shifted frame or a wrong clamp: more than 1e-2).
ATOL = 1e-5


def _speechlike(n: int, seed: int = 0) -> np.ndarray:
    """Noise with a loud burst, so the clamp (max - 8) actually bites somewhere."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n).astype(np.float32) * 0.01
    if n > 1000:
        start = n // 3
        t = np.arange(min(8000, n - start)) / 16000
        x[start : start + t.size] += (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
    return x


def _fw_model_features(audio: np.ndarray, n_mels: int = 80, n_frames: int = 3000) -> np.ndarray:
    """faster-whisper's featurization of one <= 30 s chunk (BatchedInferencePipeline)."""
    return pad_or_trim(FeatureExtractor(feature_size=n_mels)(audio)[..., :-1], n_frames)


@pytest.mark.parametrize("n_mels", [80, 128])
def test_mel_filters_equal_faster_whisper(n_mels: int) -> None:
    ref = FeatureExtractor(feature_size=n_mels).mel_filters
    ours = mel_filters(n_mels)
    assert ours.shape == (n_mels, 201) and ours.dtype == np.float32
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-9)
    assert not ours.flags.writeable and not hann_window().flags.writeable


@pytest.mark.parametrize("n_mels", [80, 128])
@pytest.mark.parametrize("length", [1, 159, 160, 201, 399, 4000, 16000 * 7 + 37, 480000])
@pytest.mark.parametrize("padding", [0, 160, 480000])
def test_log_mel_equals_feature_extractor(n_mels: int, length: int, padding: int) -> None:
    x = _speechlike(length, seed=length)
    ours = log_mel(x, n_mels=n_mels, padding=padding)
    if (length + padding) // 160 == 0:
        # faster-whisper raises (max of an empty array); no frames is the honest answer.
        assert ours.shape == (n_mels, 0)
        return
    ref = FeatureExtractor(feature_size=n_mels)(x, padding=padding)
    assert ours.shape == ref.shape == (n_mels, (length + padding) // 160)
    assert ours.dtype == np.float32
    np.testing.assert_allclose(ours, ref, rtol=0, atol=ATOL)


@pytest.mark.parametrize("length", [0, 1, 100, 200, 360, 161 * 160, 160000, 479999, 480000, 500000])
def test_batch_numpy_equals_model_featurization(length: int) -> None:
    x = _speechlike(length, seed=length)
    ours = log_mel_batch([x], backend="numpy")
    assert ours.shape == (1, 80, 3000) and ours.dtype == np.float32
    np.testing.assert_allclose(ours[0], _fw_model_features(x), rtol=0, atol=ATOL)


def test_batch_mixed_lengths_and_frame_counts() -> None:
    windows = [_speechlike(n, seed=n) for n in (16000, 0, 48000 + 80, 3)]
    ours = log_mel_batch(windows, n_mels=128, n_frames=1500)
    assert ours.shape == (4, 128, 1500)
    for got, w in zip(ours, windows, strict=True):
        np.testing.assert_allclose(got, _fw_model_features(w, 128, 1500), rtol=0, atol=ATOL)
    # Frames past a window's end are zeros (pad_or_trim pads after normalisation).
    assert not ours[0, :, 100:].any() and ours[0, :, :100].all()
    assert not ours[1].any()
    assert log_mel_batch([]).shape == (0, 80, 3000)


def test_batch_accepts_integer_and_float64_audio() -> None:
    x = _speechlike(8000)
    as64 = log_mel_batch([x.astype(np.float64)])
    np.testing.assert_allclose(as64, log_mel_batch([x]), atol=1e-6)
    ints = (x * 1000).astype(np.int16)
    np.testing.assert_allclose(
        log_mel_batch([ints])[0], _fw_model_features(ints.astype(np.float32)), atol=ATOL
    )


def test_log_clamp_is_applied() -> None:
    # Loud tone then near-silence: quiet frames sit at max - 8 before normalisation.
    x = np.zeros(32000, dtype=np.float32)
    x[:16000] = np.sin(2 * np.pi * 1000 * np.arange(16000) / 16000).astype(np.float32)
    feats = log_mel(x)
    assert np.isclose(feats.min(), feats.max() - 2.0, atol=1e-6)  # 8 / 4 after normalising


def _incremental(x: np.ndarray, cuts: list[int], n_frames: int | None, n_mels: int = 80):
    inc = IncrementalLogMel(n_mels=n_mels)
    outs = []
    start = 0
    for cut in [*sorted(cuts), x.size]:
        inc.extend(x[start:cut])
        start = cut
        outs.append(inc.features(n_frames))
    return inc, outs


@settings(max_examples=40, deadline=None)
@given(
    data=st.data(),
    length=st.integers(min_value=0, max_value=40000),
    n_frames=st.sampled_from([None, 3000, 100, 7]),
)
def test_incremental_equals_full_for_random_chunkings(
    data: st.DataObject, length: int, n_frames: int | None
) -> None:
    x = _speechlike(length, seed=length)
    cuts = data.draw(st.lists(st.integers(0, length), max_size=12))
    inc, outs = _incremental(x, cuts, n_frames)
    assert inc.n_samples == length
    # Every intermediate result matches a full recompute of the prefix seen at that point.
    for cut, got in zip([*sorted(cuts), length], outs, strict=True):
        want = (
            log_mel_batch([x[:cut]])[0, :, : cut // 160]
            if n_frames is None
            else log_mel_batch([x[:cut]], n_frames=n_frames)[0]
        )
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=0, atol=ATOL)


def test_incremental_running_maximum_decreasing_tail() -> None:
    # A loud sample at the very end moves the max; once more audio arrives, the frames around
    # it change (their padding is gone) and the maximum must follow the new values.
    x = _speechlike(20000, seed=3)
    x[12000] = 1.0
    inc = IncrementalLogMel()
    inc.extend(x[:12001])
    np.testing.assert_allclose(inc.features(), log_mel_batch([x[:12001]])[0], atol=ATOL)
    inc.extend(x[12001:])
    np.testing.assert_allclose(inc.features(), log_mel_batch([x])[0], atol=ATOL)


def test_incremental_long_utterance_128_mels_and_reset() -> None:
    x = _speechlike(16000 * 30, seed=9)
    inc, outs = _incremental(x, list(range(8000, x.size, 8000)), 3000, n_mels=128)
    np.testing.assert_allclose(outs[-1], _fw_model_features(x, 128), rtol=0, atol=ATOL)
    assert inc.n_frames == 3000
    inc.reset()
    assert inc.n_samples == 0 and not inc.features().any()
    inc.extend(x[:5000])
    want = log_mel_batch([x[:5000]], n_mels=128)[0, :, :31]
    np.testing.assert_allclose(inc.features(None), want, atol=ATOL)


def test_incremental_beyond_n_frames_trims() -> None:
    x = _speechlike(16000 * 31, seed=5)
    inc = IncrementalLogMel()
    inc.extend(x)
    np.testing.assert_allclose(inc.features(), _fw_model_features(x), atol=ATOL)
    assert inc.features(None).shape == (80, 3100)


@pytest.mark.slow
def test_equal_to_faster_whisper_on_eval_clips(eval_clips) -> None:
    sf = pytest.importorskip("soundfile")
    from kettle.kernels.pcm import mix_down
    from kettle.kernels.resample import resample

    clips = [c for c in eval_clips if c.path.suffix in (".flac", ".wav") and c.duration_s < 30]
    # Two native 16 kHz clips, plus one 8 kHz and one stereo 44.1 kHz clip through our resampler.
    chosen = [c for c in clips if c.sample_rate == 16000][:2]
    chosen += [c for c in clips if c.sample_rate == 8000][:1]
    chosen += [c for c in clips if c.channels == 2][:1]
    assert len(chosen) >= 2
    windows = []
    for clip in chosen:
        data, rate = sf.read(clip.path, dtype="float32", always_2d=True)
        mono = mix_down(data.reshape(-1), data.shape[1])
        windows.append(resample(mono, rate)[:480000])
    batch = log_mel_batch(windows)
    for window, got in zip(windows, batch, strict=True):
        want = _fw_model_features(window)
        np.testing.assert_allclose(got, want, rtol=0, atol=ATOL)
        np.testing.assert_allclose(log_mel(window), FeatureExtractor()(window), rtol=0, atol=ATOL)
        _, outs = _incremental(window, list(range(8000, window.size, 8000)), 3000)
        np.testing.assert_allclose(outs[-1], want, rtol=0, atol=ATOL)


# cast(Any, ...): a wrong type on purpose, which the kernel refuses at run time.
@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: log_mel(np.zeros((2, 100), np.float32)), "1-D"),
        (lambda: log_mel(cast(Any, [0.0, 1.0])), "numpy array"),
        (lambda: log_mel(np.zeros(10, np.complex64)), "real numbers"),
        (lambda: log_mel(np.array([0.0, np.nan], np.float32)), "NaN"),
        (lambda: log_mel(np.zeros(0, np.float32), padding=0), "empty"),
        (lambda: log_mel(np.zeros(10, np.float32), padding=-1), "padding"),
        (lambda: log_mel(np.zeros(10, np.float32), n_mels=0), "n_mels"),
        (lambda: log_mel_batch([np.zeros(10, np.float32)], n_frames=0), "n_frames"),
        (lambda: log_mel_batch([np.zeros(10, np.float32)], backend="jax"), "backend"),
        (lambda: log_mel_batch([np.zeros(10, np.float32)], device="tpu"), "device"),
        (lambda: log_mel_batch([np.zeros(10, np.float32)], backend="numpy", device="cuda"), "CPU"),
        (lambda: log_mel_batch([np.zeros((2, 2), np.float32)]), r"windows\[0\]"),
        (lambda: IncrementalLogMel(n_mels=1000), "n_mels"),
        (lambda: IncrementalLogMel().extend(np.zeros((3, 1), np.float32)), "1-D"),
        (lambda: IncrementalLogMel().features(-3), "n_frames"),
    ],
)
def test_bad_arguments_raise_value_error(call: Callable[[], object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()


def test_bad_extend_loses_nothing() -> None:
    inc = IncrementalLogMel()
    inc.extend(np.ones(500, np.float32) * 0.1)
    with pytest.raises(ValueError):
        inc.extend(np.array([np.inf], np.float32))
    assert inc.n_samples == 500


def test_cpu_path_never_imports_torch() -> None:
    code = (
        "import sys, numpy as np\n"
        "from kettle.kernels import logmel, pcm, resample\n"
        "logmel.log_mel_batch([np.zeros(4000, np.float32)], backend='auto', device='cpu')\n"
        "i = logmel.IncrementalLogMel(); i.extend(np.zeros(4000, np.float32)); i.features()\n"
        "pcm.PcmStreamDecoder('pcm_s16le', 8000, 2).feed(b'\\x00' * 400)\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_without_torch_auto_falls_back_and_torch_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kettle.kernels import logmel

    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    monkeypatch.delitem(sys.modules, "kettle.kernels._torch_logmel", raising=False)
    logmel._load_torch_backend.cache_clear()
    try:
        x = [_speechlike(4000)]
        np.testing.assert_array_equal(
            log_mel_batch(x, backend="auto", device="cuda"), log_mel_batch(x, backend="numpy")
        )
        with pytest.raises(ImportError, match=r"kettle\[torch\]"):
            log_mel_batch(x, backend="torch")
    finally:
        logmel._load_torch_backend.cache_clear()


def test_incremental_computes_each_final_frame_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from kettle.kernels import logmel

    computed: list[int] = []
    original = logmel._log_frames

    def counting(padded: np.ndarray, n_frames: int, filters: np.ndarray) -> np.ndarray:
        computed.append(n_frames)
        return original(padded, n_frames, filters)

    monkeypatch.setattr(logmel, "_log_frames", counting)
    x = _speechlike(16000 * 20, seed=11)
    inc = IncrementalLogMel()
    calls = 0
    for start in range(0, x.size, 8000):  # 0.5 s steps, as the adapter's partials do
        inc.extend(x[start : start + 8000])
        inc.features()
        calls += 1
    total = x.size // 160 + 1  # STFT frames of the whole buffer (before the model's drop)
    # Every final frame once, plus at most three trailing frames per call.
    assert sum(computed) <= total + 3 * calls
    assert max(computed) <= 8000 // 160 + 3
    monkeypatch.setattr(logmel, "_log_frames", original)
    np.testing.assert_allclose(inc.features(), log_mel_batch([x])[0], atol=ATOL)


@settings(max_examples=10, deadline=None)
@given(data=st.data(), length=st.integers(min_value=0, max_value=20000))
def test_incremental_128_mels_random_chunkings(data: st.DataObject, length: int) -> None:
    x = _speechlike(length, seed=length + 1)
    cuts = data.draw(st.lists(st.integers(0, length), max_size=6))
    _, outs = _incremental(x, cuts, 3000, n_mels=128)
    np.testing.assert_allclose(outs[-1], log_mel_batch([x], n_mels=128)[0], rtol=0, atol=ATOL)
