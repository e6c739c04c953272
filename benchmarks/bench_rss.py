"""RSS under a loop of real decodes: is the server's native memory growth glibc malloc's?

Each variant runs in a fresh process that loads the model through kettle's own adapter and
runs the same seeded sequence of decodes the streaming path makes (growing windows per
stream with incremental log-mel, partials with a prefix, finals with the earlier finals as
context and word timestamps, batches of 1-4, streams released at each final), printing RSS
every `--every` decodes:

- default: glibc as it comes (one malloc arena per thread that ever contended, up to 8x cores);
- arena2: MALLOC_ARENA_MAX=2 in the environment;
- trim: default, plus glibc malloc_trim(0) every `--every` decodes (what `kettle serve`
  does at most once a minute, when idle or between batches under steady load:
  ``kettle.streaming.engine.native_memory``);
- dnnl1024 (oneDNN's default), dnnl16, dnnlN: trim, in a process with
  ONEDNN_PRIMITIVE_CACHE_CAPACITY=N. oneDNN, CTranslate2's GEMM backend on CPUs without
  MKL, caches compiled primitives keyed by shape, and a stream's shapes vary with batch,
  beam, encoder length and hypothesis count. Every other variant runs with kettle's own
  setting (``kettle.transcribe.model.fw.ONEDNN_CACHE_CAPACITY``);
- mmap128: trim, with glibc's mmap threshold pinned at 128 KiB (MALLOC_MMAP_THRESHOLD_):
  tried for `kettle serve` and reverted, decodes were 7.5 % slower (RESULTS.md, "Soak and
  RSS, session 12");
- jemalloc, tcmalloc: that malloc preloaded (`kettle serve --allocator`), with the release
  kettle makes there every `--every` decodes (jemalloc: a purge of its arenas);
- nofastmm: mmap128, and MKL_DISABLE_FAST_MM=1 (CTranslate2 allocates through Intel MKL,
  whose memory manager keeps freed buffers for reuse).

Partials and finals decode with ``SessionConfig``'s beams and encoder lengths (partials: a
beam of 3 on at least 10 s; finals: a beam of 5 on at least 15 s), finals with the stream's
earlier finals as forced context.

Variants may repeat (`--variants default,trim,default,trim`) to interleave the decode
timings on a shared machine; a repeated variant's rows are numbered.

    python benchmarks/bench_rss.py                      # 3 variants, 90 s each, tiny.en
    python benchmarks/bench_rss.py --seconds 30 --variants default,trim --no-write
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import markdown_table, write_section
from kettle.streaming.cli import allocator

HERE = Path(__file__).resolve().parent
SAMPLE_RATE = 16000
VARIANTS = ("default", "arena2", "trim", "dnnl1024")
# Other mallocs, preloaded (Debian: libjemalloc2, libtcmalloc-minimal4), with the release
# `kettle serve --allocator` makes on them (native_memory.load_release) every `--every`.
PRELOADED = tuple(allocator.SONAMES)


def rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _clips(eval_dir: Path, limit: int) -> list[np.ndarray]:
    from kettle.transcribe.audio.read import load_audio

    paths = sorted((eval_dir / "audio").iterdir())[:limit]
    return [load_audio(p) for p in paths]


class _Stream:
    """One simulated stream: a window that grows until a final, then starts afresh."""

    def __init__(self, index: int, clip: np.ndarray) -> None:
        self.index = index
        self.clip = clip
        self.start = 0
        self.end = 0
        self.utterance = 0
        self.finals: list[tuple[int, str]] = []  # (start, text) of this clip's finals
        self.partial = ""

    def context(self, final: bool) -> tuple[int, str | None]:
        """A final's window start and forced context: the clip's earlier finals that fit
        in 30 s and 250 characters (as the session's context history gives them)."""
        if not final:
            return self.start, None
        begin, texts = self.start, list[str]()
        for start, text in reversed(self.finals):
            if self.end - start > 29 * SAMPLE_RATE or len(" ".join([text, *texts])) > 250:
                break
            begin, texts = start, [text, *texts]
        return begin, " ".join(texts) or None

    def key(self) -> tuple[int, int]:
        return (self.index, self.utterance)


def _child(args: argparse.Namespace) -> None:
    from kettle.streaming.core.session import SessionConfig
    from kettle.transcribe.model.adapter import ModelConfig, WhisperAdapter
    from kettle.transcribe.types import DecodeKind, DecodeRequest

    trimmed = args.variant in ("trim", "mmap128", "nofastmm") or args.variant.startswith("dnnl")
    trim: Callable[[int], object] | None = ctypes.CDLL("libc.so.6").malloc_trim if trimmed else None
    if args.variant in PRELOADED:  # the release `kettle serve` makes on that malloc
        from kettle.streaming.engine.native_memory import load_release

        release = load_release()
        trim = None if release is None else (lambda _size: release())
    defaults = SessionConfig()
    rng = random.Random(args.seed)
    clips = _clips(Path(args.eval_dir), 12)
    adapter = WhisperAdapter(ModelConfig(name=args.model, threads=args.threads))
    streams = [_Stream(i, clips[i % len(clips)]) for i in range(4)]
    decodes = decode_s = 0.0
    began = time.monotonic()
    print(json.dumps({"decodes": 0, "rss_mb": rss_mb(), "t": 0.0}), flush=True)
    while time.monotonic() - began < args.seconds:
        batch: list[DecodeRequest] = []
        chosen = rng.sample(streams, rng.randint(1, 4))
        for s in chosen:
            s.end = min(len(s.clip), s.end + int(rng.uniform(0.5, 3.0) * SAMPLE_RATE))
            final = s.end - s.start > rng.uniform(4, 28) * SAMPLE_RATE or s.end >= len(s.clip)
            begin, context = s.context(final)
            batch.append(
                DecodeRequest(
                    audio=s.clip[begin : s.end],
                    kind=DecodeKind.FINAL if final else DecodeKind.PARTIAL,
                    request_id=s.index,
                    context=context if final else None,
                    prefix=None if final else (s.partial.split(".")[0] or None),
                    word_timestamps=final,
                    beam_size=defaults.final_beam_size if final else defaults.partial_beam_size,
                    encode_min_s=defaults.encode_min_s(
                        DecodeKind.FINAL if final else DecodeKind.PARTIAL
                    ),
                    stream_key=s.key(),
                )
            )
        t0 = time.perf_counter()
        results = adapter.decode_batch(batch)
        decode_s += time.perf_counter() - t0
        for s, req, res in zip(chosen, batch, results, strict=True):
            if req.kind is DecodeKind.FINAL:
                s.finals = [*s.finals[-8:], (s.start, res.text)]
                s.partial = ""
                adapter.release_stream(s.key())
                s.utterance += 1
                s.start = s.end if s.end < len(s.clip) else 0
                s.end = s.start
                if s.start == 0:
                    s.clip = clips[rng.randrange(len(clips))]
                    s.finals = []
            else:
                s.partial = res.text
        before = int(decodes) // args.every
        decodes += len(batch)
        if int(decodes) // args.every > before:
            if trim is not None:
                trim(0)
            print(
                json.dumps(
                    {
                        "decodes": int(decodes),
                        "rss_mb": rss_mb(),
                        "t": time.monotonic() - began,
                        "decode_s": decode_s,
                    }
                ),
                flush=True,
            )


def _run_variant(args: argparse.Namespace, variant: str) -> list[dict[str, float]]:
    env = dict(os.environ)
    for name in (
        "MALLOC_ARENA_MAX",
        "ONEDNN_PRIMITIVE_CACHE_CAPACITY",
        "MALLOC_MMAP_THRESHOLD_",
        "MKL_DISABLE_FAST_MM",
    ):
        env.pop(name, None)
    if variant == "arena2":
        env["MALLOC_ARENA_MAX"] = "2"
    if variant in ("mmap128", "nofastmm"):  # tried for `kettle serve`, reverted (RESULTS.md)
        env["MALLOC_MMAP_THRESHOLD_"] = "131072"
    if variant == "nofastmm":  # Intel MKL's allocator keeps freed buffers unless this is set
        env["MKL_DISABLE_FAST_MM"] = "1"
    if variant.startswith("dnnl"):
        env["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] = str(int(variant[4:]))
    env.pop("LD_PRELOAD", None)
    if variant in PRELOADED:
        library = allocator.find_library(variant)
        if library is None:
            raise SystemExit(f"{variant}: {allocator.SONAMES[variant]} is not installed")
        env["LD_PRELOAD"] = library
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        variant,
        "--seconds",
        str(args.seconds),
        "--every",
        str(args.every),
        "--model",
        args.model,
        "--threads",
        str(args.threads),
        "--eval-dir",
        args.eval_dir,
        "--seed",
        str(args.seed),
    ]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    samples = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    for row in samples:
        print(variant, row, file=sys.stderr, flush=True)
    return samples


def summarize(samples: list[dict[str, float]]) -> dict[str, Any]:
    """RSS after the first sample past warm-up (a quarter of the decodes) and at the end."""
    loaded = samples[1] if len(samples) > 1 else samples[0]
    warm = samples[max(1, len(samples) // 4)] if len(samples) > 1 else samples[0]
    last = samples[-1]
    tail = last["decodes"] - warm["decodes"]
    per_decode = (last["decode_s"] - warm.get("decode_s", 0.0)) / tail if tail else float("nan")
    return {
        "decodes": int(last["decodes"]),
        "rss_first_mb": round(loaded["rss_mb"], 1),
        "rss_warm_mb": round(warm["rss_mb"], 1),
        "rss_end_mb": round(last["rss_mb"], 1),
        "growth_after_warm_pct": round(100 * (last["rss_mb"] / warm["rss_mb"] - 1), 1),
        "mb_per_100_decodes": round(100 * (last["rss_mb"] - warm["rss_mb"]) / tail, 2)
        if tail
        else float("nan"),
        "ms_per_decode": round(1000 * per_decode, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--seconds", type=float, default=90.0, help="per variant")
    parser.add_argument("--every", type=int, default=25, help="decodes between RSS samples")
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument(
        "--eval-dir",
        default=os.environ.get("KETTLE_EVAL_DIR", str(HERE.parent / "tests/data/speech")),
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", default=None)
    parser.add_argument("--note", default="")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        args.variant = args.child
        _child(args)
        return
    load = os.getloadavg()[0]
    report: dict[str, Any] = {"load_start": round(load, 2), "variants": {}}
    for i, variant in enumerate(args.variants.split(",")):
        samples = _run_variant(args, variant)
        name = variant if variant not in report["variants"] else f"{variant}#{i + 1}"
        report["variants"][name] = {"summary": summarize(samples), "samples": samples}
    report["load_end"] = round(os.getloadavg()[0], 2)
    print(json.dumps({k: v["summary"] for k, v in report["variants"].items()}))
    rows: list[dict[str, object]] = [
        {"variant": name, **v["summary"]} for name, v in report["variants"].items()
    ]
    table = markdown_table(rows, list(rows[0]))
    print(table)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1), encoding="utf-8")
    if not args.no_write:
        body = (
            f"{args.note}\n\n1-minute load average {report['load_start']} at the start, "
            f"{report['load_end']} at the end; {args.seconds:.0f} s per variant, one after "
            f"another, each a fresh process.\n\n{table}"
        )
        write_section("rss", body)


if __name__ == "__main__":
    main()
