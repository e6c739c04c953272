"""Predicted decode cost of a batch, for batch sizing and partial cadence.

Built on the ``CostProfile`` the model measured at start-up (encoder pass per batch size,
decoder cost per token per row count) and corrected online: each finished batch's measured
time over its prediction feeds a per-kind factor (exponential moving average), so a device
that is busier (or faster) than at start-up is tracked. Without a profile (a test fake) it
predicts from the measured time per request alone.

``best_batch`` is the work-conserving choice: of the queued requests of one kind, take the
batch size that minimizes their summed completion time when served in equal batches back to
back. Where a batch costs about the sum of its requests (a CPU) that is 1 (the first result
comes out early and nothing is lost); where batching is nearly free (a GPU) it fills up.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from kettle.transcribe.model.costs import CostProfile
from kettle.transcribe.types import SAMPLE_RATE, DecodeKind, DecodeRequest

TOKENS_PER_SECOND = 4.0  # English speech, Whisper tokens per second of audio (generous)
PROMPT_TOKENS = 4  # start-of-transcript and friends, decoded with the first token
FINAL_BEAM = 5


def expected_tokens(request: DecodeRequest) -> int:
    seconds = len(request.audio) / SAMPLE_RATE
    tokens = PROMPT_TOKENS + math.ceil(TOKENS_PER_SECOND * seconds)
    if request.max_new_tokens is not None:
        tokens = min(tokens, PROMPT_TOKENS + request.max_new_tokens)
    return tokens


def beam_of(request: DecodeRequest) -> int:
    if request.beam_size is not None:
        return request.beam_size
    return FINAL_BEAM if request.kind is DecodeKind.FINAL else 1


def _raw(profile: CostProfile, requests: Sequence[DecodeRequest]) -> float:
    """The profile's seconds for one batch of these requests (before the observed factor)."""
    return profile.batch(
        [expected_tokens(r) for r in requests], beam=max(beam_of(r) for r in requests)
    )


class CostModel:
    """``profiles``: the measured profile of the model that serves each kind (finals may run
    on a different model than partials)."""

    def __init__(self, profiles: Mapping[DecodeKind, CostProfile] | None = None) -> None:
        self.profiles = dict(profiles or {})
        self._factor: dict[DecodeKind, float] = {}  # measured / predicted (EMA)
        self._per_request: dict[DecodeKind, float] = {}  # seconds per request (EMA)

    def predict(self, requests: Sequence[DecodeRequest]) -> float | None:
        """Seconds one batch of these requests (one kind) should take; None: no idea yet."""
        if not requests:
            return 0.0
        kind = requests[0].kind
        profile = self.profiles.get(kind)
        if profile is None:
            per = self._per_request.get(kind)
            return None if per is None else per * len(requests)
        return _raw(profile, requests) * self._factor.get(kind, 1.0)

    def charge(self, request: DecodeRequest) -> float:
        """What serving a request costs its owner's fair share: predicted decode seconds
        where the model's costs were measured, else one unit per request (round robin)."""
        if request.kind in self.profiles:
            predicted = self.predict([request])
            if predicted is not None:
                return predicted
        return 1.0

    def predict_uniform(self, kind: DecodeKind, n: int, like: DecodeRequest) -> float | None:
        """Seconds for a batch of ``n`` requests like ``like``."""
        return self.predict([like] * n) if n else 0.0

    def observe(self, requests: Sequence[DecodeRequest], seconds: float) -> None:
        """A batch of these requests took ``seconds``."""
        if not requests or seconds < 0:
            return
        kind = requests[0].kind
        per = seconds / len(requests)
        old = self._per_request.get(kind)
        self._per_request[kind] = per if old is None else 0.7 * old + 0.3 * per
        profile = self.profiles.get(kind)
        if profile is not None:
            raw = _raw(profile, requests)
            if raw > 0:
                # Wide bounds: a profile measured on a busy machine can be 30x off.
                ratio = min(100.0, max(0.01, seconds / raw))
                f = self._factor.get(kind)
                self._factor[kind] = ratio if f is None else 0.8 * f + 0.2 * ratio

    def best_batch(self, queued: Sequence[DecodeRequest], limit: int) -> int | None:
        """The batch size for these queued requests (oldest first); None: no idea yet."""
        n = min(len(queued), limit)
        if not queued or queued[0].kind not in self.profiles:
            return None  # per-request averages cannot tell what batching buys
        if n <= 1:
            return n
        like = queued[0]
        best, best_total = None, math.inf
        for k in range(1, n + 1):
            cost = self.predict_uniform(like.kind, k, like)
            if cost is None:
                return None
            rest = len(queued) % k
            full = len(queued) // k
            # Summed completion time of full batches of k back to back, then the rest.
            total = cost * k * full * (full + 1) / 2
            if rest:
                tail = self.predict_uniform(like.kind, rest, like) or 0.0
                total += rest * (full * cost + tail)
            if total < best_total * 0.98:  # prefer smaller batches unless clearly better
                best, best_total = k, total
        return best
