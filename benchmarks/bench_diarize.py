"""Speaker attribution (issue 26): conversations with known turns, live and file paths.

Voices: real readers of the eval set (../shared/eval, clips grouped by the speaker named in
the manifest's notes) and espeak-ng variants (16 kHz). A conversation of 2, 3 or 4 voices:
turns of 1-10 s cut from each voice's pooled clips, 0.4-1.0 s gaps, fixed seed.

- live: each conversation streamed through ``Engine(tiny.en, speakers=SpeakerService(
  ResemblyzerEncoder()))`` with ``SessionConfig(diarize=True)``, fed as fast as the engine
  takes it (``wait_idle``); finals carry ``speaker``.
- file: ``transcribe.diarize.label_spans`` on the reference turn spans (offline clustering).

Scored per speaker count: utterances and words attributed to the right speaker after the best
one-to-one mapping (Hungarian), DER (10 ms frames, no collar: missed + false alarm +
confusion over reference speech; live spans are the finals' start..end), speakers found.
Spurious: ``--spurious-min`` minutes of one voice as 1-10 s turns, clustered online (as live)
and offline (as a file): speakers found, target 1. Threshold sweep: the live utterances'
cached embeddings re-clustered by ``SpeakerClusters(threshold=t)``. Cost: encoder CPU per
audio second, transcription CPU per audio second with diarize on and off in the same run.

    python benchmarks/bench_diarize.py [--cost-only] [--no-write]
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _diarize_score import Span, der, share_right, true_speaker
from _results import eval_dir, machine_info, markdown_table, require_eval_set, write_section

SR = 16000
ESPEAK = (
    ("espeak en-us+m3 -p 40", "en-us+m3", 40),
    ("espeak en+f2 -p 70", "en+f2", 70),
    ("espeak en-gb+m1 -p 50", "en-gb+m1", 50),
    ("espeak en-us+f4 -p 60", "en-us+f4", 60),
)
LINES = (
    "I think we should move the release to next week.",
    "The numbers from the last quarter look better than expected.",
    "Could you send me the slides before the meeting starts?",
    "We still have two open bugs in the payment service.",
    "Let us talk about the budget for the new office.",
    "My train was late again this morning, sorry about that.",
    "The customer asked whether the app works offline.",
    "I agree, but we need to test it on older phones first.",
    "Who is going to write the summary for the board?",
    "The weather report says it will rain all weekend.",
)
THRESHOLDS = (0.60, 0.65, 0.68, 0.70, 0.72, 0.75, 0.78, 0.80, 0.85)
MIN_NEW_S = (0.5, 1.0, 1.5, 2.0, 3.0)  # seconds: the shortest utterance that may open a speaker


def espeak(text: str, voice: str, pitch: int) -> np.ndarray:
    from kettle.transcribe.audio.read import load_audio

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "say.wav"
        subprocess.run(
            ["espeak-ng", "-v", voice, "-p", str(pitch), "-w", str(path), text],
            capture_output=True,
            check=True,
        )
        return load_audio(path)


def speaker_of(row: dict[str, str]) -> str | None:
    """The voice a manifest row names (None: skip: 8 kHz copies, many-speaker sets)."""
    notes, name = row["speakers_notes"], Path(row["file"]).name
    if name.startswith(("tel8k", "osr", "fleurs")) or name.endswith(".raw"):
        return None
    if m := re.search(r"spk (\d+)", notes):
        return "librispeech " + m.group(1)
    if m := re.search(r"speaker (\w+) ", notes):
        return m.group(1)
    for prefix in ("lv__", "ljs__", "ps__", "jfk", "ami__"):
        if name.startswith(prefix):
            return prefix.strip("_")
    return None


def voices(path: Path) -> dict[str, np.ndarray]:
    """Each voice's clips joined (trimmed of lead/trail silence by a simple energy gate)."""
    from kettle.transcribe.audio.read import load_audio

    pools: dict[str, list[np.ndarray]] = {}
    with open(path / "manifest.tsv", newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            name = speaker_of(row)
            if name is not None:
                pools.setdefault(name, []).append(trim(load_audio(path / row["file"])))
    for label, voice, pitch in ESPEAK:
        pools[label] = [trim(espeak(line, voice, pitch)) for line in LINES]
    return {k: np.concatenate(v) for k, v in pools.items() if sum(map(len, v)) >= 6 * SR}


def trim(audio: np.ndarray) -> np.ndarray:
    frames = np.abs(audio[: len(audio) // 160 * 160]).reshape(-1, 160).max(axis=1)
    loud = np.flatnonzero(frames > 0.02)
    return audio[loud[0] * 160 : (loud[-1] + 1) * 160] if len(loud) else audio


def conversation(
    pools: dict[str, np.ndarray], names: list[str], turns: int, rng: np.random.Generator
) -> tuple[np.ndarray, list[Span]]:
    """Turns of 1-10 s, speakers cycling in random order with no speaker twice in a row."""
    parts, spans, t, last = [np.zeros(int(0.5 * SR), np.float32)], [], 0.5, -1
    for _ in range(turns):
        spk = int(rng.choice([k for k in range(len(names)) if k != last]))
        pool = pools[names[spk]]
        n = int(min(rng.uniform(1.0, 10.0), len(pool) / SR - 0.1) * SR)
        start = int(rng.integers(0, len(pool) - n))
        parts.append(pool[start : start + n])
        spans.append((t, t + n / SR, spk))
        gap = rng.uniform(0.4, 1.0)
        parts.append(np.zeros(int(gap * SR), np.float32))
        t += n / SR + gap
        last = spk
    parts.append(np.zeros(SR, np.float32))
    return np.concatenate(parts), spans


class Recording:
    """The encoder, recording each embedding and the CPU time spent in it."""

    def __init__(self, encoder: Any) -> None:
        self.encoder, self.cpu_s, self.audio_s = encoder, 0.0, 0.0
        self.calls: list[tuple[float, np.ndarray]] = []

    def embed(self, audio: np.ndarray) -> np.ndarray:
        c0 = time.thread_time()
        out = self.encoder.embed(audio)
        self.cpu_s += time.thread_time() - c0
        self.audio_s += len(audio) / SR
        self.calls.append((len(audio) / SR, out))
        return out


async def live(decoder: Any, encoder: Any, audio: np.ndarray, diarize: bool) -> list[Any]:
    from kettle.streaming.core.events import Final
    from kettle.streaming.core.session import SessionConfig
    from kettle.streaming.engine.engine import Engine
    from kettle.streaming.engine.speakers import SpeakerService

    engine = Engine(decoder, speakers=SpeakerService(encoder) if diarize else None)
    finals: list[Any] = []
    async with engine:
        stream = engine.open_stream(SessionConfig(diarize=diarize, word_timestamps=True))

        async def read() -> None:
            async for event in stream:
                if isinstance(event, Final):
                    finals.append(event)

        reader = asyncio.create_task(read())
        for pos in range(0, len(audio), 1600):
            await stream.wait_idle()
            stream.feed_audio(audio[pos : pos + 1600])
        stream.stop()
        await reader
    return finals


def score(cases: list[tuple[list[Span], list[Span], list[tuple[float, int]]]]) -> dict[str, Any]:
    """cases: (reference turns, hypothesis utterance spans, hypothesis words (mid_s, label))."""
    utt = [0, 0]
    words = [0, 0]
    ders, found, present = [], [], []
    for turns, hyp, hwords in cases:
        r, n = share_right([(h, true_speaker(turns, s, e)) for s, e, h in hyp])
        utt[0], utt[1] = utt[0] + r, utt[1] + n
        r, n = share_right([(h, true_speaker(turns, m, m)) for m, h in hwords])
        words[0], words[1] = words[0] + r, words[1] + n
        ders.append(der(turns, hyp))
        found.append(len({h for _, _, h in hyp}))
        present.append(len({k for _, _, k in turns}))
    return {
        "utterances": utt[1],
        "utt_right_pct": round(100 * utt[0] / max(utt[1], 1), 1),
        "words_right_pct": round(100 * words[0] / words[1], 1) if words[1] else None,
        "der_pct": round(100 * float(np.mean([d["der"] for d in ders])), 1),
        "confusion_pct": round(100 * float(np.mean([d["confusion"] for d in ders])), 1),
        "speakers_found": " ".join(map(str, found)),
        "speakers_true": " ".join(map(str, present)),  # a 6-turn draw may miss a speaker
    }


def cluster(
    embeddings: list[tuple[float, np.ndarray]], threshold: float, min_new_s: float | None = None
) -> list[int]:
    from kettle.transcribe.speakers.clusters import MIN_NEW_SPEAKER_S, SpeakerClusters

    clusters = SpeakerClusters(threshold=threshold, min_new_s=min_new_s or MIN_NEW_SPEAKER_S)
    return [clusters.assign(e, s).speaker for s, e in embeddings]


def main(argv: list[str] | None = None) -> int:
    from kettle.transcribe.cli.transcribe import load_decoder
    from kettle.transcribe.speakers.clusters import (
        DEFAULT_THRESHOLD,
        MIN_NEW_SPEAKER_S,
        label_offline,
    )
    from kettle.transcribe.speakers.diarize import label_spans
    from kettle.transcribe.speakers.encoder import ResemblyzerEncoder

    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--model", default="tiny.en")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--per-count", type=int, default=3, help="conversations per speaker count")
    p.add_argument("--turns", type=int, default=6)
    p.add_argument("--spurious-min", type=float, default=10.0)
    p.add_argument("--seed", type=int, default=26)
    p.add_argument("--cost-only", action="store_true", help="only the CPU figures")
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args(argv)
    path = eval_dir()
    data_line = require_eval_set(path)
    pools = voices(path)
    names = sorted(pools)
    print(f"{len(names)} voices: {', '.join(names)}", file=sys.stderr, flush=True)
    decoder = load_decoder(args.model, args.threads, "cpu", 5)
    encoder = Recording(ResemblyzerEncoder())
    rng = np.random.default_rng(args.seed)
    convs = []
    for count in (2, 3, 4):
        for _ in range(args.per_count):
            chosen = [names[i] for i in rng.choice(len(names), count, replace=False)]
            convs.append((count, chosen, *conversation(pools, chosen, args.turns, rng)))
    audio_s = sum(len(a) / SR for _, _, a, _ in convs)
    # Cost: the same conversations with diarize off, then on (process CPU, all threads).
    cpu: dict[bool, float] = {}
    asyncio.run(live(decoder, encoder, convs[0][2], True))  # warm-up: model and encoder loaded
    encoder.calls.clear()
    runs: dict[bool, list[list[Any]]] = {}
    for diarize in (False, True):
        c0 = time.process_time()
        runs[diarize] = [asyncio.run(live(decoder, encoder, a, diarize)) for _, _, a, _ in convs]
        cpu[diarize] = time.process_time() - c0
        print(f"diarize {diarize}: {cpu[diarize]:.1f} CPU s", file=sys.stderr, flush=True)
    cost: dict[str, object] = {
        "audio_s": round(audio_s, 1),
        "cpu_per_audio_s_off": round(cpu[False] / audio_s, 4),
        "cpu_per_audio_s_on": round(cpu[True] / audio_s, 4),
        "diarize_overhead_pct": round(100 * (cpu[True] / cpu[False] - 1), 1),
        "encoder_cpu_per_audio_s": round(encoder.cpu_s / max(encoder.audio_s, 1e-9), 4),
    }
    print(json.dumps(cost), file=sys.stderr, flush=True)
    result: dict[str, Any] = {"machine": machine_info(), "cost": cost}
    rows: list[dict[str, Any]] = []
    sweep: list[dict[str, Any]] = []
    spurious: list[dict[str, Any]] = []
    if not args.cost_only:
        calls = encoder.calls
        live_cases: dict[int, list[Any]] = {}
        file_cases: dict[int, list[Any]] = {}
        cached: list[tuple[int, list[Span], list[tuple[float, np.ndarray]], list[Any]]] = []
        k = 0
        for (count, _, audio, turns), finals in zip(convs, runs[True], strict=True):
            hyp = [(f.start / SR, f.end / SR, f.speaker) for f in finals]
            hw = [((w.start + w.end) / 2, f.speaker) for f in finals for w in f.words]
            live_cases.setdefault(count, []).append((turns, hyp, hw))
            # The embedding of each final's audio, in order. Embeddings start when an
            # utterance closes, so an utterance with no final (or one that ended elsewhere)
            # leaves an extra call: a final takes the next call of its own length.
            emb = []
            for f in finals:
                seconds = (f.end - f.start) / SR
                while calls[k][0] != seconds:
                    k += 1
                emb.append(calls[k])
                k += 1
            cached.append((count, turns, emb, finals))
            labels = label_spans(encoder, audio, [(s, e) for s, e, _ in turns])
            fh = [(s, e, lab.speaker) for (s, e, _), lab in zip(turns, labels, strict=True)]
            file_cases.setdefault(count, []).append((turns, fh, []))
        for count in (2, 3, 4):
            rows.append({"path": "live", "speakers": count, **score(live_cases[count])})
            rows.append({"path": "file", "speakers": count, **score(file_cases[count])})
        # Spurious speakers: long runs of one voice as 1-10 s turns.
        one: dict[str, list[tuple[float, np.ndarray]]] = {}
        for name in ("librispeech 1272", "lv", ESPEAK[0][0]):
            pool, embs, t = pools[name], [], 0.0
            while t < args.spurious_min * 60:
                n = int(min(rng.uniform(1.0, 10.0), len(pool) / SR - 0.1) * SR)
                start = int(rng.integers(0, len(pool) - n))
                embs.append((n / SR, encoder.embed(pool[start : start + n])))
                t += n / SR + rng.uniform(0.4, 1.0)
            one[name] = embs
            offline = label_offline([e for _, e in embs], [s for s, _ in embs])
            spurious.append(
                {
                    "voice": name,
                    "minutes": round(t / 60, 1),
                    "turns": len(embs),
                    "found_online": len(set(cluster(embs, DEFAULT_THRESHOLD))),
                    "found_offline": len({lab.speaker for lab in offline}),
                }
            )
        grid: list[tuple[float, float | None]] = [(th, None) for th in THRESHOLDS]
        grid += [(DEFAULT_THRESHOLD, m) for m in MIN_NEW_S]
        for th, min_new in grid:
            right = total = 0
            for _count, turns, emb, finals in cached:
                labs = cluster(emb, th, min_new)
                pairs = [
                    (lab, true_speaker(turns, f.start / SR, f.end / SR))
                    for lab, f in zip(labs, finals, strict=False)
                ]
                r, n = share_right(pairs)
                right, total = right + r, total + n
            sweep.append(
                {
                    "threshold": th,
                    "min_new_s": min_new or MIN_NEW_SPEAKER_S,
                    "utt_right_pct": round(100 * right / max(total, 1), 1),
                    "spurious": sum(len(set(cluster(e, th, min_new))) - 1 for e in one.values()),
                }
            )
        result.update(rows=rows, sweep=sweep, spurious=spurious)
    Path(__file__).with_suffix(".json").write_text(json.dumps(result, indent=2))
    columns = [
        "path", "speakers", "utterances", "utt_right_pct", "words_right_pct", "der_pct",
        "confusion_pct", "speakers_found", "speakers_true",
    ]  # fmt: skip
    tables = markdown_table([cost], list(cost))
    if rows:
        tables = (
            markdown_table(rows, columns)
            + "\nSpurious speakers (one voice; found_online at the default threshold):\n\n"
            + markdown_table(spurious, list(spurious[0]))
            + "\nThreshold and min_new_s sweep (live utterances' embeddings re-clustered; "
            "min_new_s: the shortest utterance that may open a speaker; spurious: extra "
            "speakers summed over the one-voice runs):\n\n"
            + markdown_table(sweep, list(sweep[0]))
            + "\nCost:\n\n"
            + tables
        )
    print(json.dumps(result, indent=2))
    print(tables)
    if not args.no_write:
        body = (
            f"{data_line}. Voices: {', '.join(names)}. {args.per_count} conversations per "
            f"speaker count, {args.turns} turns of 1-10 s, 0.4-1.0 s gaps, seed {args.seed}; "
            f"model {args.model}, {args.threads} threads, ResemblyzerEncoder, threshold "
            f"{DEFAULT_THRESHOLD}. live: Engine + SessionConfig(diarize=True), fed via "
            "wait_idle; file: label_spans on the reference turns. Right: after the best "
            "one-to-one label mapping (Hungarian), per conversation. DER: 10 ms frames, no "
            "collar, (missed + false alarm + confusion) / reference speech; a live final's "
            "span is its start..end (endpoint silence counts as false alarm). speakers_found: "
            "per conversation. Cost: process CPU of the live runs with diarize off vs on "
            "(noisy on a shared machine; `--cost-only` reruns it), encoder: thread CPU in "
            "embed per embedded audio second. file rows score the reference turns' labels "
            "(no words).\n\n" + tables
        )
        # --cost-only keeps the accuracy figures: its rerun has a section of its own
        write_section("bench_diarize_cost" if args.cost_only else "bench_diarize", body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
