"""Helpers shared by the scheduling tests: requests by id and kind, and real-time audio."""

from __future__ import annotations

import numpy as np
from kettle.streaming.engine.scheduling.scheduler import Scheduler
from kettle.transcribe.types import SAMPLE_RATE, DecodeKind, DecodeRequest

AUDIO = np.zeros(1600, dtype=np.float32)


def final(rid: str, seconds: float = 0.1) -> DecodeRequest:
    audio = np.zeros(int(seconds * SAMPLE_RATE), dtype=np.float32)
    return DecodeRequest(audio=audio, kind=DecodeKind.FINAL, request_id=rid)


def partial(rid: str) -> DecodeRequest:
    return DecodeRequest(audio=AUDIO, kind=DecodeKind.PARTIAL, request_id=rid)


def ids(batch: object) -> list[str]:
    assert batch is not None
    return [t.request.request_id for t in batch]  # type: ignore[attr-defined]


def feed_realtime(s: Scheduler, owner: str, start: float, seconds: float) -> None:
    for i in range(int(seconds * 10)):
        s.observe_audio(owner, 0.1, start + i * 0.1)
