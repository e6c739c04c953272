"""Benchmark the numeric kernels: incremental vs full log-mel, batched log-mel backends, resampling.

    python benchmarks/bench_kernels.py            # full run (a few minutes on 2 cores)
    python benchmarks/bench_kernels.py --quick    # smoke run

Prints a JSON document and a table, and replaces the ``bench_kernels`` section of
benchmarks/RESULTS.md (unless --no-write).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _results
from kettle.kernels.logmel import IncrementalLogMel, log_mel_batch
from kettle.kernels.pcm import PcmStreamDecoder
from kettle.kernels.resample import StreamResampler, resample

SR = 16000


def _speech_like(seconds: float, rate: int = SR, seed: int = 0) -> np.ndarray:
    """Noise shaped by a slow envelope plus a few tones: spectrally busy, like speech."""
    rng = np.random.default_rng(seed)
    n = int(seconds * rate)
    t = np.arange(n) / rate
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 3.0 * t)
    tones = sum(np.sin(2 * np.pi * f * t) for f in (180.0, 720.0, 2500.0)) / 3
    return ((0.1 * rng.standard_normal(n) + 0.3 * tones) * envelope).astype(np.float32)


def _best_ms(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up (allocations, FFT plans, torch kernels)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times) * 1000.0


def bench_incremental(seconds: float, step_s: float, repeats: int) -> dict[str, Any]:
    """Per step of new audio on a growing utterance: IncrementalLogMel vs full recompute."""
    audio = _speech_like(seconds, seed=1)
    step = int(step_s * SR)
    ends = list(range(step, audio.size + 1, step))
    inc_ms: list[float] = []
    full_ms: list[float] = []
    for _ in range(repeats):
        mel = IncrementalLogMel()
        prev = 0
        run_inc, run_full = [], []
        for end in ends:
            t0 = time.perf_counter()
            mel.extend(audio[prev:end])
            got = mel.features(3000)
            t1 = time.perf_counter()
            want = log_mel_batch([audio[:end]], backend="numpy")
            t2 = time.perf_counter()
            prev = end
            run_inc.append(t1 - t0)
            run_full.append(t2 - t1)
        if not np.allclose(got, want[0], atol=1e-5):
            raise AssertionError("incremental features differ from the full computation")
        inc_ms = (
            run_inc if not inc_ms else [min(a, b) for a, b in zip(inc_ms, run_inc, strict=True)]
        )
        full_ms = (
            run_full if not full_ms else [min(a, b) for a, b in zip(full_ms, run_full, strict=True)]
        )
    mean_inc = statistics.mean(inc_ms) * 1000
    mean_full = statistics.mean(full_ms) * 1000
    return {
        "utterance_s": seconds,
        "step_s": step_s,
        "steps": len(ends),
        "incremental_ms_mean": mean_inc,
        "full_ms_mean": mean_full,
        "speedup_mean": mean_full / mean_inc,
        "incremental_ms_at_end": inc_ms[-1] * 1000,
        "full_ms_at_end": full_ms[-1] * 1000,
        "speedup_at_end": full_ms[-1] / inc_ms[-1],
    }


def _torch_info() -> dict[str, Any] | None:
    try:
        import torch
    except ImportError:
        return None
    return {
        "version": torch.__version__,
        "threads": torch.get_num_threads(),
        "cuda": bool(torch.cuda.is_available()),
        "cuda_device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }


def _set_torch_threads(threads: int | None) -> int | None:
    """Set torch's intra-op threads (None = leave alone); return the previous setting."""
    if threads is None:
        return None
    import torch

    previous = int(torch.get_num_threads())
    torch.set_num_threads(threads)
    return previous


def bench_batch(batches: list[int], repeats: int, torch_info: dict[str, Any] | None) -> list[dict]:
    """30 s windows at several batch sizes, each available backend/device."""
    # torch CPU runs with its default intra-op threads and with one: on a shared machine the
    # thread handoffs can dominate (set_num_threads is process-wide, fine in a benchmark).
    configs: list[tuple[str, str, int | None]] = [("numpy", "cpu", None)]
    if torch_info is not None:
        configs += [("torch", "cpu", None), ("torch", "cpu", 1)]
        if torch_info["cuda"]:
            configs.append(("torch", "cuda", None))
    rows = []
    base = _speech_like(30.0, seed=2)
    for batch in batches:
        windows = [np.roll(base, 1601 * i) for i in range(batch)]
        reference = None
        for backend, device, threads in configs:
            previous = _set_torch_threads(threads)
            try:
                ms = _best_ms(
                    partial(log_mel_batch, windows, backend=backend, device=device), repeats
                )
                out = log_mel_batch(windows, backend=backend, device=device)
            finally:
                _set_torch_threads(previous)
            reference = out if reference is None else reference
            rows.append(
                {
                    "batch": batch,
                    "backend": backend,
                    "device": device,
                    "threads": "default" if threads is None else threads,
                    "ms_per_batch": ms,
                    "ms_per_window": ms / batch,
                    "max_abs_diff_vs_numpy": float(np.abs(out - reference).max()),
                }
            )
    return rows


def bench_resample(rates: list[int], seconds: float, repeats: int) -> list[dict]:
    """Throughput (x real time): one-shot resample, streaming in 20 ms chunks, and the full
    edge decoder (s16le stereo bytes -> float32 mono 16 kHz) in 20 ms messages."""
    rows = []
    for rate in rates:
        x = _speech_like(seconds, rate=rate, seed=rate)
        chunk = rate // 50
        one_ms = _best_ms(partial(resample, x, rate), repeats)

        def stream(x: np.ndarray = x, r: int = rate, c: int = chunk) -> None:
            s = StreamResampler(r)
            for i in range(0, x.size, c):
                s.process(x[i : i + c])
            s.flush()

        stream_ms = _best_ms(stream, repeats)
        stereo = np.repeat((x * 32767).astype("<i2"), 2).tobytes()
        message = chunk * 4

        def edge(data: bytes = stereo, r: int = rate, m: int = message) -> None:
            d = PcmStreamDecoder("pcm_s16le", r, 2)
            for i in range(0, len(data), m):
                d.feed(data[i : i + m])
            d.flush()

        edge_ms = _best_ms(edge, repeats)
        rows.append(
            {
                "in_rate": rate,
                "audio_s": seconds,
                "oneshot_x_realtime": seconds * 1000 / one_ms,
                "stream_20ms_x_realtime": seconds * 1000 / stream_ms,
                "edge_s16le_stereo_20ms_x_realtime": seconds * 1000 / edge_ms,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--no-write", action="store_true", help="do not touch RESULTS.md")
    parser.add_argument("--json", type=Path, help="also write the JSON document here")
    args = parser.parse_args(argv)

    quick = args.quick
    torch_info = _torch_info()
    results: dict[str, Any] = {
        "quick": quick,
        "machine": _results.machine_info(),
        "torch": torch_info,
        "incremental": bench_incremental(
            seconds=6.0 if quick else 20.0, step_s=0.5, repeats=1 if quick else 3
        ),
        "batch_30s": bench_batch([1, 8] if quick else [1, 8, 32], 1 if quick else 3, torch_info),
        "resample": bench_resample(
            [8000, 44100, 48000], seconds=5.0 if quick else 60.0, repeats=1 if quick else 3
        ),
    }
    doc = json.dumps(results, indent=2)
    print(doc)
    if args.json:
        args.json.write_text(doc + "\n", encoding="utf-8")

    inc = results["incremental"]
    tables = [
        f"Incremental log-mel, {inc['utterance_s']:.0f} s utterance grown by "
        f"{inc['step_s']} s steps (80 mels, features padded to 3000 frames, numpy):\n",
        _results.markdown_table(
            [
                {
                    "where": "mean over steps",
                    "incremental ms": inc["incremental_ms_mean"],
                    "full recompute ms": inc["full_ms_mean"],
                    "speedup": inc["speedup_mean"],
                },
                {
                    "where": f"last step ({inc['utterance_s']:.0f} s)",
                    "incremental ms": inc["incremental_ms_at_end"],
                    "full recompute ms": inc["full_ms_at_end"],
                    "speedup": inc["speedup_at_end"],
                },
            ],
            ["where", "incremental ms", "full recompute ms", "speedup"],
        ),
        "\nBatched log-mel of 30 s windows "
        "(best of repeats; torch includes host->device copies):\n",
        _results.markdown_table(
            results["batch_30s"],
            [
                "batch",
                "backend",
                "device",
                "threads",
                "ms_per_batch",
                "ms_per_window",
                "max_abs_diff_vs_numpy",
            ],
        ),
        "\nResampling to 16 kHz (x real time, one core-bound process):\n",
        _results.markdown_table(
            results["resample"],
            [
                "in_rate",
                "audio_s",
                "oneshot_x_realtime",
                "stream_20ms_x_realtime",
                "edge_s16le_stereo_20ms_x_realtime",
            ],
        ),
    ]
    if torch_info is not None:
        tables.append(
            f"\ntorch {torch_info['version']}, {torch_info['threads']} threads, "
            f"CUDA: {torch_info['cuda_device'] or 'none'}.\n"
        )
    if quick:
        tables.insert(0, "**Quick smoke run: reduced sizes, single repeats.**\n\n")
    body = "".join(tables)
    print()
    print(body)
    if not args.no_write:
        _results.write_section("bench_kernels", body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
