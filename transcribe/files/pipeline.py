"""The offline file pipeline: load -> VAD windows -> batched decode -> stitched transcript.

Windows of all files go through one FIFO queue, so a batch mixes the tail of one file with the
head of the next and the model always sees full batches. Files are loaded lazily, only as far
ahead as the queue needs, and results come back in input order as soon as each file is done.
No text is carried from one window to the next (that would serialise a file's windows); the
windows are cut at pauses, so little context is lost. Speech the model skipped inside a packed
window (found by word alignment) is decoded again as a window of its own.
"""

from __future__ import annotations

import logging
import re
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from kettle.transcribe.errors import ConfigError, KettleError, ModelError
from kettle.transcribe.files.progress import Progress
from kettle.transcribe.files.result_cache import ResultCache
from kettle.transcribe.files.windows import Window, WindowConfig, split_windows
from kettle.transcribe.model import keyterms
from kettle.transcribe.speakers.clusters import DEFAULT_MAX_SPEAKERS
from kettle.transcribe.speakers.diarize import diarize_transcript
from kettle.transcribe.speakers.encoder import SpeakerEncoder
from kettle.transcribe.transcript import DecodeStats, Segment, Transcript
from kettle.transcribe.types import (
    SAMPLE_RATE,
    TASKS,
    DecodeKind,
    Decoder,
    DecodeRequest,
    DecodeResult,
    Word,
    encoder_frames,
)

# Batches' worth of windows queued ahead, so most batches are of one encoder length.
LOOKAHEAD_BATCHES = 4

log = logging.getLogger(__name__)

_SENTENCE_END = re.compile(r"[.?!…。？！]['\")\]]*$")
_MAX_WORD_S = 1.0
# Languages written without spaces between words (Whisper's word splitting knows them too).
_NO_SPACE_LANGUAGES = frozenset({"zh", "ja", "th", "lo", "my", "yue"})
_SENTENCE_SPLIT = re.compile(r"(?<=[.?!…])\s+")


@dataclass(frozen=True)
class PipelineConfig:
    """Options of one transcription run (they are part of the result-cache key)."""

    batch_size: int = 8
    beam_size: int | None = None
    language: str | None = None
    languages: tuple[str, ...] = ()  # with no language: the codes detection may choose from
    word_timestamps: bool = False
    max_cue_s: float = 7.0
    max_cue_chars: int = 84
    windows: WindowConfig = field(default_factory=WindowConfig)
    # Whisper sometimes skips speech in a window packed with several utterances: it ends the
    # text early, or jumps over an utterance. Speech no aligned word covers for
    # ``recover_gap_s`` or more is decoded again as a window of its own, up to
    # ``recover_depth`` rounds (one: further rounds cost 1.6x the time and gained no
    # accuracy). Words are aligned in the first pass only for a window whose text is short
    # for its speech (under ``recover_chars_per_s``; read speech runs at 12-17), or for every
    # window with ``recover_align_all``. 17 aligns all but the fastest speech: on the joined
    # eval set it found the skips 11 missed (7.58 % WER vs 7.95 %) for 1.05-1.12x the time,
    # about what aligning every window costs (RESULTS.md, "bench_align_gate"). Depth 0 turns
    # it all off.
    recover_gap_s: float = 1.5
    recover_depth: int = 1
    recover_chars_per_s: float = 17.0
    recover_align_all: bool = False
    task: str = "transcribe"  # or "translate" (to English; multilingual models)
    prompt: str | None = None  # text to condition every window on (names, vocabulary)
    keyterms: tuple[str, ...] = ()  # every window's hotwords (keyterms.normalize's form)
    diarize: bool = False  # label each segment's speaker (transcribe_files gets the encoder)
    max_speakers: int = DEFAULT_MAX_SPEAKERS
    # The encoder runs on the window and a second of silence, at least this many seconds, not
    # on Whisper's 30 s (DecodeRequest.encode_min_s; None: 30 s): its cost grows with its
    # input, and the shorter input lost no words (bench_files).
    encode_min_s: float | None = 10.0

    def __post_init__(self) -> None:
        if not 1 <= self.batch_size <= 256:
            raise ConfigError(f"batch size must be within 1..256, got {self.batch_size}")
        if self.beam_size is not None and not 1 <= self.beam_size <= 20:
            raise ConfigError(f"beam size must be within 1..20, got {self.beam_size}")
        if self.max_cue_s <= 0 or self.max_cue_chars <= 0:
            raise ConfigError("cue limits must be positive")
        if self.recover_gap_s < 0 or self.recover_depth < 0 or self.recover_chars_per_s < 0:
            raise ConfigError("recover settings must not be negative")
        if self.task not in TASKS:
            raise ConfigError(f"task must be one of {', '.join(TASKS)}, not {self.task!r}")
        if not 1 <= self.max_speakers <= 16:
            raise ConfigError(f"max speakers must be within 1..16, got {self.max_speakers}")
        if self.encode_min_s is not None and not 0.0 <= self.encode_min_s <= 30.0:
            raise ConfigError(f"encode_min_s must be within 0..30, got {self.encode_min_s}")

    @property
    def recovers(self) -> bool:
        return self.recover_depth > 0 and self.recover_gap_s > 0

    def cache_options(self) -> dict[str, object]:
        w = self.windows
        return {
            "beam_size": self.beam_size,
            "language": self.language,
            **({"languages": list(self.languages)} if self.languages else {}),
            **({"task": self.task} if self.task != "transcribe" else {}),
            **({"prompt": self.prompt} if self.prompt else {}),
            **({"keyterms": list(self.keyterms)} if self.keyterms else {}),
            # Only when on: keys of undiarized runs stay as they were before diarization.
            **({"diarize": self.max_speakers} if self.diarize else {}),
            "word_timestamps": self.word_timestamps,
            "max_cue_s": self.max_cue_s,
            "max_cue_chars": self.max_cue_chars,
            "recover": [self.recover_gap_s, self.recover_depth, self.recover_chars_per_s,
                        self.recover_align_all]
            if self.recovers
            else None,
            "encode_min_s": self.encode_min_s,
            "windows": [w.max_window_s, w.vad, w.vad_threshold, w.min_silence_ms,
                        w.speech_pad_ms, w.min_speech_ms],
        }  # fmt: skip


@dataclass(frozen=True)
class FileJob:
    """One input: a display name, how to load its audio, and its result-cache key (if any)."""

    name: str
    load: Callable[[], np.ndarray]
    cache_key: str | None = None
    expected_s: float = 0.0


@dataclass(frozen=True)
class FileOutcome:
    name: str
    transcript: Transcript | None
    error: str | None = None
    cached: bool = False
    worker: str = ""  # "PID@HOST" of the process that transcribed it, when not this one

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(eq=False)
class _FileState:
    job: FileJob
    audio: np.ndarray | None = None
    windows: list[Window] = field(default_factory=list)
    # Finished windows by key: (window index,), and for speech a window skipped, decoded
    # again, the parent's key plus 0. Segments are sorted by time when the file is done.
    results: dict[tuple[int, ...], tuple[Window, DecodeResult]] = field(default_factory=dict)
    outstanding: int = 0
    outcome: FileOutcome | None = None
    speakers: SpeakerEncoder | None = None  # with config.diarize: labels the finished segments

    @property
    def done(self) -> bool:
        return self.outcome is not None


def transcribe_files(
    jobs: Iterable[FileJob],
    decoder: Decoder,
    config: PipelineConfig | None = None,
    *,
    cache: ResultCache | None = None,
    progress: Progress | None = None,
    speakers: SpeakerEncoder | None = None,
) -> Iterator[FileOutcome]:
    """Transcribe files, yielding one outcome per job, in input order, as each completes.

    A file that fails (unreadable audio, failed decode) yields an outcome with ``error`` set;
    the other files are unaffected. With ``config.diarize``, ``speakers`` labels each
    segment's speaker before the transcript is cached (the key says diarize).
    """
    config = config or PipelineConfig()
    if config.diarize and speakers is None:
        raise ConfigError("diarize needs a speaker encoder")
    job_iter = iter(jobs)
    exhausted = False
    states: deque[_FileState] = deque()
    queue: deque[_Work] = deque()
    # Skipped speech decoded again: short windows, batched apart from full ones.
    retries: deque[_Work] = deque()
    # Windows queued ahead, so a batch can be of one encoder length (one generate call).
    ahead = config.batch_size * LOOKAHEAD_BATCHES

    while True:
        # Load files until enough batches are queued (or there is nothing more to load).
        while not exhausted and len(queue) < ahead:
            job = next(job_iter, None)
            if job is None:
                exhausted = True
                break
            state = _FileState(job, speakers=speakers if config.diarize else None)
            states.append(state)
            _start_file(state, decoder, config, cache, progress)
            queue.extend(_Work(state, w, (w.index,)) for w in state.windows)
        source = retries if len(retries) >= config.batch_size or not queue else queue
        if source:
            batch = take_batch(source, config.batch_size, config.encode_min_s)
            retries.extend(_decode(batch, decoder, config, progress))
            for state in dict.fromkeys(w.state for w in batch):
                _maybe_finish(state, decoder, config, cache, progress)
        while states and states[0].done:
            outcome = states.popleft().outcome
            assert outcome is not None
            yield outcome
        if exhausted and not queue and not retries:
            break
    assert not states, "every file finishes once its windows are decoded"


def transcribe_audio(
    audio: np.ndarray, decoder: Decoder, config: PipelineConfig | None = None
) -> Transcript:
    """Transcribe one in-memory recording (float32 mono 16 kHz); raises on failure."""
    (outcome,) = transcribe_files([FileJob("<audio>", lambda: audio)], decoder, config)
    if outcome.transcript is None:
        raise KettleError(outcome.error or "transcription failed")
    return outcome.transcript


def _start_file(
    state: _FileState,
    decoder: Decoder,
    config: PipelineConfig,
    cache: ResultCache | None,
    progress: Progress | None,
) -> None:
    job = state.job
    if cache is not None and job.cache_key is not None:
        hit = cache.get(job.cache_key)
        if hit is not None:
            state.outcome = FileOutcome(job.name, hit, cached=True)
            if progress is not None:
                progress.loaded(job.name, hit.duration_s)
                progress.advance(hit.duration_s)
                progress.file_done()
            return
    try:
        audio = job.load()
        windows = split_windows(audio, config.windows)
    except KettleError as exc:
        _fail(state, str(exc), progress, unloaded=True)
        return
    except Exception as exc:  # a bug or a library surprise must not sink the other files
        log.debug("loading %s failed", job.name, exc_info=True)
        _fail(state, f"{type(exc).__name__}: {exc}", progress, unloaded=True)
        return
    state.audio = audio
    state.windows = windows
    state.outstanding = len(windows)
    duration = len(audio) / SAMPLE_RATE
    if progress is not None:
        progress.loaded(job.name, duration)
    if not windows:
        if progress is not None:
            progress.advance(duration)
        _maybe_finish(state, decoder, config, cache, progress)


def _fail(
    state: _FileState, reason: str, progress: Progress | None, *, unloaded: bool = False
) -> None:
    state.outcome = FileOutcome(state.job.name, None, error=reason)
    state.audio = None
    state.results.clear()
    if progress is not None:
        if unloaded:
            progress.loaded(state.job.name, 0.0)
        progress.file_done()


@dataclass(frozen=True, eq=False)
class _Work:
    state: _FileState
    window: Window
    key: tuple[int, ...]

    @property
    def depth(self) -> int:
        """0 for a window of the file's own, k for speech skipped k rounds deep."""
        return len(self.key) - 1


# Windows' encoder lengths in steps this long: most of a batch share one (a generate call),
# for a little more padding (bench_files: 1 s steps 40.1 audio s/s at 7.45 % WER, 5 s steps
# 43.7 at 6.94 %, the batch's longest for all 48.1 at 8.08 %, one run each, same machine).
ENCODE_STEP_S = 5.0


def window_encode_s(n_samples: int, floor_s: float | None) -> float | None:
    """A window's encoder length: its own audio and a second of silence, rounded up to
    ENCODE_STEP_S (so most windows share a few lengths), at least ``floor_s``."""
    if floor_s is None:
        return None
    step = ENCODE_STEP_S
    own = -(-(n_samples / SAMPLE_RATE + 1.0) // step) * step
    return min(30.0, max(floor_s, own))


def take_batch(source: deque[_Work], size: int, encode_min_s: float | None) -> list[_Work]:
    """Up to ``size`` queued windows, taken out of ``source``: the oldest and those of its
    encoder length, then, to fill the batch, those of the length most others share. Each
    request is encoded on its own length and the decoder runs one generate call per length,
    so a batch holds at most two; the oldest always goes, so none waits for ever."""
    sizes = [w.window.num_samples for w in source]
    lengths = [encoder_frames(n, window_encode_s(n, encode_min_s)) for n in sizes]
    chosen = [i for i, n in enumerate(lengths) if n == lengths[0]][:size]
    others = Counter(n for n in lengths if n != lengths[0])
    if len(chosen) < size and others:
        fill = others.most_common(1)[0][0]
        chosen += [i for i, n in enumerate(lengths) if n == fill][: size - len(chosen)]
    picked = set(chosen)
    batch = [w for i, w in enumerate(source) if i in picked]
    rest = [w for i, w in enumerate(source) if i not in picked]
    source.clear()
    source.extend(rest)
    return batch


def _decode(
    batch: Sequence[_Work],
    decoder: Decoder,
    config: PipelineConfig,
    progress: Progress | None,
) -> list[_Work]:
    """Decode one batch into the files' states; returns the skipped speech to decode again."""
    work = [w for w in batch if not w.state.done and w.state.audio is not None]
    live = [(w.state, w.window) for w in work]
    requests = [
        DecodeRequest(
            audio=w.audio(s.audio) if s.audio is not None else np.zeros(0, np.float32),
            kind=DecodeKind.FINAL,
            request_id=i,
            language=config.language,
            languages=config.languages,
            word_timestamps=config.word_timestamps or (checked and config.recover_align_all),
            words_below_chars_per_s=config.recover_chars_per_s if checked else None,
            beam_size=config.beam_size,
            prompt=config.prompt,
            hotwords=keyterms.hotwords(config.keyterms),
            task=config.task,
            encode_min_s=window_encode_s(w.num_samples, config.encode_min_s),
        )
        for i, ((s, w), item) in enumerate(zip(live, work, strict=True))
        for checked in [_checks_skips(item.depth, config)]
    ]
    try:
        results = decoder.decode_batch(requests) if requests else []
        by_id = {r.request_id: r for r in results}
        missing = [i for i in range(len(live)) if i not in by_id]
        if missing:
            raise KettleError(f"decoder returned no result for {len(missing)} window(s)")
    except (ModelError, ConfigError):
        raise  # the model or the options are unusable: every file would fail the same way
    except Exception as exc:
        log.debug("decode batch failed", exc_info=True)
        reason = str(exc) if isinstance(exc, KettleError) else f"decode failed: {exc}"
        for s, _ in live:
            if not s.done:
                _fail(s, reason, progress)
        return []
    again: list[_Work] = []
    for i, ((s, w), item) in enumerate(zip(live, work, strict=True)):
        result = by_id[i]
        key = item.key
        s.results[key] = (w, result)
        s.outstanding -= 1
        if progress is not None:
            progress.advance((w.cover[1] - w.cover[0]) / SAMPLE_RATE)
        skipped = _skipped_speech(result, w, item.depth, config)
        if skipped is not None:
            log.debug("window %s: re-decoding %.1f s of speech no word covered",
                      key, skipped.num_samples / SAMPLE_RATE)  # fmt: skip
            s.outstanding += 1
            again.append(_Work(s, skipped, (*key, 0)))
    return again


def uncovered(
    words: Sequence[Word], duration_s: float, min_gap_s: float
) -> list[tuple[float, float]]:
    """Stretches of a window (seconds) of at least ``min_gap_s`` that no word covers."""
    gaps = []
    prev_end = 0.0
    for word in sorted(words, key=lambda w: w.start):
        if word.start - prev_end >= min_gap_s:
            gaps.append((prev_end, word.start))
        # Alignment stretches a word over speech the text skipped: no word covers more
        # than _MAX_WORD_S.
        prev_end = max(prev_end, min(word.end, word.start + _MAX_WORD_S))
    if duration_s - prev_end >= min_gap_s:
        gaps.append((prev_end, duration_s))
    return gaps


def _checks_skips(depth: int, config: PipelineConfig) -> bool:
    """Whether this window's words are looked at for skipped speech (its result may be)."""
    return config.recovers and depth < config.recover_depth


def _skipped_speech(
    result: DecodeResult, window: Window, depth: int, config: PipelineConfig
) -> Window | None:
    """A window of the speech the decoder skipped, or None when it covered everything.

    Only windows with text are checked: an empty result is the model saying "no speech",
    and asking again would cost an encoder pass to hear the same.
    """
    if not config.recovers or depth >= config.recover_depth or result.error:
        return None
    if not result.text.strip() or not result.words:
        return None
    duration = window.num_samples / SAMPLE_RATE
    spans: list[tuple[int, int]] = []
    for start, end in uncovered(result.words, duration, config.recover_gap_s):
        spans.extend(window.slice(start, end))
    if sum(e - s for s, e in spans) < config.recover_gap_s * SAMPLE_RATE:
        return None
    # Progress was counted with the parent window: the retry covers nothing new.
    return Window(window.index, tuple(spans), (spans[0][0], spans[0][0]))


def _maybe_finish(
    state: _FileState,
    decoder: Decoder,
    config: PipelineConfig,
    cache: ResultCache | None,
    progress: Progress | None,
) -> None:
    if state.done or state.outstanding > 0:
        return
    assert state.audio is not None
    errors = [r.error for _, r in state.results.values() if r.error]
    if errors:
        _fail(state, f"decode failed: {errors[0]}", progress)
        return
    duration = len(state.audio) / SAMPLE_RATE
    segments: list[Segment] = []
    for key in sorted(state.results):
        window, result = state.results[key]
        segments.extend(window_segments(result, window, config))
    if not config.word_timestamps:  # aligned for recovery only: keep the cue times, not words
        segments = [replace(g, words=()) for g in segments]
    languages = [r.language for _, r in state.results.values() if r.text.strip()]
    language = max(set(languages), key=languages.count) if languages else (config.language or "")
    transcript = Transcript(
        duration_s=duration,
        language=language,
        segments=tuple(_tidy(segments, duration)),
        model=decoder.name,
    )
    if state.speakers is not None:
        try:
            transcript = diarize_transcript(
                state.speakers, state.audio, transcript, config.max_speakers
            )
        except Exception as exc:  # one file's failed labelling must not sink the others
            log.debug("labelling speakers of %s failed", state.job.name, exc_info=True)
            _fail(state, f"speaker labels failed: {type(exc).__name__}: {exc}", progress)
            return
    state.outcome = FileOutcome(state.job.name, transcript)
    state.audio = None
    state.results.clear()
    if cache is not None and state.job.cache_key is not None:
        cache.put(state.job.cache_key, transcript)
    if progress is not None:
        progress.file_done()


def window_segments(result: DecodeResult, window: Window, config: PipelineConfig) -> list[Segment]:
    """Readable segments of one window, in recording time, with the window's decode stats."""
    text = result.text.strip()
    if not text:
        return []
    segments = _window_segments(text, result, window, config)
    stats = DecodeStats(
        # The tokens belong to the whole window: only a window that is one segment has them.
        tokens=result.tokens if len(segments) == 1 else (),
        temperature=result.temperature,
        avg_logprob=result.avg_logprob,
        compression_ratio=result.compression_ratio,
        no_speech_prob=result.no_speech_prob,
    )
    return [replace(seg, stats=stats) for seg in segments]


def _window_segments(
    text: str, result: DecodeResult, window: Window, config: PipelineConfig
) -> list[Segment]:
    if result.words:
        words = [
            Word(
                w.word, window.to_source(w.start), window.to_source(w.end, end=True), w.probability
            )
            for w in result.words
        ]
        spaced = result.language not in _NO_SPACE_LANGUAGES
        return split_words(words, config.max_cue_s, config.max_cue_chars, spaced=spaced)
    return split_text(text, window, config.max_cue_s)


def join_words(words: Sequence[Word], spaced: bool = True) -> str:
    """Whisper's words carry their leading space; words from elsewhere may not."""
    if spaced and not any(w.word[:1].isspace() for w in words[1:]):
        return " ".join(w.word.strip() for w in words)
    return "".join(w.word for w in words).strip()


def split_words(
    words: Sequence[Word], max_s: float, max_chars: int, *, spaced: bool = True
) -> list[Segment]:
    """Group timed words into cues: break after a sentence end, before a long pause, and
    before a word that would make the cue longer than ``max_s`` or ``max_chars``."""
    segments: list[Segment] = []
    group: list[Word] = []

    def flush() -> None:
        if group:
            text = join_words(group, spaced)
            if text:
                segments.append(Segment(group[0].start, group[-1].end, text, tuple(group)))
            group.clear()

    for word in words:
        if group:
            chars = len("".join(w.word for w in group)) + len(word.word)
            too_long = word.end - group[0].start > max_s or chars > max_chars
            pause = word.start - group[-1].end > 1.0
            if too_long or pause:
                flush()
        group.append(word)
        if _SENTENCE_END.search(word.word.strip()) and group[-1].end - group[0].start >= 1.0:
            flush()
    flush()
    return segments


def split_text(text: str, window: Window, max_s: float) -> list[Segment]:
    """Without word times: one segment per sentence, times spread by character count over the
    window's speech (approximate, but each cue lands inside the speech it belongs to)."""
    sentences = [s for s in _SENTENCE_SPLIT.split(text) if s.strip()]
    total_s = window.num_samples / SAMPLE_RATE
    if len(sentences) <= 1 or total_s <= max_s:
        return [Segment(window.to_source(0.0), window.to_source(total_s, end=True), text)]
    weights = np.cumsum([0] + [len(s) + 1 for s in sentences], dtype=np.float64)
    bounds = weights / weights[-1] * total_s
    return [
        Segment(
            window.to_source(float(bounds[i])),
            window.to_source(float(bounds[i + 1]), end=True),
            s.strip(),
        )
        for i, s in enumerate(sentences)
    ]


def _tidy(segments: list[Segment], duration: float) -> list[Segment]:
    """Clamp to the recording and make times non-decreasing and non-overlapping."""
    out: list[Segment] = []
    prev_end = 0.0
    for seg in sorted(segments, key=lambda s: s.start):
        start = min(max(seg.start, prev_end), duration)
        end = min(max(seg.end, start), duration)
        out.append(replace(seg, start=start, end=end))
        prev_end = end
    return out
