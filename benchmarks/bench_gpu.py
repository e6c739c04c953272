"""GPU readiness benchmark (run by gpu_check.sh; needs CUDA): short, under about 5 minutes.

For each compute type (int8_float16, float16) this loads the model on the GPU, prints the
cost profile measured at start-up, and ramps real-time streams of speech (N = 4, 8, 16, 32,
64, ~--seconds of audio each) until partial lag P95 exceeds 1 s or final lag P95 exceeds
1.5 s; "streams per GPU" is the largest N that kept both. At that N (int8_float16 only) it
runs again with batching off (max batch 1) for batched against batch 1.

    python benchmarks/bench_gpu.py               # writes bench_gpu.json and its RESULTS.md section
    python benchmarks/bench_gpu.py --no-write    # figures on stdout only

Data: $KETTLE_EVAL_DIR, else ../shared/eval, else the tests' subset tests/data/speech (the
section says which).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _results import (  # noqa: E402
    REPO,
    eval_dir,
    machine_info,
    markdown_table,
    require_eval_set,
    write_section,
)
from bench_streaming import load_clips, stream_plan  # noqa: E402

PARTIAL_P95_S = 1.0
FINAL_P95_S = 1.5
RAMP = (4, 8, 16, 32, 64)


async def one_run(decoder: Any, plan: list[list[Any]], batch: int) -> dict[str, Any]:
    from kettle.streaming.cli.simulation import run_simulation
    from kettle.streaming.engine.engine import Engine, EngineConfig
    from kettle.streaming.engine.scheduling.scheduler import SchedulerConfig

    config = EngineConfig(SchedulerConfig(max_batch_size=batch, max_final_batch_size=batch))
    async with Engine(decoder, config) as engine:
        result = await run_simulation(engine, plan, realtime=True)
    s = result.summary
    return {
        "partial_p95": s["partial_lag_s"]["p95"],
        "final_p95": s["final_lag_s"]["p95"],
        "final_p50": s["final_lag_s"]["p50"],
        "mean_batch": s["mean_batch_size"],
        "finals_lost": s["finals_lost"],
        "overloaded": s["errors"].get("overloaded", 0),
        "wer": s["wer"],
    }


def within(row: dict[str, Any]) -> bool:
    p, f = row["partial_p95"], row["final_p95"]
    return p is not None and f is not None and p <= PARTIAL_P95_S and f <= FINAL_P95_S


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--seconds", type=float, default=15.0, help="audio per stream")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--compute-types", default="int8_float16,float16")
    parser.add_argument("--out", type=Path, default=HERE / "bench_gpu.json")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)

    import ctranslate2

    if ctranslate2.get_cuda_device_count() < 1:
        print("bench_gpu: no CUDA device; nothing measured", file=sys.stderr)
        return 0
    path = eval_dir()
    if not (path / "manifest.tsv").is_file():
        path = REPO / "tests" / "data" / "speech"
    data_line = require_eval_set(path)
    clips = load_clips(path)

    from kettle.transcribe.model.adapter import ModelConfig, WhisperAdapter

    t0 = time.monotonic()
    rows: list[dict[str, Any]] = []
    profiles: dict[str, Any] = {}
    capacity: dict[str, int] = {}
    for compute in [c.strip() for c in args.compute_types.split(",") if c.strip()]:
        decoder = WhisperAdapter(ModelConfig(name=args.model, device="cuda", compute_type=compute))
        profiles[compute] = decoder.measure_costs().to_dict()
        capacity[compute] = 0
        for n in RAMP:
            plan = stream_plan(clips, n, args.seconds)
            row = {"compute_type": compute, "streams": n, "max_batch": args.batch_size}
            row.update(asyncio.run(one_run(decoder, plan, args.batch_size)))
            row["within_slo"] = within(row)
            rows.append(row)
            print(json.dumps(row), flush=True)
            if not row["within_slo"]:
                break
            capacity[compute] = n
        if compute == "int8_float16":
            n = max(capacity[compute], RAMP[0])
            row = {"compute_type": compute, "streams": n, "max_batch": 1}
            row.update(asyncio.run(one_run(decoder, stream_plan(clips, n, args.seconds), 1)))
            row["within_slo"] = within(row)
            rows.append(row)
            print(json.dumps(row), flush=True)
        del decoder
    total = time.monotonic() - t0
    result = {
        "data": data_line,
        "machine": machine_info(),
        "model": args.model,
        "streams_per_gpu": capacity,
        "cost_profiles": profiles,
        "rows": rows,
        "total_wall_s": round(total, 1),
    }
    print(json.dumps(result, indent=2))
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    columns = ["compute_type", "streams", "max_batch", "partial_p95", "final_p95", "final_p50"]
    columns += ["mean_batch", "finals_lost", "overloaded", "wer", "within_slo"]
    body = (
        f"GPU check ({args.model}, real-time streams of ~{args.seconds:g} s of speech each; "
        f"SLO: partial lag P95 <= {PARTIAL_P95_S} s and final lag P95 <= {FINAL_P95_S} s). "
        f"Total {total:.0f} s.\n\n{data_line}.\n\n"
        "Streams per GPU within the SLO: "
        + ", ".join(f"{k}: {v}" for k, v in capacity.items())
        + f" (ramp {', '.join(map(str, RAMP))}; 0: not even {RAMP[0]}).\n\n"
        + markdown_table(rows, columns)
        + "\nCost profiles measured at start-up: `"
        + json.dumps(profiles)
        + "`\n"
    )
    if not args.no_write:
        write_section("bench_gpu", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
