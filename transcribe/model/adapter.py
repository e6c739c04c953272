"""The Whisper model adapter: batched encode and generate over windows of at most 30 s.

``WhisperAdapter.decode_batch`` serves the file pipeline and the streaming engine alike. It
is a thin orchestrator over parts that each do one job, the way openai/whisper's decoding
module is split:

- ``requests.RequestCheck``: each request's fields, checked before any model work;
- ``encoder.Encoder``: log-mel features and the encoder pass, with its cache;
- ``prompts.PromptBuilder``: tokenizers, languages, each request's prompt;
- ``generate.Generator``: the one place that calls the model's ``generate``;
- ``fallback.FallbackPolicy``: temperature fallback of finals (all rounds, or one per call);
- ``aligner.WordAligner``: word timestamps.

It knows nothing of streaming lifecycles. Everything of faster-whisper is reached through
``kettle.transcribe.model.fw``.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from kettle.transcribe.errors import ConfigError, DecodeError, KettleError, ModelError
from kettle.transcribe.model import cost_cache, cost_probe, decoding, defaults, nonspeech, repeats
from kettle.transcribe.model.aligner import WordAligner
from kettle.transcribe.model.costs import CostProfile
from kettle.transcribe.model.decoding import Thresholds
from kettle.transcribe.model.encoder import Encoder, group_by_frames
from kettle.transcribe.model.encoder_cache import DEFAULT_MAX_BYTES, EncoderCache
from kettle.transcribe.model.fallback import FallbackPolicy
from kettle.transcribe.model.features import FeatureComputer
from kettle.transcribe.model.generate import Generator
from kettle.transcribe.model.job import Job
from kettle.transcribe.model.models import resolve_model
from kettle.transcribe.model.prompts import MAX_LENGTH, PROMPT_BUCKETS, PromptBuilder
from kettle.transcribe.model.replicas import Replicas
from kettle.transcribe.model.requests import RequestCheck, check_audio, check_int
from kettle.transcribe.types import (
    DecodeKind,
    DecodeRequest,
    DecodeResult,
    Word,
)

__all__ = ["MAX_LENGTH", "PROMPT_BUCKETS", "CacheStats", "ModelConfig", "WhisperAdapter"]

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


@dataclass(frozen=True)
class ModelConfig:
    """How to load and run one Whisper model; validated on construction (ConfigError)."""

    name: str = "tiny.en"
    device: str = "auto"
    compute_type: str = "auto"
    threads: int = 0  # CPU threads of each replica; 0: CTranslate2's choice
    # Model replicas on a CPU that decode parts of one batch at once (replicas.py says when
    # that pays: the file pipeline runs one single-threaded replica per core).
    replicas: int = 1
    beam_size: int = defaults.BEAM_SIZE
    partial_max_new_tokens: int = defaults.PARTIAL_MAX_TOKENS
    encoder_cache_size: int = 32  # entries at most
    encoder_cache_bytes: int = DEFAULT_MAX_BYTES  # and bytes at most (encoder_cache.py)
    no_speech_threshold: float = nonspeech.WHISPER_NO_SPEECH_PROB
    log_prob_threshold: float = nonspeech.WHISPER_LOGPROB
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
        check_int("threads", self.threads, 0, 1024)
        check_int("replicas", self.replicas, 1, 64)
        check_int("beam_size", self.beam_size, 1, 64)
        check_int("partial_max_new_tokens", self.partial_max_new_tokens, 1, MAX_LENGTH // 2)
        check_int("encoder_cache_size", self.encoder_cache_size, 0, 100_000)
        check_int("encoder_cache_bytes", self.encoder_cache_bytes, 0, 2**40)
        check_int("best_of", self.best_of, 1, 64)
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
        from kettle.transcribe.model import fw

        return "cuda" if fw.cuda_device_count() > 0 else "cpu"

    def layout(self, device: str) -> tuple[int, int]:
        """(replicas, threads per replica): ``replicas`` on a CPU, one on a GPU."""
        return (self.replicas if device == "cpu" else 1), self.threads

    def resolved_compute_type(self, device: str) -> str:
        if self.compute_type != "auto":
            return self.compute_type
        return "int8_float16" if device == "cuda" else "int8"


@dataclass(frozen=True)
class CacheStats:
    hits: int
    misses: int
    entries: int = 0  # held now
    bytes: int = 0  # held now (bounded by ModelConfig.encoder_cache_bytes)


class WhisperAdapter:
    """A Whisper model that decodes batches of windows (implements ``types.Decoder``).

    Not meant for concurrent ``decode_batch`` calls from several threads (the engine has one
    inference thread); a lock makes such calls safe by serializing them.
    """

    def __init__(self, config: ModelConfig | None = None) -> None:
        from kettle.transcribe.model import fw

        self._config = config = config or ModelConfig()
        path = resolve_model(config.name, verify=config.verify_checksum)
        device = config.resolved_device()
        compute_type = config.resolved_compute_type(device)
        replicas, threads = config.layout(device)
        try:
            self._wm = fw.load_whisper(
                str(path), device=device, compute_type=compute_type, threads=threads,
                replicas=replicas,
            )  # fmt: skip
        except Exception as exc:  # CTranslate2 raises RuntimeError/ValueError on bad files
            raise ModelError(f"could not load model '{config.name}' from {path}: {exc}") from exc
        self._ct2: Any = self._wm.model
        self._replicas = Replicas(replicas)
        self._fw = fw
        self._device = device
        self._compute_type = compute_type
        self._path = path
        self._multilingual = bool(self._ct2.is_multilingual)
        languages = frozenset(fw.LANGUAGE_CODES) if self._multilingual else frozenset()
        self._check = RequestCheck(
            config.name, multilingual=self._multilingual, languages=languages
        )
        self._th = Thresholds(
            no_speech=config.no_speech_threshold,
            log_prob=config.log_prob_threshold,
            compression_ratio=config.compression_ratio_threshold,
        )
        self._encoder = Encoder(
            self._ct2,
            fw,
            FeatureComputer(int(self._ct2.n_mels), device=device),
            EncoderCache(config.encoder_cache_size, config.encoder_cache_bytes),
            self._replicas,
        )
        self._prompts = PromptBuilder(
            self._wm, fw, multilingual=self._multilingual, model_name=config.name
        )
        self._generate = Generator(
            self._ct2, fw, self._prompts, self._encoder.stack, self._replicas
        )
        self._fallback = FallbackPolicy(
            config.temperatures, config.beam_size, config.best_of, self._th
        )
        self._aligner = WordAligner(
            self._wm, fw, self._prompts, self._encoder.stack, self._th, self._replicas
        )
        self._lock = threading.Lock()
        self._costs: CostProfile | None = None
        logger.info(
            "loaded %s from %s on %s (%s, %d replica(s) of %d thread(s))",
            config.name,
            path,
            device,
            compute_type,
            replicas,
            threads,
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

    @property
    def features(self) -> FeatureComputer:
        """The log-mel computer (its counters tell how often streams reused frames)."""
        return self._encoder.features

    def cache_stats(self) -> CacheStats:
        cache = self._encoder.cache
        return CacheStats(
            hits=cache.hits, misses=cache.misses, entries=len(cache), bytes=cache.nbytes
        )

    def clear_encoder_cache(self) -> None:
        """Forget cached encoder outputs (counts stay): for measurements that must not reuse
        the work of an earlier run over the same audio."""
        self._encoder.cache.clear()

    def release_stream(self, stream_key: Hashable) -> None:
        """The caller is done with a stream key (its utterance ended): its incremental
        log-mel state goes before the next batch. Safe from any thread."""
        self._encoder.release_stream(stream_key)

    def measure_costs(self, cache: Path | None = None, *, refresh: bool = False) -> CostProfile:
        """What the model costs on this device (``cost_probe``; measured once, then kept).

        ``cache``: a folder of stored profiles (``cost_cache``); a profile stored there for
        this model, device, compute type, thread count and machine is used instead of
        measuring (unless ``refresh``), and a fresh measurement is stored there."""
        if self._costs is None or refresh:
            key = self.cost_key()
            stored = None if cache is None or refresh else cost_cache.load(cache, key)
            if stored is not None:
                logger.info("model costs from %s: %s", cache, stored.to_dict())
                self._costs = stored
            else:
                with self._lock:
                    self._costs = cost_probe.measure(
                        self._ct2, self._fw, self._prompts, self._device
                    )
                logger.info("measured model costs: %s", self._costs.to_dict())
                if cache is not None:
                    cost_cache.store(cache, key, self._costs)
        return self._costs

    def cost_key(self) -> cost_cache.CostKey:
        """What a measured cost profile depends on (the cost cache's key)."""
        return cost_cache.CostKey(
            model=f"{self._config.name}|{cost_cache.weights_id(Path(self._path))}",
            device=self._device,
            compute_type=self._compute_type,
            threads=self._config.threads,
            replicas=self._replicas.count,
            machine=cost_cache.machine_id(str(getattr(self._fw.ctranslate2, "__version__", "?"))),
        )

    def decode_batch(self, requests: Sequence[DecodeRequest]) -> list[DecodeResult]:
        """Decode every request; results come back in request order.

        Raises ConfigError (before any model work) for an invalid request, and DecodeError when
        the model fails on the batch; never returns partial or mixed-up results.
        """
        if not requests:
            return []
        jobs = [Job(i, r, self._check(r)) for i, r in enumerate(requests)]
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
        samples = check_audio(audio)
        if not self._multilingual:
            return "en", 1.0
        if decoding.is_negligible(samples, self._config.silence_rms):
            return "en", 0.0
        job = Job(0, DecodeRequest(audio=samples, kind=DecodeKind.FINAL), samples)
        with self._lock:
            try:
                self._encoder.encode([job])
                ranked = self._detect([job])[0]
            except Exception as exc:
                raise DecodeError(f"language detection failed: {exc}") from exc
        token, prob = ranked[0]
        return token[2:-2], float(prob)

    # -- the batch ---------------------------------------------------------------------------

    def _decode(self, jobs: list[Job]) -> list[DecodeResult]:
        results: list[DecodeResult | None] = [None] * len(jobs)
        active: list[Job] = []
        for job in jobs:
            if decoding.is_negligible(job.audio, self._config.silence_rms):
                results[job.index] = self._empty_result(job, no_speech_prob=1.0)
            else:
                active.append(job)
        if active:
            self._encoder.encode(active)
            # generate takes one encoder length per call: each length decodes on its own, so
            # no request is padded to a batch-mate's length (same-length requests still batch).
            for group in group_by_frames(active):
                self._prompts.assign_languages(group, self._detect)
                for job in group:
                    self._prompts.build(job)
                self._decode_active(group)
                self._aligner.align(
                    [
                        j
                        for j in group
                        if j.chosen is not None and j.request.wants_words(j.chosen.text)
                    ]
                )
            for job in active:
                results[job.index] = self._result(job)
        out = [r for r in results if r is not None]
        if len(out) != len(jobs):  # a bug, not a model failure: never return a short list
            raise DecodeError("internal error: a request got no result")
        return out

    def _decode_active(self, active: list[Job]) -> None:
        """Set ``chosen`` of every job: partials in one pass, finals with the fallback."""
        partials = [j for j in active if not j.final]
        finals = [j for j in active if j.final]
        by_beam: dict[int, list[Job]] = {}
        for job in partials:  # greedy unless the request asks for a beam
            by_beam.setdefault(job.request.beam_size or 1, []).append(job)
        for beam, group in by_beam.items():
            caps = [j.request.max_new_tokens or self._config.partial_max_new_tokens for j in group]
            hyps = self._generate(group, temperature=0.0, beam_size=beam, caps=caps)
            for job, hyp in zip(group, hyps, strict=True):
                job.chosen = hyp
        if finals:
            self._fallback.decode(finals, self._generate)

    def _detect(self, jobs: Sequence[Job]) -> list[Any]:
        return list(self._ct2.detect_language(self._encoder.stack(jobs)))

    # -- results -----------------------------------------------------------------------------

    def _empty_result(self, job: Job, *, no_speech_prob: float) -> DecodeResult:
        r = job.request
        return DecodeResult(
            request_id=r.request_id,
            kind=r.kind,
            text="",
            language=r.language or "en",
            no_speech_prob=no_speech_prob,
            encoder_cache_hit=job.cache_hit,
        )

    def _result(self, job: Job) -> DecodeResult:
        hyp = job.chosen
        if hyp is None:
            raise DecodeError(f"internal error: request {job.request.request_id!r} not decoded")
        silent = decoding.suppressed(hyp, self._th)
        text, words = ("", ()) if silent else without_repeats(hyp.text, job.words)
        return DecodeResult(
            request_id=job.request.request_id,
            kind=job.request.kind,
            text=text,
            words=words,
            language=job.language,
            avg_logprob=hyp.avg_logprob,
            no_speech_prob=hyp.no_speech_prob,
            compression_ratio=hyp.compression_ratio,
            temperature=hyp.temperature,
            encoder_cache_hit=job.cache_hit,
            tokens=() if silent else hyp.tokens,
            fallback=None if silent or not job.final else self._fallback.reason(hyp),
            next_round=job.next_round,
        )


def without_repeats(text: str, words: tuple[Word, ...]) -> tuple[str, tuple[Word, ...]]:
    """A decode's text and words with loops and doubled runs cut (repeats.py): no surface
    shows words the model repeated and the audio did not say."""
    tokens = text.split()
    keep = repeats.repeat_cut(tokens)
    kept_words = tuple(words[i] for i in repeats.repeat_cut([w.word for w in words]))
    if len(keep) < len(tokens):
        return (" " if text[:1].isspace() else "") + " ".join(tokens[i] for i in keep), kept_words
    if len(kept_words) < len(words):
        # A loop inside one spaced token ("Y-Y-Y-Y-Y") shows in the aligned words ("Y", "-Y",
        # ...): the text is what the kept words say.
        return "".join(w.word for w in kept_words), kept_words
    return text, words
