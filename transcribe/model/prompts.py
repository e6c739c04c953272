"""The prompt builder: tokenizers, the suppressed tokens, each request's language, and its
decoder prompt (previous text, then the forced context and prefix)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from kettle.transcribe.model.job import Job
from kettle.transcribe.types import DecodeRequest

logger = logging.getLogger(__name__)

MAX_LENGTH = 448  # Whisper's decoder context, prompt included
# CTranslate2 needs <|startoftranscript|> at the same position across a generate() batch, so
# requests are grouped by prompt length; to keep the groups few, previous-text prompts of 8
# tokens or more are cut (keeping the most recent tokens, at least half of them) to one of
# these lengths. Shorter prompts are kept whole.
PROMPT_BUCKETS = (8, 16, 32, 64, 128, 223)
# Hotwords (keyterms) come first in the previous-text section and are kept whole up to this
# many tokens; the previous text fills the rest of the bucket.
MAX_HOTWORD_TOKENS = 128


class PromptBuilder:
    def __init__(self, wm: Any, fw: Any, *, multilingual: bool, model_name: str) -> None:
        self._wm = wm
        self._fw = fw
        self._multilingual = multilingual
        self._model_name = model_name
        self._tokenizers: dict[tuple[str, str], Any] = {}
        self._suppress: list[int] | None = None

    def tokenizer(self, language: str, task: str = "transcribe") -> Any:
        tok = self._tokenizers.get((language, task))
        if tok is None:
            tok = self._fw.Tokenizer(
                self._wm.hf_tokenizer,
                self._multilingual,
                task=task,
                language=language if self._multilingual else None,
            )
            self._tokenizers[(language, task)] = tok
        return tok

    def suppress_tokens(self) -> list[int]:
        if self._suppress is None:
            self._suppress = list(self._fw.get_suppressed_tokens(self.tokenizer("en"), [-1]))
        return self._suppress

    def assign_languages(
        self, jobs: Sequence[Job], detect: Callable[[Sequence[Job]], list[Any]]
    ) -> None:
        """The request's language, "en" on English-only models, else ``detect``'s best."""
        unknown = []
        for job in jobs:
            if not self._multilingual:
                if job.request.language not in (None, "en"):
                    logger.debug(
                        "%s is English-only; ignoring language %r",
                        self._model_name,
                        job.request.language,
                    )
                job.language = "en"
            elif job.request.language is not None:
                job.language = job.request.language
            else:
                unknown.append(job)
        if unknown:
            for job, ranked in zip(unknown, detect(unknown), strict=True):
                job.language = _likeliest(ranked, job.request.languages)

    def build(self, job: Job) -> None:
        """Set the job's prompt, its context tokens and how many tokens are forced: the
        previous text is the prompt, the context then the prefix are forced after it."""
        r = job.request
        tok = self.tokenizer(job.language, r.task)
        context = r.context.strip() if r.context and r.context.strip() else ""
        job.prompt = self._wm.get_prompt(tok, self.previous(r, tok), without_timestamps=True)
        job.context = tok.encode(" " + context) if context else []
        prefix = tok.encode(" " + r.prefix.strip()) if r.prefix and r.prefix.strip() else []
        # Tokenized apart, so the context's tokens are known exactly; at a word boundary (a
        # leading space) the BPE pieces are the same as for the joined text.
        forced = job.context + prefix
        job.prompt.extend(forced[: MAX_LENGTH // 2 - 1])
        job.n_prefix = min(len(forced), MAX_LENGTH // 2 - 1)

    @staticmethod
    def previous(request: DecodeRequest, tok: Any) -> list[int]:
        """The previous-text section: the hotwords whole, then the most recent previous text,
        cut to a bucket length (at least the hotwords') when 8 tokens or more."""
        hot_text = (request.hotwords or "").strip()
        hot = tok.encode(" " + hot_text)[:MAX_HOTWORD_TOKENS] if hot_text else []
        previous_text = (request.prompt or "").strip()
        previous = tok.encode(" " + previous_text) if previous_text else []
        total = len(hot) + len(previous)
        fits = [b for b in PROMPT_BUCKETS if len(hot) <= b <= total]
        keep = fits[-1] - len(hot) if fits else (len(previous) if len(hot) < 8 else 0)
        return hot + (previous[len(previous) - keep :] if keep else [])


def _likeliest(ranked: Sequence[Any], allowed: Sequence[str]) -> str:
    """The first of detection's ranked ``(token, prob)`` pairs whose code is allowed (any
    code when none is named; the very first when none of them is ranked)."""
    codes = [token[2:-2] for token, _ in ranked]
    return next((c for c in codes if c in allowed), codes[0]) if allowed else codes[0]
