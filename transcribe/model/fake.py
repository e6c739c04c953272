"""A deterministic stand-in for the model: implements the Decoder protocol without weights.

Text is derived from the window itself: one word per ``seconds_per_word`` of *voiced* audio
(20 ms frames whose RMS is at least ``voiced_rms``), the i-th word of a window always being
``WORDS[i % len(WORDS)]``. A growing window therefore yields growing, prefix-consistent text,
silence yields "", and the same audio always yields the same words, which is what tests of
the session, scheduler and engine (and the server's tests) need. A request's context stands
for the window's first words: they are left out of the result, as the real adapter does, and
the rest of the window is heard as if alone (so an utterance reads the same with or without
context). A prefix is forced over the first words of the result. A refinement spells
"alpha" and "juliet" as ICAO does ("alfa", "juliett"), so it revises exactly the finals that
hold them. It can sleep to simulate
model time (in the calling thread, i.e. the engine's inference thread), fail on demand, and
counts what it was asked.

What it remembers is bounded (`kettle serve --fake-model` may run for days): the last
``keep_requests`` requests (with their audio), the last ``history`` batches' sizes and kinds,
and the last ``_CACHE_KEYS`` encoder-cache keys; the counters are plain integers.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np
from kettle.transcribe.errors import DecodeError
from kettle.transcribe.types import SAMPLE_RATE, DecodeKind, DecodeRequest, DecodeResult, Word

WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
    "quebec",
    "romeo",
    "sierra",
    "tango",
    "uniform",
    "victor",
    "whiskey",
    "xray",
    "yankee",
    "zulu",
]

_FRAME = SAMPLE_RATE // 50
# A refinement (DecodeRequest.refinement) reads these words in ICAO's spelling, so tests see
# a revision exactly where a final holds one of them.
ICAO = {"alpha": "alfa", "juliet": "juliett"}
_CACHE_KEYS = 4096


@dataclass(frozen=True)
class CacheStats:
    hits: int
    misses: int


@dataclass
class FakeDecoderStats:
    calls: int = 0
    requests: int = 0
    failures: int = 0
    history: int = 1000
    _sizes: deque[int] = field(init=False, repr=False)
    _kinds: deque[tuple[DecodeKind, ...]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._sizes = deque(maxlen=self.history)
        self._kinds = deque(maxlen=self.history)

    def record(self, kinds: tuple[DecodeKind, ...]) -> None:
        self._sizes.append(len(kinds))
        self._kinds.append(kinds)

    @property
    def batch_sizes(self) -> list[int]:
        """Sizes of the most recent `history` batches, oldest first."""
        return list(self._sizes)

    @property
    def kinds(self) -> list[tuple[DecodeKind, ...]]:
        return list(self._kinds)


class FakeDecoder:
    """Deterministic Decoder. ``fail`` decides, per batch, whether the whole batch raises."""

    def __init__(
        self,
        *,
        name: str = "fake",
        seconds_per_word: float = 0.5,
        voiced_rms: float = 0.01,
        batch_delay_s: float = 0.0,
        per_request_delay_s: float = 0.0,
        fail: Callable[[Sequence[DecodeRequest]], bool] | None = None,
        text_for: Callable[[DecodeRequest], str] | None = None,
        fallback_rounds: Callable[[DecodeRequest], int] | None = None,
        keep_requests: int = 100,
        history: int = 1000,
    ) -> None:
        if seconds_per_word <= 0:
            raise ValueError("seconds_per_word must be positive")
        if keep_requests < 0 or history < 0:
            raise ValueError("keep_requests and history must not be negative")
        self._name = name
        self.seconds_per_word = seconds_per_word
        self.voiced_rms = voiced_rms
        self.batch_delay_s = batch_delay_s
        self.per_request_delay_s = per_request_delay_s
        self.fail = fail
        self.text_for = text_for
        # How many temperature-fallback rounds a final needs before it passes; a request
        # with ``fallback_round`` set gets one round per call (``next_round`` says if more).
        self.fallback_rounds = fallback_rounds
        self.stats = FakeDecoderStats(history=history)
        # The most recent requests, oldest first (their audio included, hence the bound).
        self.requests_seen: deque[DecodeRequest] = deque(maxlen=keep_requests)
        self._cache: OrderedDict[Hashable, None] = OrderedDict()
        self._hits = 0
        self._misses = 0
        self._lock = threading.Lock()
        self.threads_used: set[int] = set()

    @property
    def name(self) -> str:
        return self._name

    @property
    def multilingual(self) -> bool:
        return False

    def cache_stats(self) -> CacheStats:
        return CacheStats(self._hits, self._misses)

    def decode_batch(self, requests: Sequence[DecodeRequest]) -> list[DecodeResult]:
        with self._lock:
            self.threads_used.add(threading.get_ident())
            self.stats.calls += 1
            self.stats.requests += len(requests)
            self.stats.record(tuple(r.kind for r in requests))
            self.requests_seen.extend(requests)
        delay = self.batch_delay_s + self.per_request_delay_s * len(requests)
        if delay > 0:
            time.sleep(delay)
        if self.fail is not None and self.fail(requests):
            with self._lock:
                self.stats.failures += 1
            raise DecodeError(f"injected failure in a batch of {len(requests)}")
        return [self._decode_one(r) for r in requests]

    # --- the deterministic "model" -------------------------------------------------------
    def voiced_frames(self, audio: np.ndarray) -> np.ndarray:
        """Indices of the window's 20 ms frames that count as voiced."""
        n = len(audio) // _FRAME
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        frames = np.asarray(audio[: n * _FRAME], dtype=np.float64).reshape(n, _FRAME)
        rms = np.sqrt(np.mean(frames * frames, axis=1))
        return np.flatnonzero(rms >= self.voiced_rms)

    def words_for(self, audio: np.ndarray) -> list[tuple[str, float, float]]:
        voiced = self.voiced_frames(audio)
        per_word = max(1, round(self.seconds_per_word * 50))
        out = []
        for i in range(len(voiced) // per_word):
            first, last = voiced[i * per_word], voiced[(i + 1) * per_word - 1]
            out.append((WORDS[i % len(WORDS)], float(first) * 0.02, float(last + 1) * 0.02))
        return out

    def _after_context(self, request: DecodeRequest) -> list[tuple[str, float, float]]:
        """The window's words after its context: the context's words are the window's first
        ones, and what follows them is heard as if alone (numbered from the first word
        again), timed from the window's start."""
        triples = self.words_for(request.audio)
        n = len(request.context.split()) if request.context else 0
        if n == 0:
            return triples
        if len(triples) <= n:
            return []
        offset = triples[n - 1][2]
        rest = self.words_for(request.audio[round(offset * SAMPLE_RATE) :])
        return [(w, s + offset, e + offset) for w, s, e in rest]

    def _decode_one(self, request: DecodeRequest) -> DecodeResult:
        key = request.cache_key
        hit = False
        if key is not None:
            with self._lock:
                hit = key in self._cache
                self._cache[key] = None
                self._cache.move_to_end(key)
                if len(self._cache) > _CACHE_KEYS:
                    self._cache.popitem(last=False)
                if hit:
                    self._hits += 1
                else:
                    self._misses += 1
        if self.text_for is not None:
            text = self.text_for(request)
            words: tuple[Word, ...] = ()
            if request.wants_words(text):
                span = len(request.audio) / SAMPLE_RATE
                toks = text.split()
                step = span / len(toks)
                words = tuple(
                    Word(w, round(i * step, 3), round((i + 1) * step, 3), 0.9)
                    for i, w in enumerate(toks)
                )
        else:
            triples = self._after_context(request)
            if request.prefix:
                # Honour the forced prefix the way a real decoder would: the text starts with
                # it, and continues with the window's own words after as many words.
                forced = request.prefix.split()
                triples = [(w, s, e) for (_, s, e), w in zip(triples, forced, strict=False)] + (
                    triples[len(forced) :]
                )
                if len(forced) > len(triples):
                    end = triples[-1][2] if triples else 0.0
                    triples += [(w, end, end) for w in forced[len(triples) :]]
            if request.refinement:
                triples = [(ICAO.get(w, w), s, e) for w, s, e in triples]
            text = " ".join(w for w, _, _ in triples)
            words = (
                tuple(Word(w, round(s, 3), round(e, 3), 0.9) for w, s, e in triples)
                if request.wants_words(text)
                else ()
            )
        fails = self._fails_round(request)
        return DecodeResult(
            request_id=request.request_id,
            kind=request.kind,
            text=text,
            words=words,
            language=request.language or (request.languages or ("en",))[0],
            avg_logprob=-1.2 if fails else -0.2 if text else -1.5,
            no_speech_prob=0.05 if text else 0.9,
            encoder_cache_hit=hit,
            fallback="unlikely" if fails else None,
            next_round=(request.fallback_round or 0) + 1 if fails else None,
        )

    def _fails_round(self, request: DecodeRequest) -> bool:
        """Whether this call's fallback round fails the checks (only a one-round request)."""
        if self.fallback_rounds is None or request.kind is not DecodeKind.FINAL:
            return False
        if request.fallback_round is None:
            return False  # every round runs here, the last one passes
        return request.fallback_round < self.fallback_rounds(request)


def synth_voice(seconds: float, *, f0: float = 140.0, amplitude: float = 0.3) -> np.ndarray:
    """A voice-like harmonic tone with syllable-rate modulation: webrtcvad calls it speech,
    its spectrum is peaky (passes kettle's flatness check) and FakeDecoder hears words in it."""
    t = np.arange(round(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    tone = sum(np.sin(2 * np.pi * f0 * k * t) / k for k in range(1, 12))
    envelope = 0.6 + 0.4 * np.sin(2 * np.pi * 4.0 * t)
    return (amplitude * tone * envelope / 2.0).astype(np.float32)


def scripted_audio(pattern: Sequence[tuple[str, float]], *, seed: int = 0) -> np.ndarray:
    """Concatenate ("voice" | "silence" | "noise", seconds) pieces into one clip; "voice@F"
    is a voice of pitch F Hz (another speaker, for speaker_fake.PitchSpeakerEncoder)."""
    rng = np.random.default_rng(seed)
    parts = []
    for what, seconds in pattern:
        n = round(seconds * SAMPLE_RATE)
        if what == "voice":
            parts.append(synth_voice(seconds))
        elif what.startswith("voice@"):
            parts.append(synth_voice(seconds, f0=float(what[6:])))
        elif what == "silence":
            parts.append(np.zeros(n, dtype=np.float32))
        elif what == "noise":
            parts.append((rng.standard_normal(n) * 0.1).astype(np.float32))
        else:
            raise ValueError(f"unknown piece {what!r}")
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
