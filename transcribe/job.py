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
    n_prefix: int = 0  # forced tokens: context and prefix
    context: list[int] = field(default_factory=list)  # forced tokens left out of the result
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
