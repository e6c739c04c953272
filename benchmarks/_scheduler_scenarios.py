"""Scheduler v2 scenarios for bench_streaming.py (--scenarios): burst, mixed load, one stream.

- burst: N streams whose utterances end at the same moment (each clip is padded in front so
  all speech stops together). The time from the last endpoint decision to the last final of
  the burst is compared with the decode cost of the same finals run back to back (one at a
  time, cold encoder cache), measured in the same run. Target: at most 1.3 times.
- mixed: 8 streams of different audio against 1 stream; final lag P95 at most 2 times the
  1-stream final lag (P50), no final lost.
- one: one stream, before (fixed 0.5 s cadence, the old one) and after (cadence from the
  measured decode cost), interleaved; CPU seconds per audio second and partial lag P50/P95.
  Target on a 2-core CPU: at most 0.8 CPU-s per audio second, partial lag P95 at most 1.0 s.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from _timeline import Recorder, breakdown

BURST_TARGET = 1.3


async def run(decoder: Any, plan: list[list[Any]], **engine_kw: Any) -> Any:
    """One real-time simulation; a Recorder decoder also observes the engine and gets the
    run's start (``started``) to place its timeline."""
    from kettle.streaming.cli.simulation import run_simulation
    from kettle.streaming.engine.engine import Engine, EngineConfig

    observer = decoder if isinstance(decoder, Recorder) else None
    async with Engine(decoder, EngineConfig(**engine_kw), observer=observer) as engine:
        if observer is not None:
            observer.reset()
            observer.started = time.monotonic()
        return await run_simulation(engine, plan, realtime=True)


def burst_plan(clips: list[Any], n: int, longest_s: float = 8.0) -> list[list[Any]]:
    """n clips of at most longest_s (one utterance each, mostly), padded to end together."""
    from kettle.streaming.cli.simulation import Clip

    fitting = sorted((c for c in clips if 2.0 <= c.seconds <= longest_s), key=lambda c: c.name)
    chosen = [fitting[(i * 5) % len(fitting)] for i in range(n)]
    end = max(len(c.audio) for c in chosen) + 8000  # 0.5 s lead-in for the longest
    plan = []
    for c in chosen:
        pad = np.zeros(end - len(c.audio), dtype=np.float32)
        plan.append([Clip(c.name, np.concatenate([pad, c.audio]), c.reference)])
    return plan


def burst_figures(decoder: Any, plan: list[list[Any]], result: Any) -> dict[str, Any]:
    """Last endpoint -> last final of the burst, and the same finals decoded back to back."""
    from kettle.streaming.cli.simulation import GAP_SECONDS
    from kettle.transcribe.types import DecodeKind, DecodeRequest

    last_endpoint, last_final, windows = 0.0, 0.0, []
    for log, clips in zip(result.logs, plan, strict=True):
        finals = log.finals()
        if not finals:
            continue
        final = max(finals, key=lambda f: f.end)  # the utterance that ends in the burst
        decided = log.endpoints.get(final.utterance)
        at = log.wall_at(decided) if decided is not None else None
        got = next(w for w, e in log.events if e is final)
        if at is not None:
            last_endpoint = max(last_endpoint, at)
        last_final = max(last_final, got)
        audio = np.concatenate(
            [clips[0].audio, np.zeros(int(GAP_SECONDS * 16000), dtype=np.float32)]
        )
        windows.append(audio[final.start : final.end])
    span = last_final - last_endpoint
    where, replay = {}, []
    if isinstance(decoder, Recorder):
        window = (decoder.started + last_endpoint, decoder.started + last_final)
        where = breakdown(decoder, *window)
        replay = [list(c.requests) for c in decoder.calls_within(*window)]
    ideal = [
        [DecodeRequest(audio=w, kind=DecodeKind.FINAL, request_id=i, beam_size=5)]
        for i, w in enumerate(windows)
    ]
    # Interleaved, twice each, so drifting background load hits both alike.
    times: dict[str, list[float]] = {"ideal": [], "replay": []}
    for _ in range(2):
        times["ideal"].append(back_to_back(decoder, ideal))
        if replay:
            times["replay"].append(back_to_back(decoder, replay))
    b2b = float(np.mean(times["ideal"]))
    ratio = span / b2b if b2b > 0 else None
    replayed = float(np.mean(times["replay"])) if replay else None
    return {
        "finals": len(windows),
        "last_endpoint_to_last_final_s": round(span, 3),
        "back_to_back_decode_s": round(b2b, 3),
        "ratio": round(ratio, 3) if ratio is not None else None,
        # The engine's own model calls within the window, replayed back to back (same
        # windows, prefixes, beams and batches): span / replay is what scheduling adds.
        "replay_s": None if replayed is None else round(replayed, 3),
        "span_over_replay": round(span / replayed, 3) if replayed else None,
        "final_lag_p50": result.summary["final_lag_s"]["p50"],
        "finals_lost": result.summary["finals_lost"],
        "mean_batch": result.summary["mean_batch_size"],
        "where": where,
    }


def back_to_back(decoder: Any, batches: list[list[Any]]) -> float:
    """Seconds to decode these batches one after the other, cold encoder cache."""
    clear = getattr(decoder, "clear_encoder_cache", None)
    if clear is not None:
        clear()
    t0 = time.perf_counter()
    for batch in batches:
        decoder.decode_batch(batch)
    return time.perf_counter() - t0


async def scenarios(
    decoder: Any, clips: list[Any], which: set[str], seconds: float, plan_fn: Any
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    decoder = Recorder(decoder)  # where the model's time goes, per run
    if "one" in which:
        one_plan = plan_fn(clips, 1, seconds)
        rows = []
        # Interleaved: before, after, before, after.
        for rep in range(2):
            for mode, adaptive in (("before (fixed 0.5 s)", False), ("after (measured)", True)):
                s = (await run(decoder, one_plan, adaptive_cadence=adaptive)).summary
                rows.append(
                    {
                        "mode": mode,
                        "rep": rep,
                        "cpu_per_audio_s": s["cpu_per_audio_s"],
                        "partial_p50": s["partial_lag_s"]["p50"],
                        "partial_p95": s["partial_lag_s"]["p95"],
                        "partials": s["partials"],
                        "final_p50": s["final_lag_s"]["p50"],
                        "wer": s["wer"],
                    }
                )
                print(f"one stream {mode} rep {rep}: {rows[-1]}", flush=True)
        out["one"] = rows
    if "burst" in which:
        rows = []
        for n in (4, 8):
            plan = burst_plan(clips, n)
            result = await run(decoder, plan)
            row = {"streams": n, **burst_figures(decoder, plan, result)}
            row["target_met"] = row["ratio"] is not None and row["ratio"] <= BURST_TARGET
            rows.append(row)
            print(f"burst N={n}: {row}", flush=True)
        out["burst"] = rows
    if "mixed" in which:
        out.update(await mixed(decoder, plan_fn(clips, 8, seconds)))
    return out


MIXED_ALONE = 4  # of the 8 mixed streams, this many are also played alone (the baseline)


async def mixed(decoder: Recorder, plan: list[list[Any]]) -> dict[str, Any]:
    """8 streams of different audio at once, against the first few of the same streams
    played alone, interleaved (alone, alone, all 8, alone, alone): the same audio, and the
    background load of a shared machine hits both alike.

    Also the capacity this implies: the model seconds finals take per stream per second at
    N=8 (partials aside), so how many streams the model could serve finals for at all."""
    alone_lags: list[float] = []
    alone_finals = alone_lost = 0
    alone_busy: list[float] = []
    eight: dict[str, Any] = {}
    order = [0, 1, None, 2, 3][: MIXED_ALONE + 1]
    for index in order:
        if index is None:
            eight = mixed_row(decoder, await run(decoder, plan))
            print(f"mixed N=8: {eight}", flush=True)
            continue
        result = await run(decoder, [plan[index]])
        row = mixed_row(decoder, result)
        alone_busy.append(row["model_busy"] or 0.0)
        for log in result.logs:
            alone_lags += log.final_lags()[0]
        alone_finals += row["finals"]
        alone_lost += row["finals_lost"]
        print(f"mixed stream {index} alone: {row}", flush=True)
    one = {
        "streams": 1,
        "final_p50": _pct(alone_lags, 50),
        "final_p95": _pct(alone_lags, 95),
        "finals": alone_finals,
        "finals_lost": alone_lost,
        "model_busy": round(float(np.mean(alone_busy)), 3),
        "runs": f"streams 0-{MIXED_ALONE - 1} of the 8, each alone",
    }
    where = eight["where"]
    per_final = (where["final_s"] + where["fallback_s"]) / max(1, eight["finals"])
    final_load = (where["final_s"] + where["fallback_s"]) / eight["wall_s"]
    out: dict[str, Any] = {"mixed": [one, eight]}
    if one["final_p50"] and one["final_p95"] and eight["final_p95"] is not None:
        out["mixed_ratio_p95_over_p95"] = round(eight["final_p95"] / one["final_p95"], 3)
        out["mixed_ratio_p95_over_p50"] = round(eight["final_p95"] / one["final_p50"], 3)
    out["mixed_capacity"] = {
        "final_decode_s_mean": round(per_final, 3),
        "finals_busy_at_8": round(final_load, 3),
        "finals_busy_per_stream": round(final_load / 8, 4),
        # Streams whose finals alone would keep the model fully busy.
        "streams_at_full_load": round(8 / final_load, 1) if final_load else None,
    }
    return out


def _pct(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 3) if values else None


def mixed_row(decoder: Recorder, result: Any) -> dict[str, Any]:
    s = result.summary
    where = breakdown(decoder, decoder.started, decoder.started + s["wall_s"])
    busy = sum(v for k, v in where.items() if k.endswith("_s") and k != "idle_s")
    return {
        "streams": len(result.logs),
        "final_p50": s["final_lag_s"]["p50"],
        "final_p95": s["final_lag_s"]["p95"],
        "partial_p95": s["partial_lag_s"]["p95"],
        "finals": s["finals"],
        "finals_lost": s["finals_lost"],
        "overloaded": s["errors"].get("overloaded", 0),
        "mean_batch": s["mean_batch_size"],
        "model_busy": round(busy / s["wall_s"], 3) if s["wall_s"] else None,
        "wall_s": s["wall_s"],
        "where": where,
    }
