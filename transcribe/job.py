"""One request on its way through a batch of the adapter (shared by its parts)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from kettle.transcribe.decoding import Hypothesis
from kettle.transcribe.types import DecodeKind, DecodeRequest, Word


@dataclass
class Job:
    index: int
    request: DecodeRequest
    audio: np.ndarray
    cache_hit: bool = False
    encoded: np.ndarray | None = None
    language: str = "en"
    prompt: list[int] = field(default_factory=list)
    n_prefix: int = 0  # forced tokens: context (when forced), start timestamp, prefix
    context: list[int] = field(default_factory=list)  # the context's tokens (aligned, not returned)
    # The context is forced as the decoder's prefix (its tokens lead the output and are cut
    # off), or it is the prompt and decoding starts at a forced timestamp (timestamp mode).
    context_forced: bool = True
    context_retried: bool = False  # decoded again, context forced (repeated it, or unsure)
    attempts: list[Hypothesis] = field(default_factory=list)
    chosen: Hypothesis | None = None
    words: tuple[Word, ...] = ()
    next_round: int | None = None  # the fallback round the caller should ask for next

    @property
    def final(self) -> bool:
        return self.request.kind is DecodeKind.FINAL

    @property
    def task(self) -> str:
        return self.request.task

    @property
    def timestamps(self) -> bool:
        """Whether the decoder runs in Whisper's timestamp mode (a prompted context)."""
        return not self.context_forced

    @property
    def n_context_out(self) -> int:
        """How many of the output's leading tokens are the forced context."""
        return len(self.context) if self.context_forced else 0
