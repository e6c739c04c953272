"""Measure each model's decode costs at engine start, or read them from the cost cache."""

from __future__ import annotations

import functools
import logging
from pathlib import Path

from kettle.streaming.engine.worker import InferenceWorker
from kettle.transcribe.model.costs import CostProfile
from kettle.transcribe.types import DecodeKind, Decoder

logger = logging.getLogger(__name__)


async def measure_costs(
    worker: InferenceWorker,
    decoder: Decoder,
    final_decoder: Decoder,
    cache: Path | None,
    refresh: bool,
) -> dict[DecodeKind, CostProfile]:
    """Profile each model that has measure_costs() (the real adapter) on the model's thread,
    or read its profile from ``cache`` (EngineConfig.cost_cache); fakes have none."""
    profiles: dict[DecodeKind, CostProfile] = {}
    for kind, model in ((DecodeKind.PARTIAL, decoder), (DecodeKind.FINAL, final_decoder)):
        if kind is DecodeKind.FINAL and model is decoder:
            if DecodeKind.PARTIAL in profiles:  # one model serves both: measured once
                profiles[kind] = profiles[DecodeKind.PARTIAL]
            continue
        measure = getattr(model, "measure_costs", None)
        if measure is None:
            continue
        try:
            if cache is None and not refresh:
                profiles[kind] = await worker.call(measure)
            else:
                profiles[kind] = await worker.call(
                    functools.partial(measure, cache, refresh=refresh)
                )
        except Exception:  # no profile: batches are sized from measured times instead
            logger.exception("could not measure the costs of %s", model.name)
    return profiles
