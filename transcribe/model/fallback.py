"""The temperature-fallback policy (Whisper's): a final whose hypothesis fails the checks is
decoded again at the next temperature; when every temperature failed, the most likely attempt
that is not too repetitive wins.

A request with ``fallback_round`` set runs that one round only and says in its result whether
the next should follow (the streaming engine queues each round as a request of its own); the
others run every round here, the retries of a round batched together.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from kettle.transcribe.model import decoding
from kettle.transcribe.model.decoding import Hypothesis, Thresholds
from kettle.transcribe.model.job import Job

logger = logging.getLogger(__name__)


class Generate(Protocol):
    def __call__(
        self,
        jobs: Sequence[Job],
        *,
        temperature: float,
        beam_size: int,
        caps: Sequence[int | None],
        best_of: int = 1,
    ) -> list[Hypothesis]: ...


class FallbackPolicy:
    def __init__(
        self, temperatures: Sequence[float], beam_size: int, best_of: int, thresholds: Thresholds
    ) -> None:
        self.temperatures = tuple(temperatures)
        self.beam_size = beam_size
        self.best_of = best_of
        self.thresholds = thresholds

    def decode(self, jobs: Sequence[Job], generate: Generate) -> None:
        """Set ``chosen`` (and ``next_round`` for one-round requests) of every final job."""
        by_round: dict[int | None, list[Job]] = {}
        for job in jobs:
            by_round.setdefault(job.request.fallback_round, []).append(job)
        for only, group in by_round.items():
            self._rounds(group, only, generate)

    def reason(self, hyp: Hypothesis) -> str | None:
        """Why a hypothesis fails the checks ("repetitive" / "unlikely"), None if it passes."""
        if not decoding.needs_fallback(hyp, self.thresholds):
            return None
        return "repetitive" if decoding.too_repetitive(hyp, self.thresholds) else "unlikely"

    def _rounds(self, jobs: list[Job], only: int | None, generate: Generate) -> None:
        temps = self.temperatures
        th = self.thresholds
        pending = jobs
        for round_no, temperature in enumerate(temps):
            if not pending:
                break
            if only is not None and round_no != min(only, len(temps) - 1):
                continue
            hyps: dict[int, Hypothesis] = {}
            by_beam: dict[int, list[Job]] = {}
            for job in pending:
                beam = job.request.beam_size or self.beam_size
                by_beam.setdefault(1 if temperature > 0 else beam, []).append(job)
            for beam, group in by_beam.items():
                caps = [j.request.max_new_tokens for j in group]
                got = generate(
                    group, temperature=temperature, beam_size=beam, caps=caps, best_of=self.best_of
                )
                for job, hyp in zip(group, got, strict=True):
                    hyps[job.index] = hyp
            retry = []
            last = round_no == len(temps) - 1
            for job in pending:
                hyp = hyps[job.index]
                job.attempts.append(hyp)
                if not decoding.needs_fallback(hyp, th):
                    job.chosen = hyp
                elif only is not None:
                    job.chosen = hyp  # the caller asks for the next round itself
                    job.next_round = None if last else round_no + 1
                elif last:
                    job.chosen = decoding.pick_after_fallback(
                        job.attempts, lambda h: decoding.too_repetitive(h, th)
                    )
                else:
                    retry.append(job)
            if retry:
                logger.debug("%d final(s) retried at temperature %.1f", len(retry), temperature)
            pending = retry
