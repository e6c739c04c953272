"""The one place that calls the model's ``generate``: batched decoding of encoded windows
into hypotheses, grouped so every call has <|startoftranscript|> at one position."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from kettle.transcribe.model import decoding
from kettle.transcribe.model.decoding import Hypothesis
from kettle.transcribe.model.job import Job
from kettle.transcribe.model.prompts import MAX_LENGTH, PromptBuilder
from kettle.transcribe.model.replicas import Replicas


class Generator:
    def __init__(
        self,
        ct2: Any,
        fw: Any,
        prompts: PromptBuilder,
        stack: Callable[[Sequence[Job]], Any],
        replicas: Replicas | None = None,
    ) -> None:
        self._ct2 = ct2
        self._fw = fw
        self._prompts = prompts
        self._stack = stack
        self._replicas = replicas or Replicas(1)

    def __call__(
        self,
        jobs: Sequence[Job],
        *,
        temperature: float,
        beam_size: int,
        caps: Sequence[int | None],
        best_of: int = 1,
    ) -> list[Hypothesis]:
        """One hypothesis per job: beam search at temperature 0, else ``best_of`` samples.
        ``caps``: new tokens each job may generate (None: up to the model's limit)."""
        out: dict[int, Hypothesis] = {}
        groups: dict[int, list[int]] = {}
        for k, job in enumerate(jobs):
            sot = self._prompts.tokenizer(job.language, job.task).sot
            groups.setdefault(job.prompt.index(sot), []).append(k)
        for members in groups.values():
            sub = [jobs[k] for k in members]
            sub_caps = [caps[k] for k in members]
            limits = [max_length(j, c) for j, c in zip(sub, sub_caps, strict=True)]
            kwargs: dict[str, Any]
            if temperature > 0:
                kwargs = {
                    "beam_size": 1,
                    "num_hypotheses": best_of,
                    "sampling_topk": 0,
                    "sampling_temperature": temperature,
                }
            else:
                kwargs = {"beam_size": beam_size}
            kwargs.update(
                max_length=max(limits),  # the group's: each part stops where the whole would
                return_scores=True,
                return_no_speech_prob=True,
                suppress_blank=True,
                suppress_tokens=self._prompts.suppress_tokens(),
            )
            raw = self._replicas.map(functools.partial(self._run, kwargs), sub)
            for k, job, cap, res in zip(members, sub, sub_caps, raw, strict=True):
                budget = None if cap is None else job.n_prefix + cap
                out[k] = self._hypothesis(job, res, temperature, budget)
        return [out[k] for k in range(len(jobs))]

    def _run(self, kwargs: dict[str, Any], jobs: Sequence[Job]) -> list[Any]:
        return list(self._ct2.generate(self._stack(jobs), [j.prompt for j in jobs], **kwargs))

    def _hypothesis(self, job: Job, res: Any, temperature: float, budget: int | None) -> Hypothesis:
        tok = self._prompts.tokenizer(job.language, job.task)
        seq = list(res.sequences_ids[0])
        # CTranslate2 returns the forced tokens too but scores only what follows them; the
        # context is not counted, so a long context does not dilute the average.
        n_context = min(len(job.context), len(seq))
        avg = decoding.avg_logprob(float(res.scores[0]), len(seq) - n_context)
        # One max_length serves a whole group: trim to this request's own token budget.
        if budget is not None:
            seq = seq[:budget]
        tokens = tuple(t for t in seq[n_context:] if t < tok.eot)  # no timestamp tokens
        text = tok.decode(list(tokens)).strip()
        return Hypothesis(
            tokens=tokens,
            text=text,
            avg_logprob=avg,
            no_speech_prob=float(res.no_speech_prob),
            compression_ratio=float(self._fw.get_compression_ratio(text)) if text else 0.0,
            temperature=temperature,
        )


def max_length(job: Job, cap: int | None) -> int:
    """CTranslate2's max_length that lets ``job`` produce its prefix plus ``cap`` new tokens.

    Measured on CTranslate2 4.x: Whisper's generate returns at most
    ``min(max_length // 2, max_length - start + 1)`` tokens (prefix included), where ``start``
    is the prompt length without the prefix.
    """
    if cap is None:
        return MAX_LENGTH
    want = job.n_prefix + cap
    start = len(job.prompt) - job.n_prefix
    return min(MAX_LENGTH, max(2 * want, start - 1 + want))
