"""Data passed between the model adapter and its callers (file pipeline, streaming engine).

Audio is float32 mono at 16 kHz; positions inside a window are seconds relative to the start
of that window (the adapter knows nothing about streams or files).
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

SAMPLE_RATE = 16000
MAX_WINDOW_SAMPLES = 30 * SAMPLE_RATE


TASKS = ("transcribe", "translate")


class DecodeKind(enum.Enum):
    """PARTIAL: greedy, token cap, no fallback. FINAL: beam, fallback, word timestamps."""

    PARTIAL = "partial"
    FINAL = "final"


class Purpose(enum.Enum):
    """What a decode is for: how the streaming engine ranks and routes it. The model sees
    only the request's ``DecodeKind`` (a partial's, or a final's for every other purpose)."""

    PARTIAL = "partial"
    FINAL = "final"  # a live stream's final
    SPECULATIVE = "speculative final"  # decoded during a pause, void if speech resumes
    REFINEMENT = "refinement"  # a second decode of an earlier final (streaming/core/refine.py)
    UPLOAD = "upload"  # a file's or an upload's window (Engine.decode_offline)

    @classmethod
    def of_kind(cls, kind: DecodeKind) -> Purpose:
        """The purpose a request of ``kind`` has when it names none: a plain partial or final."""
        return cls.PARTIAL if kind is DecodeKind.PARTIAL else cls.FINAL

    def fits(self, kind: DecodeKind) -> bool:
        """Whether a request of ``kind`` may have this purpose: a partial's is a partial
        decode, every live final's a final one; an upload's may be either."""
        return self is Purpose.UPLOAD or (self is Purpose.PARTIAL) == (kind is DecodeKind.PARTIAL)


@dataclass(frozen=True, eq=False)
class DecodeRequest:
    """One window of audio to decode.

    ``cache_key`` names the exact window for the encoder cache; when None the adapter keys by
    a hash of the samples. ``prompt`` is previous text to condition on; ``prefix`` is text the
    decoder must start with (e.g. the stable part of a partial), and it is part of the result.

    ``context`` is the text already known for the window's leading audio (a stream's earlier
    finals): the decoder is forced to start with it, before ``prefix``, and the result holds
    only what follows it. Word times stay relative to the window's start, context included.
    """

    audio: np.ndarray
    kind: DecodeKind
    request_id: Hashable = 0
    prompt: str | None = None
    prefix: str | None = None
    context: str | None = None
    # Names and terms the audio may hold (an API's keyterms or keywords): they go first in
    # Whisper's previous-text section, before ``prompt``, as faster-whisper's ``hotwords``.
    hotwords: str | None = None
    language: str | None = None
    # With no ``language``: the codes detection may choose from (OpenAI's ``languages``);
    # empty: any the model knows.
    languages: tuple[str, ...] = ()
    word_timestamps: bool = False
    # Word timings also where speech may have been skipped: when the text has fewer characters
    # per second of audio than this (the file pipeline's check for skipped speech), aligned in
    # the same pass rather than decoded again. None: only as word_timestamps says.
    words_below_chars_per_s: float | None = None
    beam_size: int | None = None
    max_new_tokens: int | None = None
    cache_key: Hashable | None = None
    # Requests with the same stream_key whose audio extends the previous request's audio let
    # the adapter reuse already-computed spectrogram frames (incremental log-mel).
    stream_key: Hashable | None = None
    # What the decode is for (``Purpose``), the one field the engine ranks and routes by: a
    # speculative final runs only on idle capacity; a refinement at the lowest live priority,
    # on the refinement model, dropped rather than let it delay live work. None: the kind's
    # own (``Purpose.of_kind``), filled in on construction.
    purpose: Purpose | None = None
    # None: the model runs every temperature-fallback round itself. k: run only round k of
    # its temperature schedule and say in the result whether round k + 1 should follow, so a
    # caller can queue each round as a request of its own (one fallback never holds a batch).
    fallback_round: int | None = None
    # "translate": Whisper's English translation task (multilingual models only).
    task: str = "transcribe"
    # None: the encoder runs on 30 s, the window padded with silence (Whisper's way). s: it
    # runs on at least s seconds, or the window plus a second of silence if that is longer,
    # in whole seconds up to 30: the encoder's cost grows with its input, and a stream's
    # windows are mostly far shorter than 30 s (encoder_frames; benchmarks/RESULTS.md
    # "bench_accuracy").
    encode_min_s: float | None = None

    def __post_init__(self) -> None:
        if self.purpose is None:
            object.__setattr__(self, "purpose", Purpose.of_kind(self.kind))
        elif not self.purpose.fits(self.kind):
            raise ValueError(f"a {self.purpose.value} request cannot be a {self.kind.value}")

    # Views of ``purpose``, for readers outside the engine (the fake model, benchmarks).
    @property
    def speculative(self) -> bool:
        return self.purpose is Purpose.SPECULATIVE

    @property
    def refinement(self) -> bool:
        return self.purpose is Purpose.REFINEMENT

    def wants_words(self, text: str) -> bool:
        """Whether the result with this text gets word timings."""
        if self.word_timestamps:
            return True
        rate = self.words_below_chars_per_s
        text = text.strip()
        return rate is not None and bool(text) and len(text) < rate * len(self.audio) / SAMPLE_RATE


@dataclass(frozen=True)
class Word:
    word: str
    start: float
    end: float
    probability: float


@dataclass(frozen=True)
class DecodeResult:
    """The outcome of one request. ``error`` is set (and ``text`` empty) when it failed.

    ``text``, ``words`` and ``tokens`` never include the request's ``context``; the scores
    (``avg_logprob``, ``compression_ratio``) are over the tokens after it.
    """

    request_id: Hashable
    kind: DecodeKind
    text: str
    words: tuple[Word, ...] = ()
    language: str = "en"
    avg_logprob: float = 0.0
    no_speech_prob: float = 0.0
    compression_ratio: float = 0.0
    temperature: float = 0.0
    encoder_cache_hit: bool = False
    error: str | None = None
    tokens: tuple[int, ...] = field(default=())
    # Why this hypothesis failed the fallback checks ("repetitive" or "unlikely"); None when
    # it passed, was silence, or is not a final.
    fallback: str | None = None
    # Set only for a request with fallback_round: the round to ask for next (None: done).
    next_round: int | None = None


class Decoder(Protocol):
    """What the pipeline and the engine need of a model: the real adapter or a test fake."""

    @property
    def name(self) -> str: ...

    @property
    def multilingual(self) -> bool: ...

    def decode_batch(self, requests: Sequence[DecodeRequest]) -> list[DecodeResult]: ...


FULL_ENCODER_FRAMES = 3000  # Whisper's 30 s input, 10 ms a frame
_FRAMES_STEP = 100  # whole seconds, so a stream's growing windows share few input lengths
_PAD_FRAMES = 100  # silence after the window, at least: the model hears where speech stops


def encoder_frames(n_samples: int, min_s: float | None) -> int:
    """The encoder's input length, in frames, for a window of ``n_samples`` (see
    ``DecodeRequest.encode_min_s``)."""
    if min_s is None:
        return FULL_ENCODER_FRAMES
    needed = max(n_samples / (SAMPLE_RATE / 100) + _PAD_FRAMES, min_s * 100)
    steps = -(-round(needed) // _FRAMES_STEP)
    return max(_FRAMES_STEP, min(FULL_ENCODER_FRAMES, steps * _FRAMES_STEP))


def encoder_window_limit(min_s: float | None) -> int:
    """The longest window, in samples, that ``encoder_frames(n, min_s)`` encodes on
    ``min_s`` alone (with its second of silence): MAX_WINDOW_SAMPLES for Whisper's 30 s."""
    if min_s is None:
        return MAX_WINDOW_SAMPLES
    frames = min(round(min_s * 100), FULL_ENCODER_FRAMES) - _PAD_FRAMES
    return max(0, frames * (SAMPLE_RATE // 100))
