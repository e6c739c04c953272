"""The Whisper adapter with the real tiny.en model on real speech (and generated non-speech)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
from kettle.transcribe.errors import ConfigError, DecodeError
from kettle.transcribe.model import decoding
from kettle.transcribe.model.adapter import ModelConfig, WhisperAdapter
from kettle.transcribe.model.decoding import Hypothesis, Thresholds
from kettle.transcribe.model.features import FeatureComputer
from kettle.transcribe.types import SAMPLE_RATE, DecodeKind, DecodeRequest, encoder_frames

from tests.conftest import TOKEN_FLIP_WORD_EDITS, word_edits
from tests.transcribe.conftest import EncoderCalls

P, F = DecodeKind.PARTIAL, DecodeKind.FINAL
# Log-mel features of one window by two paths (the kernels and faster-whisper's extractor,
# incremental and in full) agree to 1-2 float32 ulps here (at most 2.4e-7 measured on these
# tests' inputs, AVX2). FFT rounding is relative to a frame's peak, so bands far below it
# (kept down to peak - 8 in log10) carry larger relative error, and another SIMD width or
# FFT grouping moves it: 1e-4 is ~400x what was measured, while a real fault (a stale or
# shifted frame, a wrong clamp maximum) moves features by more than 1e-2.
FEATURE_ATOL = 1e-4
# Tests below rely on the order: "He hoped there would be stew...", "Stuff it into you...",
# "He could wait no longer", "For a full hour he had paced up and down...".
SPEECH = (
    "ls__1089-134686-0000.flac",
    "ls__1089-134686-0001.flac",
    "ls__1089-134691-0000.flac",
    "ls__1089-134691-0001.flac",
)


@pytest.fixture(scope="module")
def speech(eval_clip: Callable[[str], Any]) -> list[tuple[np.ndarray, str]]:
    """Four LibriSpeech utterances (16 kHz mono FLAC) of 2-11 s with their references."""
    clips = [eval_clip(name) for name in SPEECH]
    out = []
    for clip in clips:
        audio, rate = sf.read(Path(clip.path), dtype="float32")
        assert rate == SAMPLE_RATE and audio.ndim == 1
        out.append((audio, clip.reference))
    return out


def _noise(kind: str, seconds: float, amplitude: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = int(seconds * SAMPLE_RATE)
    white = rng.standard_normal(n)
    if kind == "white":
        x = white
    else:  # pink: 1/f power
        spectrum = np.fft.rfft(white)
        f = np.arange(spectrum.shape[0], dtype=np.float64)
        f[0] = 1.0
        x = np.fft.irfft(spectrum / np.sqrt(f), n)
    return (amplitude * x / np.abs(x).max()).astype(np.float32)


# -- configuration and pure rules (fast) ---------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"device": "tpu"},
        {"compute_type": "int3"},
        {"threads": -1},
        {"replicas": 0},
        {"beam_size": 0},
        {"partial_max_new_tokens": 0},
        {"partial_max_new_tokens": 500},
        {"temperatures": ()},
        {"temperatures": (0.4, 0.2)},
        {"temperatures": (0.0, 3.0)},
        {"no_speech_threshold": 1.5},
        {"encoder_cache_size": -1},
        {"encoder_cache_bytes": -1},
        {"name": ""},
    ],
)
def test_model_config_rejects_bad_values(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        ModelConfig(**kwargs)


def test_model_config_resolves_auto() -> None:
    cfg = ModelConfig(temperatures=[0.0, 0.5])  # type: ignore[arg-type,unused-ignore]
    assert cfg.temperatures == (0.0, 0.5)
    assert cfg.resolved_compute_type("cpu") == "int8"
    assert cfg.resolved_compute_type("cuda") == "int8_float16"
    assert ModelConfig(device="cpu").resolved_device() == "cpu"


def test_model_config_layout_has_replicas_on_a_cpu_only() -> None:
    assert ModelConfig(threads=1, replicas=2).layout("cpu") == (2, 1)
    assert ModelConfig().layout("cpu") == (1, 0)  # one replica, CTranslate2's threads
    assert ModelConfig(threads=4, replicas=2).layout("cuda") == (1, 4)


def _hyp(text: str = "hello", lp: float = -0.3, ns: float = 0.1, cr: float = 1.2) -> Hypothesis:
    return Hypothesis((1,), text, lp, ns, cr, 0.0)


def test_fallback_and_silence_rules() -> None:
    th = Thresholds(no_speech=0.6, log_prob=-1.0, compression_ratio=2.4)
    assert not decoding.needs_fallback(_hyp(), th)
    assert decoding.needs_fallback(_hyp(cr=3.0), th)
    assert decoding.needs_fallback(_hyp(lp=-1.5), th)
    silent = _hyp(lp=-1.5, ns=0.9)
    assert decoding.is_silence(silent, th) and not decoding.needs_fallback(silent, th)
    assert decoding.suppressed(_hyp("Thank you.", lp=-0.5, ns=0.8), th)
    assert not decoding.suppressed(_hyp("Thank you.", lp=-0.5, ns=0.2), th)
    best = decoding.pick_after_fallback(
        [_hyp("a", lp=-1.2), _hyp("b", lp=-0.2, cr=9.0), _hyp("c", lp=-1.1)],
        lambda h: decoding.too_repetitive(h, th),
    )
    assert best.text == "c"  # the most likely of those that are not too repetitive
    assert decoding.is_negligible(np.zeros(1600, np.float32))
    assert decoding.is_negligible(np.zeros(0, np.float32))


def test_kernel_features_match_faster_whisper() -> None:
    fast = FeatureComputer(80)
    reference = FeatureComputer(80)
    reference._kernels = None  # faster-whisper's FeatureExtractor
    windows = [_noise("pink", s, 0.3, seed=i) for i, s in enumerate((0.5, 7.3, 30.0))]
    got, want = fast.batch(windows), reference.batch(windows)
    assert got.shape == want.shape == (3, 80, 3000)
    np.testing.assert_allclose(got, want, rtol=0, atol=FEATURE_ATOL)


def test_incremental_features_match_full_computation() -> None:
    fc = FeatureComputer(80)
    audio = _noise("pink", 3.0, 0.3)
    for n in (8000, 16000, 16160, 48000):
        inc = fc.stream("s", audio[:n])
        full = fc.batch([audio[:n]])[0]
        if inc is None:
            pytest.skip("kettle.kernels.logmel not available")
        np.testing.assert_allclose(inc, full, rtol=0, atol=FEATURE_ATOL)
    assert fc.incremental_hits == 3
    other = _noise("white", 2.0, 0.3, seed=1)  # not an extension: restarts the state
    restarted = fc.stream("s", other)
    assert restarted is not None  # the kernel is available: the loop above did not skip
    np.testing.assert_allclose(restarted, fc.batch([other])[0], atol=FEATURE_ATOL)
    assert fc.incremental_hits == 3


# -- the real model --------------------------------------------------------------------------


@pytest.mark.slow
def test_finals_in_one_batch_are_accurate_with_word_times(
    tiny_decoder: WhisperAdapter, speech: list[tuple[np.ndarray, str]], wer_fn: Any
) -> None:
    requests = [
        DecodeRequest(audio=a, kind=F, request_id=f"r{i}", word_timestamps=True)
        for i, (a, _) in enumerate(speech)
    ]
    results = tiny_decoder.decode_batch(requests)
    assert [r.request_id for r in results] == ["r0", "r1", "r2", "r3"]
    assert wer_fn([ref for _, ref in speech], [r.text for r in results]) <= 0.06
    for (audio, _), r in zip(speech, results, strict=True):
        assert r.kind is F and r.error is None and r.language == "en"
        assert r.tokens and r.avg_logprob > -1.0 and r.no_speech_prob < 0.6
        duration = audio.shape[0] / SAMPLE_RATE
        assert r.words, r.text
        assert "".join(w.word for w in r.words).strip() == r.text
        starts = [w.start for w in r.words]
        assert starts == sorted(starts)
        for prev, word in zip(r.words, r.words[1:], strict=False):
            assert prev.end <= word.start + 1e-6
        assert all(0.0 <= w.start <= w.end <= duration for w in r.words)
        assert all(0.0 <= w.probability <= 1.0 for w in r.words)


@pytest.mark.slow
def test_partials_greedy_batched_match_one_by_one(
    tiny_decoder: WhisperAdapter, speech: list[tuple[np.ndarray, str]], wer_fn: Any
) -> None:
    batched = tiny_decoder.decode_batch(
        [DecodeRequest(audio=a, kind=P, request_id=i) for i, (a, _) in enumerate(speech)]
    )
    single = [
        tiny_decoder.decode_batch([DecodeRequest(audio=a, kind=P, cache_key=("solo", i))])[0]
        for i, (a, _) in enumerate(speech)
    ]
    assert [r.request_id for r in batched] == [0, 1, 2, 3]
    # A batch of four and a batch of one are different shapes for the model, which may round
    # a token the other way (the CPU decides): each text within a flipped token of its
    # single decode. The four utterances share no words, so a mixed-up row fails by far.
    for b, s in zip(batched, single, strict=True):
        assert b.text and word_edits(b.text, s.text) <= TOKEN_FLIP_WORD_EDITS, (b.text, s.text)
    assert all(r.kind is P and not r.words for r in batched)
    refs = [ref for _, ref in speech]
    assert wer_fn(refs, [r.text for r in batched]) <= 0.10
    assert wer_fn(refs, [r.text for r in single]) <= 0.10


@pytest.mark.slow
def test_two_replicas_read_a_batch_as_one_does(
    tiny_decoder: WhisperAdapter, speech: list[tuple[np.ndarray, str]], wer_fn: Any
) -> None:
    # Each replica decodes two of the four finals, on two threads at once (replicas.py).
    two = WhisperAdapter(ModelConfig(threads=1, replicas=2))
    calls: list[tuple[str, int]] = []
    real = two._generate._ct2

    class Spy:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def generate(self, features: Any, prompts: list[list[int]], **kw: Any) -> Any:
            calls.append((threading.current_thread().name, len(prompts)))
            return real.generate(features, prompts, **kw)

    two._generate._ct2 = Spy()
    requests = [
        DecodeRequest(audio=a, kind=F, request_id=i, word_timestamps=True)
        for i, (a, _) in enumerate(speech)
    ]
    split = two.decode_batch(requests)
    whole = tiny_decoder.decode_batch(requests)
    assert sorted(n for _, n in calls) == [2, 2] and len({t for t, _ in calls}) == 2
    assert [r.request_id for r in split] == [0, 1, 2, 3]
    # Other batch shapes for the model, which may round a token the other way (the CPU
    # decides); the four utterances share no words, so a mixed-up row fails by far.
    for a, b in zip(split, whole, strict=True):
        assert a.text and word_edits(a.text, b.text) <= TOKEN_FLIP_WORD_EDITS, (a.text, b.text)
        assert a.words and "".join(w.word for w in a.words).strip() == a.text
    assert wer_fn([ref for _, ref in speech], [r.text for r in split]) <= 0.06


@pytest.mark.slow
def test_final_after_partial_reuses_the_encoder_output(
    tiny_decoder: WhisperAdapter, speech: list[tuple[np.ndarray, str]]
) -> None:
    audio = speech[2][0] * 0.9  # a window no other test has encoded
    before = tiny_decoder.cache_stats()
    partial = tiny_decoder.decode_batch([DecodeRequest(audio=audio, kind=P)])[0]
    final = tiny_decoder.decode_batch([DecodeRequest(audio=audio.copy(), kind=F)])[0]
    after = tiny_decoder.cache_stats()
    assert not partial.encoder_cache_hit and final.encoder_cache_hit
    assert (after.misses - before.misses, after.hits - before.hits) == (1, 1)
    keyed = tiny_decoder.decode_batch(
        [
            DecodeRequest(audio=audio[:16000], kind=P, cache_key="k", request_id=1),
            DecodeRequest(audio=audio[:16000], kind=F, cache_key="k", request_id=2),
        ]
    )
    assert [r.encoder_cache_hit for r in keyed] == [False, True]  # encoded once per batch
    final_stats = tiny_decoder.cache_stats()
    assert (final_stats.misses - after.misses, final_stats.hits - after.hits) == (1, 1)


@pytest.mark.slow
def test_silence_and_noise_yield_no_text(tiny_decoder: WhisperAdapter) -> None:
    windows = [
        np.zeros(3 * SAMPLE_RATE, np.float32),
        np.zeros(0, np.float32),
        _noise("white", 3.0, 1e-5),
        _noise("white", 5.0, 0.1),
        _noise("white", 2.0, 0.5, seed=2),
        _noise("pink", 5.0, 0.3),
        _noise("pink", 10.0, 0.8, seed=3),
    ]
    requests = [
        DecodeRequest(audio=w, kind=k, word_timestamps=k is F) for w in windows for k in (P, F)
    ]
    for r in tiny_decoder.decode_batch(requests):
        assert r.text == "" and r.words == () and r.tokens == ()
        assert r.no_speech_prob > 0.6


@pytest.mark.slow
def test_prompt_prefix_and_token_cap(
    tiny_decoder: WhisperAdapter, speech: list[tuple[np.ndarray, str]]
) -> None:
    audio = speech[0][0]
    results = tiny_decoder.decode_batch(
        [
            DecodeRequest(audio=audio, kind=F, prefix="She hoped", request_id="prefix"),
            DecodeRequest(audio=audio, kind=F, prompt="Fat mutton. " * 12, request_id="long"),
            DecodeRequest(audio=audio, kind=F, prompt="Stew.", request_id="short"),
            DecodeRequest(audio=audio, kind=F, prompt="Flour fattened.", request_id="short2"),
            DecodeRequest(audio=audio, kind=P, prefix="He hoped", max_new_tokens=3),
            DecodeRequest(audio=audio, kind=P, max_new_tokens=4, prompt="Dinner."),
        ]
    )
    prefixed, long_prompt, short_prompt, flour, capped_prefix, capped = results
    assert prefixed.text.startswith("She hoped there would be stew")
    assert "flour fattened" in flour.text.lower().replace("-", " ")  # the prompt's spelling
    for r in (long_prompt, short_prompt, flour):  # prompts of different lengths in one batch
        assert "stew for dinner" in r.text.lower()
    assert capped_prefix.text.startswith("He hoped") and len(capped_prefix.tokens) == 2 + 3
    assert len(capped.tokens) == 4


@pytest.mark.slow
def test_context_is_forced_and_left_out_of_the_result(
    tiny_decoder: WhisperAdapter, speech: list[tuple[np.ndarray, str]]
) -> None:
    """Two utterances in one window, the first one's text as context: only the second comes
    back, as a final (with word times relative to the window) and as a greedy partial."""
    (first, _), (second, ref) = speech[0], speech[2]  # "He could wait no longer."
    gap = np.zeros(SAMPLE_RATE, np.float32)
    window = np.concatenate([first, gap, second])
    offset = (len(first) + len(gap)) / SAMPLE_RATE
    (alone,) = tiny_decoder.decode_batch([DecodeRequest(audio=first, kind=F)])
    final, partial, prefixed, nonsense = tiny_decoder.decode_batch(
        [
            DecodeRequest(audio=window, kind=F, context=alone.text, word_timestamps=True),
            DecodeRequest(audio=window, kind=P, context=alone.text),
            DecodeRequest(audio=window, kind=F, context=alone.text, prefix="He could"),
            DecodeRequest(audio=window, kind=P, context="Cats like warm milk.", max_new_tokens=4),
        ]
    )
    want = _words(ref)
    for r in (final, partial, prefixed):
        assert _words(r.text) == want, r.text
        assert r.avg_logprob > -0.5  # scored over the new tokens, not diluted by the context
    assert final.text.startswith("He could")
    assert [w.word.strip() for w in final.words] == final.text.split()
    assert offset - 0.3 <= final.words[0].start and final.words[-1].end <= len(window) / 16000
    assert len(nonsense.tokens) <= 4  # the cap counts new tokens only


def _words(text: str) -> list[str]:
    return ["".join(c for c in w.lower() if c.isalnum()) for w in text.split()]


@pytest.mark.slow
def test_fallback_retries_failed_finals_together(
    speech: list[tuple[np.ndarray, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A log-prob threshold no hypothesis meets: every final goes through every temperature.
    adapter = WhisperAdapter(
        ModelConfig(threads=2, log_prob_threshold=-0.0001, temperatures=(0.0, 0.5, 1.0))
    )
    calls: list[tuple[int, float]] = []
    real = adapter._generate._ct2  # the one place that calls generate

    class Spy:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def generate(self, features: Any, prompts: list[list[int]], **kw: Any) -> Any:
            calls.append((len(prompts), float(kw.get("sampling_temperature", 0.0))))
            return real.generate(features, prompts, **kw)

    monkeypatch.setattr(adapter._generate, "_ct2", Spy())
    audios = [speech[1][0], speech[2][0]]
    results = adapter.decode_batch([DecodeRequest(audio=a, kind=F) for a in audios])
    assert calls == [(2, 0.0), (2, 0.5), (2, 1.0)]
    for r in results:
        assert r.text and r.temperature in (0.0, 0.5, 1.0)


@pytest.mark.slow
def test_model_failure_raises_decode_error_and_adapter_keeps_working(
    tiny_decoder: WhisperAdapter,
    speech: list[tuple[np.ndarray, str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = tiny_decoder._generate._ct2

    class Broken:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def generate(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("CUDA error: out of memory")

    monkeypatch.setattr(tiny_decoder._generate, "_ct2", Broken())
    with pytest.raises(DecodeError, match="out of memory"):
        tiny_decoder.decode_batch([DecodeRequest(audio=speech[3][0], kind=P)])
    monkeypatch.undo()
    assert tiny_decoder.decode_batch([DecodeRequest(audio=speech[3][0], kind=P)])[0].text


@pytest.mark.slow
def test_bad_requests_are_config_errors(tiny_decoder: WhisperAdapter) -> None:
    too_long = np.zeros(30 * SAMPLE_RATE + 1, np.float32)
    bad = [
        DecodeRequest(audio=too_long, kind=F),
        DecodeRequest(audio=np.zeros((2, 1600), np.float32), kind=F),
        DecodeRequest(audio=np.full(1600, np.nan, np.float32), kind=F),
        DecodeRequest(audio=np.zeros(1600, np.int16), kind=F),
        DecodeRequest(audio=np.zeros(1600, np.float32), kind=P, max_new_tokens=0),
        DecodeRequest(audio=np.zeros(1600, np.float32), kind=F, context="word " * 200),
        DecodeRequest(audio=np.zeros(1600, np.float32), kind=P, encode_min_s=-1.0),
    ]
    for req in bad:
        with pytest.raises(ConfigError):
            tiny_decoder.decode_batch([req])
    assert tiny_decoder.decode_batch([]) == []
    assert tiny_decoder.name == "tiny.en" and not tiny_decoder.multilingual
    assert tiny_decoder.detect_language(np.zeros(1600, np.float32)) == ("en", 1.0)


@pytest.mark.slow
def test_stream_partials_use_incremental_features(
    tiny_decoder: WhisperAdapter,
    speech: list[tuple[np.ndarray, str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    audio = speech[3][0]
    features = tiny_decoder.features
    hits = features.incremental_hits
    given: list[np.ndarray] = []  # the features each decode below hands the encoder
    real_stream, real_batch = features.stream, features.batch

    def stream(*args: Any, **kwargs: Any) -> np.ndarray | None:
        out = real_stream(*args, **kwargs)
        given.extend([] if out is None else [out])
        return out

    def batch(*args: Any, **kwargs: Any) -> np.ndarray:
        out = real_batch(*args, **kwargs)
        given.extend(out)
        return out

    monkeypatch.setattr(features, "stream", stream)
    monkeypatch.setattr(features, "batch", batch)

    def decode(request: DecodeRequest) -> tuple[str, np.ndarray]:
        given.clear()
        (result,) = tiny_decoder.decode_batch([request])
        assert len(given) == 1 and not result.encoder_cache_hit
        return result.text, given[0]

    texts, identical = [], 0
    for seconds in (1.5, 3.0, 4.5):
        window = audio[: int(seconds * SAMPLE_RATE)]
        streamed, incremental = decode(
            DecodeRequest(audio=window, kind=P, stream_key="mic-1", cache_key=("a", seconds))
        )
        plain, full = decode(DecodeRequest(audio=window, kind=P, cache_key=("b", seconds)))
        np.testing.assert_allclose(incremental, full, rtol=0, atol=FEATURE_ATOL)
        assert streamed, seconds
        if np.array_equal(incremental, full):
            # Bit-identical inputs (features, a batch of one, the same options): same text.
            identical += 1
            assert streamed == plain
        else:
            # The two paths round differently (one float32 ulp here): a token near a tie
            # may flip, and which one does depends on the CPU's vector width.
            assert word_edits(streamed, plain) <= TOKEN_FLIP_WORD_EDITS, (streamed, plain)
        texts.append(streamed)
    if features._kernels is not None:
        assert features.incremental_hits == hits + 2
    else:  # no incremental path: both requests took the full one
        assert identical == 3
    assert len(texts[-1]) > len(texts[0])


@pytest.mark.slow
def test_short_encodes_transcribe(
    tiny_decoder: WhisperAdapter, speech: list[tuple[np.ndarray, str]], wer_fn: Any
) -> None:
    clips = speech[:3]
    short = tiny_decoder.decode_batch(
        [
            DecodeRequest(audio=a, kind=F, request_id=i, encode_min_s=1.0, word_timestamps=True)
            for i, (a, _) in enumerate(clips)
        ]
    )
    assert wer_fn([ref for _, ref in clips], [r.text for r in short]) <= 0.15
    for r, (audio, _) in zip(short, clips, strict=True):
        assert r.words and r.words[-1].end <= len(audio) / SAMPLE_RATE + 1e-6


@pytest.mark.slow
@pytest.mark.parametrize("kind", [P, F])
def test_a_request_reads_the_same_alone_and_among_other_lengths(
    tiny_decoder: WhisperAdapter,
    speech: list[tuple[np.ndarray, str]],
    record_encoder: Callable[[WhisperAdapter], EncoderCalls],
    kind: DecodeKind,
) -> None:
    """Issue 38: a clip's encoder input (its padding) and its text do not depend on its
    batch-mates. Recorded where the padding happens: the features the model's encode gets."""
    calls = record_encoder(tiny_decoder)
    clip = speech[1][0] * 0.7  # "Stuff it into you...", 3.3 s: a window no other test encodes
    frames = encoder_frames(clip.shape[0], 1.0)

    def request(audio: np.ndarray, rid: str, min_s: float | None = 1.0) -> DecodeRequest:
        # Distinct cache keys: every decode below runs the encoder (nothing from the cache).
        return DecodeRequest(
            audio=audio, kind=kind, request_id=rid, encode_min_s=min_s, cache_key=(kind, rid)
        )

    (alone,) = tiny_decoder.decode_batch([request(clip, "alone")])
    (given_alone,) = calls.rows()
    assert given_alone.shape[-1] == frames == 500
    calls.calls.clear()
    mates = [speech[0][0], speech[2][0], speech[3][0]]  # 10.4 s, 2.1 s, 5.4 s
    batch = tiny_decoder.decode_batch(
        [
            request(mates[0], "long"),
            request(clip.copy(), "clip"),
            request(mates[1], "short"),
            request(mates[2], "upload", None),  # Whisper's 30 s
        ]
    )
    assert [r.request_id for r in batch] == ["long", "clip", "short", "upload"]
    given = [row for row in calls.rows() if row.shape[-1] == frames]
    assert len(given) == 1 and sorted(r.shape[-1] for r in calls.rows()) == [400, 500, 1200, 3000]
    np.testing.assert_array_equal(given[0], given_alone)  # bit-identical encoder input
    # The clip is the only one of its length, so its generate is a batch of one as alone:
    # the same model inputs throughout, the same text (and words).
    assert alone.text and batch[1].text == alone.text, (alone.text, batch[1].text)
    assert batch[1].words == alone.words
    assert all(r.text for r in batch)


def test_partials_may_ask_for_a_beam(
    tiny_decoder: WhisperAdapter, speech: list[tuple[np.ndarray, str]], wer_fn: Any
) -> None:
    audio, reference = speech[0]
    greedy, beam = tiny_decoder.decode_batch(
        [
            DecodeRequest(audio=audio, kind=P, request_id=1),
            DecodeRequest(audio=audio, kind=P, request_id=2, beam_size=3),
        ]
    )
    assert [greedy.request_id, beam.request_id] == [1, 2]  # each group answers its own
    assert wer_fn([reference], [beam.text]) <= 0.15 and greedy.text


@pytest.mark.slow
def test_multilingual_base_detects_english(
    speech: list[tuple[np.ndarray, str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    wer_fn: Any,
) -> None:
    monkeypatch.setenv("KETTLE_CACHE_DIR", str(tmp_path))
    adapter = WhisperAdapter(ModelConfig(name="base", threads=2, beam_size=2))
    assert adapter.multilingual and adapter.name == "base"
    audio, ref = speech[3]
    language, prob = adapter.detect_language(audio)
    assert language == "en" and prob > 0.5
    detected, forced = adapter.decode_batch(
        [DecodeRequest(audio=audio, kind=F), DecodeRequest(audio=audio, kind=P, language="en")]
    )
    assert detected.language == "en" and forced.language == "en"
    assert detected.encoder_cache_hit and forced.encoder_cache_hit  # detect_language encoded it
    assert wer_fn([ref, ref], [detected.text, forced.text]) <= 0.1
    with pytest.raises(ConfigError, match="language"):
        adapter.decode_batch([DecodeRequest(audio=audio, kind=P, language="xx")])
