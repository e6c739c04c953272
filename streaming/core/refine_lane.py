"""A session's refinement lane: its one refinement in flight beside the live request (pure).

The refiner (``refine.py``) decides what to refine and how to read the result; the lane asks
for it with the session's audio and utterances, and takes the result back. It is a lane of
its own so that a refinement, which the engine runs only on idle capacity, never holds up a
partial or a final of the same stream.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Hashable

from kettle.streaming.core.audio_buffer import AudioBuffer
from kettle.streaming.core.config import SessionConfig
from kettle.streaming.core.context import ContextHistory
from kettle.streaming.core.events import Revision
from kettle.streaming.core.refine import Following, Refinable, RefinePlan, Refiner, RefineStats
from kettle.streaming.core.requests import build_refinement
from kettle.streaming.core.utterances import UtteranceTracker
from kettle.transcribe.types import SAMPLE_RATE, DecodeRequest, DecodeResult

logger = logging.getLogger(__name__)


class RefineLane:
    def __init__(
        self,
        config: SessionConfig,
        session_id: str,
        buf: AudioBuffer,
        utts: UtteranceTracker,
        history: ContextHistory,
        new_id: Callable[[], str],
    ) -> None:
        self._config = config
        self._session_id = session_id
        # The session's own audio, utterances and finals, read when a refinement is due.
        self._buf = buf
        self._utts = utts
        self._history = history
        self._new_id = new_id
        self._refiner = Refiner(context_chars=config.context_chars)
        self._in_flight: tuple[str, RefinePlan] | None = None

    @property
    def busy(self) -> bool:
        """A refinement is queued or running."""
        return self._in_flight is not None

    @property
    def idle(self) -> bool:
        """No refinement in flight and no final waiting for one (``done`` may follow)."""
        return self._in_flight is None and len(self._refiner) == 0

    @property
    def stats(self) -> RefineStats:
        return self._refiner.stats

    def earliest_needed(self) -> int | None:
        """The earliest sample a refinement still to come may need."""
        return self._refiner.earliest_needed()

    def published(self, final: Refinable) -> None:
        self._refiner.published(final)

    def next_request(
        self, fed: int, *, stopping: bool, language: str | None, keyterms: tuple[str, ...] = ()
    ) -> DecodeRequest | None:
        """The oldest due refinement, if none is in flight."""
        if self._in_flight is not None or len(self._refiner) == 0:
            return None
        beyond = _beyond(self._utts)
        plan = self._refiner.plan(fed, beyond, self._history, stopping=stopping, language=language)
        if plan is None:
            return None
        rid = self._new_id()
        self._in_flight = (rid, plan)
        audio = self._buf.slice(plan.start, plan.end)
        request = build_refinement(plan, self._config, self._session_id, rid, audio, keyterms)
        if logger.isEnabledFor(logging.DEBUG):
            _log_request(plan, request, fed)
        return request

    def owns(self, request_id: Hashable) -> bool:
        return self._in_flight is not None and self._in_flight[0] == request_id

    def finish(self, result: DecodeResult | None) -> Revision | None:
        """The refinement in flight came back (None: it did not run, or failed)."""
        assert self._in_flight is not None
        rid, plan = self._in_flight
        self._in_flight = None
        if result is None or result.error is not None:
            self._refiner.skipped(plan.target)
            logger.debug("refine result: id=%s final=%d outcome=skipped", rid, plan.target.number)
            return None
        if not logger.isEnabledFor(logging.DEBUG):
            return self._refiner.decoded(plan, result)
        before = dataclasses.replace(self._refiner.stats)  # (the trace's outcome only)
        revision = self._refiner.decoded(plan, result)
        logger.debug(
            "refine result: id=%s final=%d pass=%d outcome=%s text=%r",
            rid, plan.target.number, plan.target.passes, _outcome(before, self._refiner.stats),
            result.text,
        )  # fmt: skip
        return revision


def _beyond(utts: UtteranceTracker) -> Following | None:
    """The utterance after the last final: the oldest closed one, or the open one."""
    if utts.closed:
        utt = utts.closed[0]
        return Following(utt.start, utt.end)
    if utts.open is not None:
        return Following(utts.open.start, None)
    return None


def _outcome(before: RefineStats, after: RefineStats) -> str:
    """Which count a refinement's result moved (revised, unchanged or kept)."""
    for name in ("revised", "unchanged", "kept"):
        if getattr(after, name) > getattr(before, name):
            return name
    return "none"


def _log_request(plan: RefinePlan, request: DecodeRequest, fed: int) -> None:
    """The refinement's inputs, for benchmarks' --trace (seconds on the stream's clock)."""
    target = plan.target

    def s(samples: int) -> str:
        return f"{samples / SAMPLE_RATE:.2f}"

    logger.debug(
        "refine request: id=%s final=%d pass=%d last=%s fed=%s window=%s-%s target=%s-%s "
        "boundary=%s encode_min_s=%s max_tokens=%d beam=%s prompt=%r final_text=%r",
        request.request_id, target.number, target.passes + 1, plan.last, s(fed), s(plan.start),
        s(plan.end), s(target.start), s(target.end), s(plan.boundary), request.encode_min_s,
        plan.max_tokens, request.beam_size, plan.prompt, target.text,
    )  # fmt: skip
