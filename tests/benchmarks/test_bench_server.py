"""benchmarks/bench_server.py: the live capacity target and how capacity is read off a run."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_server import capacity, lost_finals, meets_target, partial_rate, unmatched_finals
from kettle.streaming.client.client import StreamResult


def row(clients: int, **over: float) -> dict[str, float]:
    base = {"clients": clients, "partial_p95_s": 0.8, "partials_per_speech_s": 1.0,
            "final_p95_s": 1.2, "finals_lost": 0}  # fmt: skip
    return {**base, **over}


def test_the_target_needs_every_condition() -> None:
    assert meets_target(row(1))
    assert not meets_target(row(1, partial_p95_s=1.01))
    assert not meets_target(row(1, partials_per_speech_s=0.6))  # under one per 1.5 s
    assert not meets_target(row(1, final_p95_s=1.6))
    assert not meets_target(row(1, finals_lost=1))
    # No partial at all: the lag percentiles are NaN, which never meets a bound.
    assert not meets_target(row(1, partial_p95_s=float("nan"), partials_per_speech_s=0.0))


def test_capacity_is_the_last_n_before_the_first_miss() -> None:
    rows = [row(n) for n in (1, 2, 3, 4)]
    for r in rows:
        r["meets_target"] = meets_target(r)
    assert capacity(rows) == 4
    rows[2]["meets_target"] = False  # 3 misses: 4 meeting it again is luck, not capacity
    assert capacity(rows) == 2
    rows[0]["meets_target"] = False
    assert capacity(rows) == 0


def test_partial_rate_is_per_second_of_the_finals_speech() -> None:
    result = StreamResult()
    result.finals = [{"start": 0.0, "end": 2.0}, {"start": 5.0, "end": 6.0}]
    result.partials = [{}] * 6
    assert partial_rate(result) == 2.0
    assert partial_rate(StreamResult()) == 0.0


def finals(*spans: tuple[float, float]) -> list[dict[str, float]]:
    return [{"utterance": i, "start": a, "end": b} for i, (a, b) in enumerate(spans)]


def test_a_final_is_lost_when_owed_and_not_sent_not_when_the_model_read_nothing() -> None:
    result = StreamResult()
    result.finals = finals((0.0, 2.0), (3.0, 4.0))
    result.done = {"utterances": 2}
    assert lost_finals(result) == 0
    result.finals[1]["utterance"] = 2  # number 1 never came
    assert lost_finals(result) == 1
    result.finals = finals((0.0, 2.0))
    assert lost_finals(result) == 1  # done counts 2, one arrived
    result.done = None
    assert lost_finals(result) == 1  # no done: the stream did not end cleanly
    # The unpaced run read a blip at 2.5-3 s as words, the live run as nothing: unmatched.
    live, reference = StreamResult(), StreamResult()
    live.finals = finals((0.0, 2.0), (3.2, 5.0))
    reference.finals = finals((0.1, 2.1), (2.5, 3.0), (3.0, 5.0))
    assert unmatched_finals(live, reference) == 1
    assert unmatched_finals(reference, reference) == 0
