"""Time to final segment (TTFS), the way Pipecat's stt-benchmark measures it, on kettle.

Pipecat's stt-benchmark (github.com/pipecat-ai/stt-benchmark) times a voice agent's wait: one
connection per sample, audio streamed in real time, the client's VAD stopping 0.2 s after the
end of speech and asking for the final at once (Deepgram ``Finalize``, OpenAI Realtime
``input_audio_buffer.commit`` with turn detection off, AssemblyAI ``ForceEndpoint``). TTFS runs
from the end of speech to the final transcript's arrival. Its table: transcripts, perfect, WER
mean, pooled WER, TTFS median / P95 / P99.

Here:

- turns (benchmarks/_ttfs_turns.py): one speaker's speech of 1-20 s, an eval clip or
  consecutive clips of one speaker joined with 0.3 s pauses; ``--turns`` of them (default
  100), taken round-robin over the length buckets (<3, 3-6, 6-10, 10-20 s of speech), each
  after 0.5 s of silence and followed by silence that keeps streaming (as a microphone does)
  until the final comes;
- the end of speech: the turn's last speech sample by Silero VAD (faster-whisper's, no
  padding), on the audio clock; its wall time is when that sample would have been recorded;
- surfaces (benchmarks/_ttfs_clients.py, raw WebSocket clients speaking each protocol as
  documented, so the timing is the server's, not a framework's): ``deepgram`` (Finalize),
  ``endpoint`` (Deepgram endpointing=25, no Finalize: kettle's endpoint decides), ``openai``
  (commit, turn detection none), ``openai_vad`` (server VAD, no commit), ``flux`` (Flux
  EndOfTurn, nothing sent but audio), ``assemblyai`` (ForceEndpoint);
- each run on a fresh server, warmed by one uncounted turn per surface (the shortest), then
  turns one at a time, every surface on a turn before the next turn (a disturbance on the
  machine weighs on every surface alike);
- WER: Whisper's English normalizer; the finals' pooled WER beside the same turns read whole
  by kettle's file pipeline (`transcribe_audio`, what `kettle transcribe` runs; computed once,
  in process, before the server starts).

``--conversation GAP_S`` streams each surface's turns on one connection instead, ``GAP_S`` of
silence after each (an agent's reply), as a voice agent keeps its connection for a call: each
turn then has the earlier ones as context. It prints its tables and writes
``bench_ttfs_conversation.json``; RESULTS.md quotes it below the bench_ttfs section.

A run streams all the turns' audio once per surface (100 turns: about 15 minutes per surface
per run). Usage (a quiet machine: ``echo -10 > /proc/self/autogroup``):

    python benchmarks/bench_ttfs.py [--surface deepgram --surface flux] [--turns 100 --runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import eval_dir, machine_info, markdown_table, require_eval_set, write_section
from _serve import kettle_serving
from _ttfs_clients import STOP_S, SURFACES, Outcome, run_conversation, run_turn, surfaces
from _ttfs_turns import GAP_S, Turn, bucket_labels, bucket_of, candidates, choose, load_clips

ALL = "all"
# Pipecat stt-benchmark's published figures for hosted APIs (median / P95 ms; 1000 samples of
# pipecat-ai/smart-turn-data-v3.1-train, their machines and networks).
PUBLISHED = (
    ("NVIDIA Nemotron 3.0", 221, 238),
    ("Deepgram nova-3", 247, 298),
    ("Soniox", 249, 281),
    ("AssemblyAI", 256, 362),
    ("OpenAI gpt-4o-transcribe", 637, 965),
)


def whole_texts(turns: list[Turn], model: str) -> dict[str, str]:
    """kettle's reading of each turn decoded whole by the file pipeline (2 threads)."""
    from kettle.transcribe.files.pipeline import transcribe_audio
    from kettle.transcribe.model.adapter import ModelConfig, WhisperAdapter

    decoder = WhisperAdapter(ModelConfig(name=model, threads=2))
    texts: dict[str, str] = {}
    for turn in turns:
        key = base_name(turn.name)
        if key not in texts:
            texts[key] = str(transcribe_audio(turn.audio, decoder).text)
    return texts


def base_name(name: str) -> str:
    """A repeated turn's name without its ``#N``."""
    return name.split("#", 1)[0]


def pooled_wer(refs: list[str], hyps: list[str]) -> float | None:
    import jiwer
    from whisper_normalizer.english import EnglishTextNormalizer

    if not refs:
        return None
    norm = EnglishTextNormalizer()
    wer = jiwer.wer([norm(r) for r in refs], [norm(h) or "<empty>" for h in hyps])
    return round(100 * float(wer), 2)


def turn_wer(ref: str, hyp: str) -> float:
    return pooled_wer([ref], [hyp]) or 0.0


def ms(values: list[float], q: float) -> int | None:
    return round(1000 * float(np.percentile(values, q))) if values else None


def score(outcomes: list[Outcome], turns: dict[str, Turn], whole: dict[str, str]) -> dict[str, Any]:
    """Pipecat's columns for ``outcomes``, with the whole-turn WER of the same turns."""
    if not outcomes:
        return {"turns": 0}
    refs = [turns[o.name].reference for o in outcomes]
    ttfs = sorted(o.ttfs_s for o in outcomes if o.ttfs_s is not None)
    wers = [turn_wer(r, o.text) for r, o in zip(refs, outcomes, strict=True)]
    return {
        "turns": len(outcomes),
        "transcripts": round(100 * len(ttfs) / len(outcomes), 1),
        "perfect": round(100 * sum(w == 0 for w in wers) / len(wers), 1),
        "wer_mean": round(statistics.fmean(wers), 2),
        "pooled_wer": pooled_wer(refs, [o.text for o in outcomes]),
        "whole_wer": pooled_wer(refs, [whole[base_name(o.name)] for o in outcomes]),
        "ttfs_p50_ms": ms(ttfs, 50),
        "ttfs_p95_ms": ms(ttfs, 95),
        "ttfs_p99_ms": ms(ttfs, 99),
        "ttfs_max_ms": round(1000 * ttfs[-1]) if ttfs else None,
        "interims_per_turn": round(statistics.fmean(o.interims for o in outcomes), 1),
    }


def by_bucket(
    outcomes: list[Outcome], turns: dict[str, Turn], whole: dict[str, str]
) -> dict[str, dict[str, Any]]:
    """``score`` over all the outcomes, then over each turn-length bucket's."""
    out = {ALL: score(outcomes, turns, whole)}
    for label in bucket_labels():
        mine = [o for o in outcomes if bucket_of(turns[o.name].speech_s) == label]
        out[label] = score(mine, turns, whole)
    return out


def run_all(
    base: str, names: list[str], turns: list[Turn], conversation: float | None = None
) -> dict[str, list[Outcome]]:
    """Every surface on each turn in turn, one connection at a time (with ``conversation``,
    one connection per surface for all turns, that many seconds of silence after each), after
    one warm-up turn per surface (the shortest; not counted): a fresh server's first session
    pays one-off costs that a server in service has paid."""
    chosen = {name: surfaces()[name] for name in names}
    got: dict[str, list[Outcome]] = {name: [] for name in names}

    def show(name: str, turn: Turn, outcome: Outcome) -> None:
        shown = "missing" if outcome.ttfs_s is None else f"{1000 * outcome.ttfs_s:.0f} ms"
        line = f"{name} {turn.name} ({turn.speech_s:.1f} s): {shown}: {outcome.text!r}"
        print(line, file=sys.stderr)

    async def go() -> None:
        warm = min(turns, key=lambda t: t.speech_s)
        for name, surface in chosen.items():
            outcome = await run_turn(base, surface, warm)
            print(f"{name} warm-up {warm.name}: {outcome.ttfs_s} s", file=sys.stderr)
        if conversation is not None:
            for name, surface in chosen.items():
                got[name] = await run_conversation(base, surface, turns, conversation)
                for turn, outcome in zip(turns, got[name], strict=True):
                    show(name, turn, outcome)
            return
        for turn in turns:
            for name, surface in chosen.items():
                outcome = await run_turn(base, surface, turn)
                got[name].append(outcome)
                show(name, turn, outcome)

    asyncio.run(go())
    return got


def cell(stats: dict[str, Any]) -> str:
    """A bucket's P50/P95/P99 in one table cell."""
    if not stats.get("turns"):
        return ""
    return "/".join(str(stats.get(f"ttfs_{q}_ms")) for q in ("p50", "p95", "p99"))


def tables(pooled: list[dict[str, Any]], runs: list[dict[str, Any]], *, brief: bool) -> str:
    """Pooled over runs, per bucket (one run: the per-run table says nothing more); then per
    run, a bucket per column. ``brief``: only the per-run table."""
    first = markdown_table(
        pooled,
        ["surface", "turns (speech)", "turns", "transcripts", "perfect", "wer_mean",
         "pooled_wer", "whole_wer", "ttfs_p50_ms", "ttfs_p95_ms", "ttfs_p99_ms", "ttfs_max_ms"],
    )  # fmt: skip
    second = markdown_table(
        runs,
        ["surface", "run", "turns", "transcripts", "pooled_wer", "whole_wer", ALL,
         *bucket_labels(), "interims_per_turn"],
    )  # fmt: skip
    per_run = "Per run: TTFS P50/P95/P99 ms, overall and per turn length:\n\n" + second
    if brief:
        return per_run
    pooled_text = "Pooled over the runs, per turn length (speech seconds):\n\n" + first
    one_run = len({row["run"] for row in runs}) == 1
    return pooled_text if one_run else pooled_text + "\n" + per_run


def published() -> str:
    rows = "".join(f"| {name} | {p50} | {p95} |\n" for name, p50, p95 in PUBLISHED)
    return "| hosted API (published) | median ms | P95 ms |\n|---|---|---|\n" + rows


def measure(
    names: list[str],
    turns: list[Turn],
    whole: dict[str, str],
    runs: int,
    serve: list[str],
    conversation: float | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """``runs`` runs, each on a fresh server: the pooled rows (per surface and bucket), the
    per-run rows (per surface) and each run's outcomes."""
    by_name = {t.name: t for t in turns}
    outcomes: dict[str, list[Outcome]] = {name: [] for name in names}
    run_rows, raw_runs = [], []
    for run in range(1, runs + 1):
        with kettle_serving(serve) as (_, base):
            got = run_all(base, names, turns, conversation)
        for name in names:
            outcomes[name] += got[name]
            stats = by_bucket(got[name], by_name, whole)
            cells = {label: cell(stats[label]) for label in [ALL, *bucket_labels()]}
            run_rows.append({"surface": name, "run": run, **stats[ALL], **cells})
            kept = [o.__dict__ for o in got[name]]
            raw_runs.append({"surface": name, "run": run, "stats": stats, "outcomes": kept})
    pooled_rows = [
        {"surface": name, "turns (speech)": label, **stats}
        for name in names
        for label, stats in by_bucket(outcomes[name], by_name, whole).items()
    ]
    return pooled_rows, run_rows, raw_runs


def section(data_line: str, turns: list[Turn], runs: int, table: str) -> str:
    """bench_ttfs's RESULTS.md text: the data, the method, the tables, Pipecat's figures."""
    counts = {label: 0 for label in bucket_labels()}
    for t in turns:
        counts[bucket_of(t.speech_s)] += 1
    shown = ", ".join(f"{k}: {v}" for k, v in counts.items())
    return (
        f"{data_line}. {len(turns)} turns of one speaker's speech, eval clips alone or joined\n"
        f"with {GAP_S:g} s pauses ({shown}), one connection per turn; {runs} runs, each on a\n"
        "fresh server warmed by one uncounted turn per surface.\n\n"
        "Pipecat stt-benchmark's method: real-time 20 ms frames; Finalize (Deepgram), commit\n"
        f"(OpenAI Realtime, turn detection none) or ForceEndpoint (AssemblyAI) {STOP_S} s\n"
        "after the end of speech (Silero VAD, last speech sample); TTFS from the end of\n"
        "speech to the final. `endpoint` (Deepgram endpointing=25, no Finalize), `openai_vad`\n"
        "(server VAD) and `flux` (EndOfTurn): kettle's endpoint decides. WER: Whisper\n"
        "normalizer, per turn (mean) and pooled; `whole_wer`: the same turns decoded whole\n"
        "by the file pipeline; perfect: turns at 0 %.\n\n" + table + "\n"
        "For comparison, Pipecat stt-benchmark's published figures for hosted APIs\n"
        "(github.com/pipecat-ai/stt-benchmark; their machines and audio, over a network):\n\n"
        + published()
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--surface", action="append", choices=SURFACES, help="repeatable (default: all six)"
    )
    p.add_argument("--runs", type=int, default=3, help="full passes, each on a fresh server")
    p.add_argument("--turns", type=int, default=100, help="turns per run (default 100)")
    p.add_argument("--max-s", type=float, default=20.0, help="longest turn's speech (seconds)")
    p.add_argument(
        "--model",
        default=None,
        help="kettle serve --model, and the whole-turn decode's (default: tiny.en)",
    )
    p.add_argument("--serve-arg", action="append", default=[], help="more `kettle serve` arguments")
    p.add_argument(
        "--conversation",
        type=float,
        metavar="GAP_S",
        help="all turns on one connection per surface, GAP_S of silence after each",
    )
    p.add_argument(
        "--no-write", action="store_true", help="do not rewrite RESULTS.md and bench_ttfs.json"
    )
    args = p.parse_args(argv)
    names = args.surface or list(SURFACES)
    path = eval_dir()
    data_line = require_eval_set(path)
    turns = choose(candidates(load_clips(path), args.max_s), args.turns)
    print(f"{len(turns)} turns, {sum(len(t.audio) for t in turns) / 16000:.0f} s", file=sys.stderr)
    whole = whole_texts(turns, args.model or "tiny.en")
    serve = [*(["--model", args.model] if args.model else []), *args.serve_arg]
    conversation = args.conversation
    pooled_rows, run_rows, raw_runs = measure(names, turns, whole, args.runs, serve, conversation)
    table = tables(pooled_rows, run_rows, brief=conversation is not None)
    info = machine_info()
    listing = [
        {"name": t.name, "speech_s": round(t.speech_s, 2), "clips": list(t.clips)} for t in turns
    ]
    print(json.dumps({"machine": info, "pooled": pooled_rows, "runs": run_rows}, indent=2))
    print(table)
    if not args.no_write:
        saved = {"machine": info, "turns": listing, "whole": whole, "pooled": pooled_rows}
        saved |= {"runs": raw_runs}
        name = "bench_ttfs" if conversation is None else "bench_ttfs_conversation"
        Path(__file__).with_name(f"{name}.json").write_text(json.dumps(saved, indent=2))
        if conversation is None:  # (RESULTS.md is at its cap: bench_ttfs's text quotes it)
            write_section(name, section(data_line, turns, args.runs, table))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
