"""One request on its way through a batch of the adapter (shared by its parts)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from kettle.transcribe.model.decoding import Hypothesis
from kettle.transcribe.types import DecodeKind, DecodeRequest, Word


@dataclass
class Job:
    index: int
    request: DecodeRequest
    audio: np.ndarray
    cache_hit: bool = False
    frames: int = 0  # the encoder's input length, set by Encoder.encode (its own, not the batch's)
    encoded: np.ndarray | None = None
    language: str = "en"
    prompt: list[int] = field(default_factory=list)
    n_prefix: int = 0  # forced tokens: the context, then the prefix
    # The context's tokens, forced as the decoder's prefix: they lead the output and are cut
    # off (aligned, not returned).
    context: list[int] = field(default_factory=list)
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
