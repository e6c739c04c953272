"""Cut a long recording into decode windows of at most 30 s of speech.

Silero VAD finds the speech; consecutive speech chunks are packed greedily into one window
(their audio joined, the silence between them dropped) until the next chunk would overflow
the window. Each window remembers the source spans it was joined from, so a time inside the
window maps back to the recording (``Window.to_source``). This is the packing faster-whisper's
batched pipeline uses, kept here so kettle can batch windows across files.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from kettle.transcribe.errors import ConfigError
from kettle.transcribe.types import MAX_WINDOW_SAMPLES, SAMPLE_RATE

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WindowConfig:
    """How a recording is cut. ``vad=False`` cuts fixed windows with no speech detection."""

    # Windows are packed up to 20 s, not the model's 30: tiny.en skips speech in fuller windows
    # (bench_files, concatenated eval audio: 30 s windows 28.0 % WER, 25 s 14.8 %, 20 s 17.2 %
    # without recovery and 7.6 % with it, at no loss of speed).
    max_window_s: float = 20.0
    vad: bool = True
    vad_threshold: float = 0.5
    min_silence_ms: int = 160
    speech_pad_ms: int = 400
    min_speech_ms: int = 0

    def __post_init__(self) -> None:
        if not 1.0 <= self.max_window_s <= MAX_WINDOW_SAMPLES / SAMPLE_RATE:
            raise ConfigError(f"max_window_s must be within 1..30 s, got {self.max_window_s}")
        if not 0.0 < self.vad_threshold < 1.0:
            raise ConfigError(f"vad_threshold must be within (0, 1), got {self.vad_threshold}")
        if self.min_silence_ms < 0 or self.speech_pad_ms < 0 or self.min_speech_ms < 0:
            raise ConfigError("VAD durations must not be negative")

    @property
    def max_window_samples(self) -> int:
        return int(self.max_window_s * SAMPLE_RATE)


@dataclass(frozen=True)
class Window:
    """Speech spans of one recording (source sample ranges, in order) decoded as one window.

    ``cover`` is the part of the recording this window accounts for (for progress): windows of
    a recording cover it without gaps or overlap.
    """

    index: int
    spans: tuple[tuple[int, int], ...]
    cover: tuple[int, int]
    _offsets: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.spans:
            raise ValueError("a window needs at least one span")
        offsets = [0]
        for start, end in self.spans:
            if end <= start:
                raise ValueError(f"empty or reversed span {start}..{end}")
            offsets.append(offsets[-1] + end - start)
        object.__setattr__(self, "_offsets", tuple(offsets))

    @property
    def start(self) -> int:
        return self.spans[0][0]

    @property
    def end(self) -> int:
        return self.spans[-1][1]

    @property
    def num_samples(self) -> int:
        return self._offsets[-1]

    def slice(self, start_s: float, end_s: float) -> list[tuple[int, int]]:
        """The source spans under window times ``start_s..end_s`` (seconds)."""
        lo = min(max(int(start_s * SAMPLE_RATE), 0), self.num_samples)
        hi = min(max(int(end_s * SAMPLE_RATE), lo), self.num_samples)
        out = []
        for (start, end), offset in zip(self.spans, self._offsets, strict=False):
            a = max(lo - offset, 0)
            b = min(hi - offset, end - start)
            if b > a:
                out.append((start + a, start + b))
        return out

    def audio(self, recording: np.ndarray) -> np.ndarray:
        if len(self.spans) == 1:
            start, end = self.spans[0]
            return recording[start:end]
        return np.concatenate([recording[s:e] for s, e in self.spans])

    def to_source(self, seconds: float, *, end: bool = False) -> float:
        """Map a time inside the window (seconds) to seconds in the recording.

        A time exactly at a joint of two spans maps to the start of the later span, or with
        ``end=True`` (the end of a word or cue) to the end of the earlier one.
        """
        pos = min(max(seconds * SAMPLE_RATE, 0.0), float(self.num_samples))
        find = bisect.bisect_left if end else bisect.bisect_right
        k = find(self._offsets, pos) - 1
        k = min(max(k, 0), len(self.spans) - 1)
        return (self.spans[k][0] + (pos - self._offsets[k])) / SAMPLE_RATE


def speech_spans(audio: np.ndarray, config: WindowConfig) -> list[tuple[int, int]]:
    """Silero speech chunks as sample ranges, each at most one window long."""
    from kettle.transcribe.model import fw

    options = fw.VadOptions(
        threshold=config.vad_threshold,
        min_speech_duration_ms=config.min_speech_ms,
        max_speech_duration_s=config.max_window_s,
        min_silence_duration_ms=config.min_silence_ms,
        speech_pad_ms=config.speech_pad_ms,
    )
    chunks = fw.get_speech_timestamps(audio, options, sampling_rate=SAMPLE_RATE)
    spans = [(int(c["start"]), min(int(c["end"]), len(audio))) for c in chunks]
    return [(s, e) for s, e in spans if e > s]


def pack_windows(
    spans: Sequence[tuple[int, int]], num_samples: int, max_samples: int
) -> list[Window]:
    """Pack ordered speech spans greedily into windows of at most ``max_samples``."""
    pieces: list[tuple[int, int]] = []
    for start, end in spans:
        # A span longer than a window (VAD padding, or no VAD) is cut hard.
        while end - start > max_samples:
            pieces.append((start, start + max_samples))
            start += max_samples
        if end > start:
            pieces.append((start, end))
    groups: list[list[tuple[int, int]]] = []
    used = max_samples + 1
    for piece in pieces:
        length = piece[1] - piece[0]
        if used + length > max_samples:
            groups.append([])
            used = 0
        groups[-1].append(piece)
        used += length
    windows = []
    for i, group in enumerate(groups):
        cover_start = 0 if i == 0 else group[0][0]
        cover_end = num_samples if i == len(groups) - 1 else groups[i + 1][0][0]
        windows.append(Window(i, tuple(group), (cover_start, cover_end)))
    return windows


def split_windows(audio: np.ndarray, config: WindowConfig | None = None) -> list[Window]:
    """Windows for one recording (float32 mono 16 kHz); empty when it holds no speech."""
    config = config or WindowConfig()
    if audio.size == 0:
        return []
    spans = speech_spans(audio, config) if config.vad else [(0, len(audio))]
    windows = pack_windows(spans, len(audio), config.max_window_samples)
    log.debug(
        "%.1f s of audio -> %d speech spans -> %d windows",
        len(audio) / SAMPLE_RATE,
        len(spans),
        len(windows),
    )
    return windows
