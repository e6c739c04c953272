"""The word aligner: word start and end times of the chosen tokens, from the cross-attention
of the model (faster-whisper's add_word_timestamps), clipped to the window."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

from kettle.transcribe.model import decoding
from kettle.transcribe.model.decoding import Thresholds
from kettle.transcribe.model.job import Job
from kettle.transcribe.model.prompts import PromptBuilder
from kettle.transcribe.model.replicas import Replicas
from kettle.transcribe.types import SAMPLE_RATE, Word

HOP = 160
N_FRAMES = 3000
# A job, its segments as faster-whisper's aligner takes them, and its frame count.
_Row = tuple[Job, list[dict[str, Any]], int]


class WordAligner:
    def __init__(
        self,
        wm: Any,
        fw: Any,
        prompts: PromptBuilder,
        stack: Callable[[Sequence[Job]], Any],
        thresholds: Thresholds,
        replicas: Replicas | None = None,
    ) -> None:
        self._wm = wm
        self._replicas = replicas or Replicas(1)
        self._fw = fw
        self._prompts = prompts
        self._stack = stack
        self._th = thresholds

    def align(self, jobs: Sequence[Job]) -> None:
        """Set ``words`` of every job whose chosen hypothesis yields text."""
        todo = [
            j
            for j in jobs
            if j.chosen is not None
            and j.chosen.tokens
            and not decoding.suppressed(j.chosen, self._th)
        ]
        by_lang: dict[tuple[str, str], list[Job]] = {}
        for job in todo:
            by_lang.setdefault((job.language, job.task), []).append(job)
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
            frames = [min(N_FRAMES, max(1, math.ceil(j.audio.shape[0] / HOP))) for j in group]
            rows = list(zip(group, segments, frames, strict=True))
            tokenizer = self._prompts.tokenizer(language, task)
            self._replicas.map(functools.partial(self._align_rows, tokenizer), rows)
            for job, seg in zip(group, segments, strict=True):
                job.words = clean_words(
                    seg[-1].get("words") or [], job.audio.shape[0] / SAMPLE_RATE
                )

    def _align_rows(self, tokenizer: Any, rows: Sequence[_Row]) -> list[None]:
        """Word times of one part of a batch, into its segments (faster-whisper fills them)."""
        self._wm.add_word_timestamps(
            [segments for _, segments, _ in rows],
            tokenizer,
            self._stack([job for job, _, _ in rows]),
            [frames for _, _, frames in rows],
            self._fw.PREPEND_PUNCTUATIONS,
            self._fw.APPEND_PUNCTUATIONS,
            0.0,
        )
        return [None] * len(rows)


def clean_words(raw: list[dict[str, Any]], duration: float) -> tuple[Word, ...]:
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
