"""The Whisper model adapter: batched encode and generate over windows of at most 30 s.

``WhisperAdapter.decode_batch`` serves the file pipeline and the streaming engine alike. One
batched ``encode()`` for the windows that miss the encoder cache, then batched ``generate()``
calls: one for the partials (greedy, token cap, no fallback) and one per beam size for the
finals (beam search, temperature fallback for the finals that fail the checks, the retries of
a round batched together), then word alignment for the finals that ask for it. Everything of
faster-whisper is reached through ``kettle.transcribe.fw``.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from kettle.transcribe import decoding
from kettle.transcribe.costs import CostProfile
from kettle.transcribe.decoding import Hypothesis, Thresholds
from kettle.transcribe.encoder_cache import EncoderCache, window_key
from kettle.transcribe.errors import ConfigError, DecodeError, KettleError, ModelError
from kettle.transcribe.features import FeatureComputer
from kettle.transcribe.models import resolve_model
from kettle.transcribe.types import (
    MAX_WINDOW_SAMPLES,
    SAMPLE_RATE,
    TASKS,
    DecodeKind,
    DecodeRequest,
    DecodeResult,
    Word,
)

logger = logging.getLogger(__name__)

_DEVICES = ("auto", "cpu", "cuda")
_COMPUTE_TYPES = (
    "auto",
    "default",
    "int8",
    "int8_float32",
    "int8_float16",
    "int8_bfloat16",
    "int16",
    "float16",
    "bfloat16",
    "float32",
)
MAX_LENGTH = 448  # Whisper's decoder context, prompt included
_HOP = 160
_N_FRAMES = 3000
# CTranslate2 needs <|startoftranscript|> at the same position across a generate() batch, so
# requests are grouped by prompt length; to keep the groups few, previous-text prompts of 8
# tokens or more are cut (keeping the most recent tokens, at least half of them) to one of
# these lengths. Shorter prompts are kept whole.
PROMPT_BUCKETS = (8, 16, 32, 64, 128, 223)
# Whisper generates at most MAX_LENGTH // 2 tokens, forced ones included, so a request's
# context text is bounded (about 140 tokens of English) to leave room for new words.
MAX_CONTEXT_CHARS = 600


@dataclass(frozen=True)
class ModelConfig:
    """How to load and run one Whisper model; validated on construction (ConfigError)."""

    name: str = "tiny.en"
    device: str = "auto"
    compute_type: str = "auto"
    threads: int = 0
    beam_size: int = 5
    partial_max_new_tokens: int = 96
    encoder_cache_size: int = 32
    no_speech_threshold: float = 0.6
    log_prob_threshold: float = -1.0
    compression_ratio_threshold: float = 2.4
    temperatures: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
    best_of: int = 5  # hypotheses sampled per request at a fallback temperature
    silence_rms: float = decoding.SILENCE_RMS  # windows quieter than this yield "" unseen
    verify_checksum: bool = True

    def __post_init__(self) -> None:
        temps = self.temperatures
        if isinstance(temps, (int, float)):
            temps = (float(temps),)
        object.__setattr__(self, "temperatures", tuple(float(t) for t in temps))
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigError("model name must be a non-empty string")
        if self.device not in _DEVICES:
            raise ConfigError(f"device must be one of {', '.join(_DEVICES)}, got {self.device!r}")
        if self.compute_type not in _COMPUTE_TYPES:
            raise ConfigError(
                f"compute_type must be one of {', '.join(_COMPUTE_TYPES)}, "
                f"got {self.compute_type!r}"
            )
        _check_int("threads", self.threads, 0, 1024)
        _check_int("beam_size", self.beam_size, 1, 64)
        _check_int("partial_max_new_tokens", self.partial_max_new_tokens, 1, MAX_LENGTH // 2)
        _check_int("encoder_cache_size", self.encoder_cache_size, 0, 100_000)
        _check_int("best_of", self.best_of, 1, 64)
        if not self.temperatures:
            raise ConfigError("temperatures must hold at least one value")
        if any(not (0.0 <= t <= 2.0) or math.isnan(t) for t in self.temperatures):
            raise ConfigError(f"temperatures must lie in [0, 2], got {self.temperatures}")
        if list(self.temperatures) != sorted(self.temperatures):
            raise ConfigError(f"temperatures must be ascending, got {self.temperatures}")
        for name in (
            "no_speech_threshold",
            "log_prob_threshold",
            "compression_ratio_threshold",
            "silence_rms",
        ):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or math.isnan(value):
                raise ConfigError(f"{name} must be a number, got {value!r}")
        if not 0.0 <= self.no_speech_threshold <= 1.0:
            raise ConfigError("no_speech_threshold must lie in [0, 1]")
        if self.compression_ratio_threshold <= 0:
            raise ConfigError("compression_ratio_threshold must be positive")
        if self.silence_rms < 0:
            raise ConfigError("silence_rms must not be negative")

    def resolved_device(self) -> str:
        if self.device != "auto":
            return self.device
        from kettle.transcribe import fw

        return "cuda" if fw.cuda_device_count() > 0 else "cpu"

    def resolved_compute_type(self, device: str) -> str:
        if self.compute_type != "auto":
            return self.compute_type
        return "int8_float16" if device == "cuda" else "int8"


def _check_int(name: str, value: object, low: int, high: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ConfigError(f"{name} must be an integer in [{low}, {high}], got {value!r}")


@dataclass(frozen=True)
class CacheStats:
    hits: int
    misses: int


@dataclass
class _Job:
    """One request on its way through the batch."""

    index: int
    request: DecodeRequest
    audio: np.ndarray
    cache_hit: bool = False
    encoded: np.ndarray | None = None
    language: str = "en"
    prompt: list[int] = field(default_factory=list)
    n_prefix: int = 0  # forced tokens: context and prefix
    context: list[int] = field(default_factory=list)  # forced tokens left out of the result
    attempts: list[Hypothesis] = field(default_factory=list)
    chosen: Hypothesis | None = None
    words: tuple[Word, ...] = ()
    next_round: int | None = None  # the fallback round the caller should ask for next

    @property
    def final(self) -> bool:
        return self.request.kind is DecodeKind.FINAL


class WhisperAdapter:
    """A Whisper model that decodes batches of windows (implements ``types.Decoder``).

    Not meant for concurrent ``decode_batch`` calls from several threads (the engine has one
    inference thread); a lock makes such calls safe by serializing them.
    """

    def __init__(self, config: ModelConfig | None = None) -> None:
        from kettle.transcribe import fw

        self._config = config = config or ModelConfig()
        path = resolve_model(config.name, verify=config.verify_checksum)
        device = config.resolved_device()
        compute_type = config.resolved_compute_type(device)
        try:
            self._wm = fw.load_whisper(
                str(path), device=device, compute_type=compute_type, threads=config.threads
            )
        except Exception as exc:  # CTranslate2 raises RuntimeError/ValueError on bad files
            raise ModelError(f"could not load model '{config.name}' from {path}: {exc}") from exc
        self._ct2: Any = self._wm.model
        self._fw = fw
        self._device = device
        self._compute_type = compute_type
        self._path = path
        self._multilingual = bool(self._ct2.is_multilingual)
        self._features = FeatureComputer(int(self._ct2.n_mels), device=device)
        self._cache = EncoderCache(config.encoder_cache_size)
        self._tokenizers: dict[tuple[str, str], Any] = {}
        self._suppress: list[int] | None = None
        self._languages = frozenset(fw.LANGUAGE_CODES) if self._multilingual else frozenset()
        self._th = Thresholds(
            no_speech=config.no_speech_threshold,
            log_prob=config.log_prob_threshold,
            compression_ratio=config.compression_ratio_threshold,
        )
        self._lock = threading.Lock()
        self._costs: CostProfile | None = None
        logger.info(
            "loaded %s from %s on %s (%s, threads=%d)",
            config.name,
            path,
            device,
            compute_type,
            config.threads,
        )

    # -- Decoder protocol ------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._config.name

    @property
    def multilingual(self) -> bool:
        return self._multilingual

    @property
    def config(self) -> ModelConfig:
        return self._config

    @property
    def device(self) -> str:
        return self._device

    @property
    def compute_type(self) -> str:
        return self._compute_type

    @property
    def path(self) -> Any:
        return self._path

    def cache_stats(self) -> CacheStats:
        return CacheStats(hits=self._cache.hits, misses=self._cache.misses)

    def clear_encoder_cache(self) -> None:
        """Forget cached encoder outputs (counts stay): for measurements that must not reuse
        the work of an earlier run over the same audio."""
        self._cache.clear()

    def measure_costs(self) -> CostProfile:
        """Time the encoder per batch size and the decoder per token per row count on this
        device (about a second on a 2-core CPU; measured once per adapter, then cached).

        Batch sizes 1 and 2 for the encoder; where two cost clearly less than twice one (a
        GPU), 8 as well. The decoder is timed greedy over 1 and 8 rows with end-of-text
        suppressed, so it generates exactly as many tokens as asked.
        """
        if self._costs is None:
            with self._lock:
                self._costs = self._measure_costs()
        return self._costs

    def _measure_costs(self) -> CostProfile:
        rng = np.random.default_rng(0)
        n_mels = int(self._ct2.n_mels)

        def encode(n: int, to_cpu: bool = False) -> tuple[float, Any]:
            feats = (rng.standard_normal((n, n_mels, _N_FRAMES)) * 0.1).astype(np.float32)
            storage = self._fw.storage(feats)
            t0 = time.perf_counter()
            out = self._ct2.encode(storage, to_cpu=to_cpu)
            return time.perf_counter() - t0, out

        _, encoded = encode(
            1, to_cpu=True
        )  # warm-up (first calls allocate); its output feeds the decoder
        enc = {n: encode(n)[0] for n in (1, 2)}
        if enc[2] < 1.5 * enc[1]:
            enc[8] = encode(8)[0]
        tok = self._tokenizer("en")
        prompt = [*list(tok.sot_sequence), tok.no_timestamps]
        suppress = [*self._suppress_tokens(), tok.eot]
        one = self._fw.to_numpy(encoded)
        steps: dict[int, float] = {}
        for rows in (1, 8):
            rows_enc = self._fw.storage(np.ascontiguousarray(np.repeat(one, rows, axis=0)))
            timing = []
            for want in (2, 18):
                t0 = time.perf_counter()
                res = self._ct2.generate(
                    rows_enc,
                    [prompt] * rows,
                    max_length=max(2 * want, len(prompt) - 1 + want),
                    beam_size=1,
                    suppress_tokens=suppress,
                    suppress_blank=False,
                )
                got = len(res[0].sequences_ids[0])
                timing.append((got, time.perf_counter() - t0))
            (n0, t0_), (n1, t1_) = timing
            steps[rows] = max(0.0, (t1_ - t0_) / max(1, n1 - n0))
        profile = CostProfile(tuple(enc.items()), tuple(steps.items()), device=self._device)
        logger.info("measured model costs: %s", profile.to_dict())
        return profile

    def decode_batch(self, requests: Sequence[DecodeRequest]) -> list[DecodeResult]:
        """Decode every request; results come back in request order.

        Raises ConfigError (before any model work) for an invalid request, and DecodeError when
        the model fails on the batch; never returns partial or mixed-up results.
        """
        if not requests:
            return []
        jobs = [_Job(i, r, self._check_request(r)) for i, r in enumerate(requests)]
        with self._lock:
            try:
                return self._decode(jobs)
            except KettleError:
                raise
            except Exception as exc:
                logger.exception("decode batch of %d failed", len(jobs))
                raise DecodeError(f"decode batch of {len(jobs)} request(s) failed: {exc}") from exc

    def detect_language(self, audio: np.ndarray) -> tuple[str, float]:
        """The most likely language of a window and its probability ("en" for .en models)."""
        samples = self._check_audio(audio)
        if not self._multilingual:
            return "en", 1.0
        if decoding.is_negligible(samples, self._config.silence_rms):
            return "en", 0.0
        job = _Job(0, DecodeRequest(audio=samples, kind=DecodeKind.FINAL), samples)
        with self._lock:
            try:
                self._encode([job])
                assert job.encoded is not None
                ranked = self._ct2.detect_language(self._fw.storage(job.encoded[None]))[0]
            except Exception as exc:
                raise DecodeError(f"language detection failed: {exc}") from exc
        token, prob = ranked[0]
        return token[2:-2], float(prob)

    # -- validation ------------------------------------------------------------------------

    @staticmethod
    def _check_audio(audio: object) -> np.ndarray:
        if not isinstance(audio, np.ndarray):
            raise ConfigError(f"audio must be a numpy array, got {type(audio).__name__}")
        if audio.ndim != 1:
            raise ConfigError(f"audio must be 1-D mono samples, got shape {audio.shape}")
        if not np.issubdtype(audio.dtype, np.floating):
            raise ConfigError(f"audio must be float32 samples in [-1, 1], got {audio.dtype}")
        if audio.shape[0] > MAX_WINDOW_SAMPLES:
            raise ConfigError(
                f"window of {audio.shape[0] / SAMPLE_RATE:.2f} s is longer than the "
                f"{MAX_WINDOW_SAMPLES / SAMPLE_RATE:.0f} s Whisper takes"
            )
        samples = np.ascontiguousarray(audio, dtype=np.float32)
        if samples.size and not np.isfinite(samples).all():
            raise ConfigError("audio holds NaN or infinite samples")
        return samples

    def _check_request(self, r: DecodeRequest) -> np.ndarray:
        if not isinstance(r.kind, DecodeKind):
            raise ConfigError(f"request {r.request_id!r}: kind must be a DecodeKind")
        samples = self._check_audio(r.audio)
        if r.beam_size is not None:
            _check_int("beam_size", r.beam_size, 1, 64)
        if r.max_new_tokens is not None:
            _check_int("max_new_tokens", r.max_new_tokens, 1, MAX_LENGTH // 2)
        if r.language is not None and self._multilingual and r.language not in self._languages:
            raise ConfigError(f"request {r.request_id!r}: unknown language code {r.language!r}")
        if r.context is not None and len(r.context) > MAX_CONTEXT_CHARS:
            raise ConfigError(
                f"request {r.request_id!r}: context of {len(r.context)} characters is longer "
                f"than {MAX_CONTEXT_CHARS}"
            )
        if r.task not in TASKS:
            raise ConfigError(f"request {r.request_id!r}: task must be one of {', '.join(TASKS)}")
        if r.task == "translate" and not self._multilingual:
            raise ConfigError(f"model {self.name} is English-only and cannot translate")
        return samples

    # -- the batch ---------------------------------------------------------------------------

    def _decode(self, jobs: list[_Job]) -> list[DecodeResult]:
        results: list[DecodeResult | None] = [None] * len(jobs)
        active: list[_Job] = []
        for job in jobs:
            if decoding.is_negligible(job.audio, self._config.silence_rms):
                results[job.index] = self._empty_result(job, no_speech_prob=1.0)
            else:
                active.append(job)
        if active:
            self._encode(active)
            self._assign_languages(active)
            for job in active:
                self._build_prompt(job)
            partials = [j for j in active if not j.final]
            finals = [j for j in active if j.final]
            if partials:
                self._decode_partials(partials)
            if finals:
                self._decode_finals(finals)
            self._align_words([j for j in finals if j.request.word_timestamps])
            for job in active:
                results[job.index] = self._result(job)
        for job in jobs:
            if job.final and job.request.stream_key is not None:
                self._features.forget(job.request.stream_key)  # the utterance is over
        out = [r for r in results if r is not None]
        if len(out) != len(jobs):  # a bug, not a model failure: never return a short list
            raise DecodeError("internal error: a request got no result")
        return out

    def _encode(self, jobs: list[_Job]) -> None:
        """Fill ``job.encoded`` from the cache or one batched encode of the misses."""
        pending: dict[Any, list[_Job]] = {}
        for job in jobs:
            r = job.request
            # A caller's key is paired with the window length, so a reused key can never
            # hand one window's encoding to a different-length window.
            key = (
                ("key", r.cache_key, job.audio.shape[0])
                if r.cache_key is not None
                else window_key(job.audio)
            )
            if key in pending:  # same window twice in one batch: encoded once
                pending[key].append(job)
                job.cache_hit = True
                self._cache.count_hit()
                continue
            hit = self._cache.get(key)
            if hit is not None:
                job.encoded, job.cache_hit = hit, True
            else:
                pending[key] = [job]
        if not pending:
            return
        keys = list(pending)
        feats: list[np.ndarray | None] = []
        for key in keys:
            first = pending[key][0]
            r = first.request
            feat = None
            if r.stream_key is not None and r.kind is DecodeKind.PARTIAL:
                feat = self._features.stream(r.stream_key, first.audio)
            feats.append(feat)
        todo = [i for i, f in enumerate(feats) if f is None]
        if todo:
            computed = self._features.batch([pending[keys[i]][0].audio for i in todo])
            for i, row in zip(todo, computed, strict=True):
                feats[i] = row
        batch = np.stack([f for f in feats if f is not None])
        encoded = self._fw.to_numpy(self._ct2.encode(self._fw.storage(batch), to_cpu=True))
        for key, row in zip(keys, encoded, strict=True):
            row = np.ascontiguousarray(row)
            self._cache.put(key, row)
            for job in pending[key]:
                job.encoded = row

    def _tokenizer(self, language: str, task: str = "transcribe") -> Any:
        tok = self._tokenizers.get((language, task))
        if tok is None:
            tok = self._fw.Tokenizer(
                self._wm.hf_tokenizer,
                self._multilingual,
                task=task,
                language=language if self._multilingual else None,
            )
            self._tokenizers[(language, task)] = tok
        return tok

    def _suppress_tokens(self) -> list[int]:
        if self._suppress is None:
            self._suppress = list(self._fw.get_suppressed_tokens(self._tokenizer("en"), [-1]))
        return self._suppress

    def _assign_languages(self, jobs: list[_Job]) -> None:
        unknown = []
        for job in jobs:
            if not self._multilingual:
                if job.request.language not in (None, "en"):
                    logger.debug(
                        "%s is English-only; ignoring language %r", self.name, job.request.language
                    )
                job.language = "en"
            elif job.request.language is not None:
                job.language = job.request.language
            else:
                unknown.append(job)
        if unknown:
            ranked = self._ct2.detect_language(self._stack(unknown))
            for job, langs in zip(unknown, ranked, strict=True):
                job.language = langs[0][0][2:-2]

    def _build_prompt(self, job: _Job) -> None:
        r = job.request
        tok = self._tokenizer(job.language, r.task)
        previous: list[int] = []
        if r.prompt and r.prompt.strip():
            previous = tok.encode(" " + r.prompt.strip())
            fits = [b for b in PROMPT_BUCKETS if b <= len(previous)]
            if fits:
                previous = previous[len(previous) - fits[-1] :]
        job.prompt = self._wm.get_prompt(tok, previous, without_timestamps=True)
        job.context = tok.encode(" " + r.context.strip()) if r.context and r.context.strip() else []
        prefix = tok.encode(" " + r.prefix.strip()) if r.prefix and r.prefix.strip() else []
        # Tokenized apart, so the context's tokens are known exactly; at a word boundary
        # (a leading space) the BPE pieces are the same as for the joined text.
        forced = job.context + prefix
        job.prompt.extend(forced[: MAX_LENGTH // 2 - 1])
        job.n_prefix = min(len(forced), MAX_LENGTH // 2 - 1)

    def _stack(self, jobs: list[_Job]) -> Any:
        rows = [j.encoded for j in jobs]
        assert all(r is not None for r in rows)
        return self._fw.storage(np.stack(rows))  # type: ignore[arg-type]

    def _generate(
        self, jobs: list[_Job], *, temperature: float, beam_size: int, caps: list[int | None]
    ) -> list[Hypothesis]:
        """One generate() per group of equal <|startoftranscript|> position."""
        out: dict[int, Hypothesis] = {}
        groups: dict[int, list[int]] = {}
        for k, job in enumerate(jobs):
            sot = self._tokenizer(job.language, job.request.task).sot
            groups.setdefault(job.prompt.index(sot), []).append(k)
        for members in groups.values():
            sub = [jobs[k] for k in members]
            sub_caps = [caps[k] for k in members]
            limits = [_max_length(j, c) for j, c in zip(sub, sub_caps, strict=True)]
            kwargs: dict[str, Any]
            if temperature > 0:
                kwargs = {
                    "beam_size": 1,
                    "num_hypotheses": self._config.best_of,
                    "sampling_topk": 0,
                    "sampling_temperature": temperature,
                }
            else:
                kwargs = {"beam_size": beam_size}
            raw = self._ct2.generate(
                self._stack(sub),
                [j.prompt for j in sub],
                max_length=max(limits),
                return_scores=True,
                return_no_speech_prob=True,
                suppress_blank=True,
                suppress_tokens=self._suppress_tokens(),
                **kwargs,
            )
            for k, job, cap, res in zip(members, sub, sub_caps, raw, strict=True):
                budget = None if cap is None else job.n_prefix + cap
                out[k] = self._hypothesis(job, res, temperature, budget)
        return [out[k] for k in range(len(jobs))]

    def _hypothesis(
        self, job: _Job, res: Any, temperature: float, budget: int | None
    ) -> Hypothesis:
        tok = self._tokenizer(job.language, job.request.task)
        seq = list(res.sequences_ids[0])
        # CTranslate2 returns the forced tokens too but scores only what follows them; the
        # context is not counted, so a long context does not dilute the average.
        n_context = min(len(job.context), len(seq))
        avg = decoding.avg_logprob(float(res.scores[0]), len(seq) - n_context)
        # One max_length serves a whole group: trim to this request's own token budget.
        if budget is not None:
            seq = seq[:budget]
        tokens = tuple(t for t in seq[n_context:] if t < tok.eot)
        text = tok.decode(list(tokens)).strip()
        return Hypothesis(
            tokens=tokens,
            text=text,
            avg_logprob=avg,
            no_speech_prob=float(res.no_speech_prob),
            compression_ratio=float(self._fw.get_compression_ratio(text)) if text else 0.0,
            temperature=temperature,
        )

    def _decode_partials(self, jobs: list[_Job]) -> None:
        caps: list[int | None] = [
            j.request.max_new_tokens or self._config.partial_max_new_tokens for j in jobs
        ]
        for job, hyp in zip(
            jobs, self._generate(jobs, temperature=0.0, beam_size=1, caps=caps), strict=True
        ):
            job.chosen = hyp

    def _decode_finals(self, jobs: list[_Job]) -> None:
        # Requests that ask for one fallback round run it alone; the others run them all.
        by_round: dict[int | None, list[_Job]] = {}
        for job in jobs:
            by_round.setdefault(job.request.fallback_round, []).append(job)
        for round_no, group in by_round.items():
            self._fallback_rounds(group, round_no)

    def _fallback_rounds(self, jobs: list[_Job], only: int | None) -> None:
        temps = self._config.temperatures
        pending = jobs
        for round_no, temperature in enumerate(temps):
            if not pending:
                break
            if only is not None and round_no != min(only, len(temps) - 1):
                continue
            hyps: dict[int, Hypothesis] = {}
            by_beam: dict[int, list[_Job]] = {}
            for job in pending:
                beam = job.request.beam_size or self._config.beam_size
                by_beam.setdefault(1 if temperature > 0 else beam, []).append(job)
            for beam, group in by_beam.items():
                caps = [j.request.max_new_tokens for j in group]
                for job, hyp in zip(
                    group,
                    self._generate(group, temperature=temperature, beam_size=beam, caps=caps),
                    strict=True,
                ):
                    hyps[job.index] = hyp
            retry = []
            last = round_no == len(temps) - 1
            for job in pending:
                hyp = hyps[job.index]
                job.attempts.append(hyp)
                if not decoding.needs_fallback(hyp, self._th):
                    job.chosen = hyp
                elif only is not None:
                    job.chosen = hyp  # the caller asks for the next round itself
                    job.next_round = None if last else round_no + 1
                elif last:
                    job.chosen = decoding.pick_after_fallback(job.attempts, self._th)
                else:
                    retry.append(job)
            if retry:
                logger.debug("%d final(s) retried at temperature %.1f", len(retry), temperature)
            pending = retry

    def _align_words(self, jobs: list[_Job]) -> None:
        jobs = [
            j
            for j in jobs
            if j.chosen is not None
            and j.chosen.tokens
            and not decoding.suppressed(j.chosen, self._th)
        ]
        by_lang: dict[tuple[str, str], list[_Job]] = {}
        for job in jobs:
            by_lang.setdefault((job.language, job.request.task), []).append(job)
        for (language, task), group in by_lang.items():
            segments = []
            for job in group:
                assert job.chosen is not None
                duration = job.audio.shape[0] / SAMPLE_RATE
                # The context is aligned too (the new words' times depend on it) as a
                # sub-segment of its own, so its words come back apart and are dropped.
                segments.append(
                    [
                        {"tokens": job.context, "start": 0.0, "end": duration, "seek": 0},
                        {"tokens": list(job.chosen.tokens), "start": 0.0, "end": duration},
                    ]
                )
            frames = [min(_N_FRAMES, max(1, math.ceil(j.audio.shape[0] / _HOP))) for j in group]
            self._wm.add_word_timestamps(
                segments,
                self._tokenizer(language, task),
                self._stack(group),
                frames,
                self._fw.PREPEND_PUNCTUATIONS,
                self._fw.APPEND_PUNCTUATIONS,
                0.0,
            )
            for job, seg in zip(group, segments, strict=True):
                job.words = _clean_words(
                    seg[-1].get("words") or [], job.audio.shape[0] / SAMPLE_RATE
                )

    # -- results -----------------------------------------------------------------------------

    def _empty_result(self, job: _Job, *, no_speech_prob: float) -> DecodeResult:
        r = job.request
        return DecodeResult(
            request_id=r.request_id,
            kind=r.kind,
            text="",
            language=r.language or "en",
            no_speech_prob=no_speech_prob,
            encoder_cache_hit=job.cache_hit,
        )

    def _result(self, job: _Job) -> DecodeResult:
        hyp = job.chosen
        if hyp is None:
            raise DecodeError(f"internal error: request {job.request.request_id!r} not decoded")
        silent = decoding.suppressed(hyp, self._th)
        return DecodeResult(
            request_id=job.request.request_id,
            kind=job.request.kind,
            text="" if silent else hyp.text,
            words=() if silent else job.words,
            language=job.language,
            avg_logprob=hyp.avg_logprob,
            no_speech_prob=hyp.no_speech_prob,
            compression_ratio=hyp.compression_ratio,
            temperature=hyp.temperature,
            encoder_cache_hit=job.cache_hit,
            tokens=() if silent else hyp.tokens,
            fallback=None if silent or not job.final else _fallback_reason(hyp, self._th),
            next_round=job.next_round,
        )


def _fallback_reason(hyp: Hypothesis, th: Thresholds) -> str | None:
    if not decoding.needs_fallback(hyp, th):
        return None
    return "repetitive" if decoding.too_repetitive(hyp, th) else "unlikely"


def _max_length(job: _Job, cap: int | None) -> int:
    """CTranslate2's max_length that lets ``job`` produce its prefix plus ``cap`` new tokens.

    Measured on CTranslate2 4.x: Whisper's generate returns at most
    ``min(max_length // 2, max_length - start + 1)`` tokens (prefix included), where ``start``
    is the prompt length without the prefix.
    """
    if cap is None:
        return MAX_LENGTH
    want = job.n_prefix + cap
    start = len(job.prompt) - job.n_prefix
    return min(MAX_LENGTH, max(2 * want, start - 1 + want))


def _clean_words(raw: list[dict[str, Any]], duration: float) -> tuple[Word, ...]:
    """Words inside [0, duration] with non-decreasing, non-overlapping times."""
    words: list[Word] = []
    last_end = 0.0
    for w in raw:
        text = str(w.get("word", ""))
        if not text.strip():
            continue
        start = min(max(float(w["start"]), last_end), duration)
        end = min(max(float(w["end"]), start), duration)
        words.append(Word(word=text, start=start, end=end, probability=float(w["probability"])))
        last_end = end
    return tuple(words)
