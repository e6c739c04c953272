"""Where a live final's time goes: encoder, forced context, beam width.

A final in context is decoded on its utterance plus the audio of earlier finals, whose text
is forced as the decoder's prefix (issue 9). This times, on pairs of eval clips, the final of
the second clip alone (the per-utterance path) and in context (the first clip's text forced),
at several beam widths and encoder input lengths, with the model called directly (CTranslate2
through faster-whisper's model object; no session, no engine). Each case is timed ``--repeat``
times after a warm-up call.

    python benchmarks/bench_final_cost.py              # 7 pairs of eval clips, tiny.en
    python benchmarks/bench_final_cost.py --pairs 3 --no-write
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import eval_dir, machine_info, markdown_table, write_section

SAMPLE_RATE = 16000
GAP_S = 1.0  # silence between the context clip and the utterance
TAIL_S = 0.3  # silence after the utterance in its window (the final's tail)


def _clips(folder: Path, pairs: int) -> list[tuple[np.ndarray, str]]:
    """Eval clips of 3-12 s with their reference text, enough for ``pairs`` pairs."""
    from kettle.transcribe.audio.read import load_audio

    rows = (folder / "manifest.tsv").read_text(encoding="utf-8").splitlines()[1:]
    out = []
    for row in rows:
        fields = row.split("\t")
        audio = load_audio(folder / fields[0])
        if 3 < len(audio) / SAMPLE_RATE < 12:
            text = fields[3]
            out.append((audio, text.capitalize() if text.isupper() else text))
        if len(out) > pairs:
            break
    return out


def _timed(call: Callable[[], object], repeat: int) -> float:
    call()  # warm-up: first-call allocations and oneDNN primitives
    start = time.perf_counter()
    for _ in range(repeat):
        call()
    return (time.perf_counter() - start) / repeat * 1000


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    import ctranslate2
    from kettle.transcribe.model import fw
    from kettle.transcribe.model.models import resolve_model

    model_obj = fw.load_whisper(
        str(resolve_model(args.model)), device="cpu", compute_type="int8", threads=args.threads
    )
    model, tokenizer = model_obj.model, model_obj.hf_tokenizer
    features = fw.FeatureExtractor()
    start_tokens = [tokenizer.token_to_id(t) for t in ("<|startoftranscript|>", "<|notimestamps|>")]

    def encode_input(window: np.ndarray, seconds: int) -> Any:
        padded = np.zeros(SAMPLE_RATE * seconds, dtype=np.float32)
        padded[: len(window)] = window[: len(padded)]
        mel = features(padded)[:, : seconds * 100]
        return ctranslate2.StorageView.from_array(mel[None].astype(np.float32))

    gap = np.zeros(int(GAP_S * SAMPLE_RATE), dtype=np.float32)
    tail = np.zeros(int(TAIL_S * SAMPLE_RATE), dtype=np.float32)
    clips = _clips(eval_dir(), args.pairs)
    cases: dict[str, list[tuple[float, float, int, int]]] = {}
    for (context_audio, context_text), (audio, _) in itertools.pairwise(clips):
        in_context = np.concatenate([context_audio, gap, audio, tail])
        fit = int(np.ceil(len(in_context) / SAMPLE_RATE)) + 1
        variants = [("alone", np.concatenate([audio, tail]), "", 30, 5)]
        variants += [("in context", in_context, context_text, 30, b) for b in args.beams]
        variants.append(("in context, encoder on window + 1 s", in_context, context_text, fit, 5))
        for name, window, prefix, seconds, beam in variants:
            mel = encode_input(window, seconds)
            encoded = model.encode(mel, to_cpu=False)
            ids = tokenizer.encode(" " + prefix.strip()).ids if prefix else []
            prompt = [start_tokens + ids]

            def generate(encoded: Any = encoded, prompt: Any = prompt, beam: int = beam) -> Any:
                return model.generate(encoded, prompt, beam_size=beam, max_length=448)

            def encode(mel: Any = mel) -> Any:
                return model.encode(mel, to_cpu=False)

            encode_ms = _timed(encode, args.repeat)
            generate_ms = _timed(generate, args.repeat)
            new_tokens = len(generate()[0].sequences_ids[0]) - len(ids)
            key = f"{name}, beam {beam}"
            cases.setdefault(key, []).append((encode_ms, generate_ms, len(ids), new_tokens))
    rows = []
    for key, values in cases.items():
        a = np.array(values, dtype=float)
        rows.append(
            {
                "final": key,
                "pairs": len(values),
                "encode_ms": round(float(a[:, 0].mean())),
                "generate_ms": round(float(a[:, 1].mean())),
                "context_tokens": round(float(a[:, 2].mean())),
                "new_tokens": round(float(a[:, 3].mean())),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=7, help="pairs of eval clips")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--beams", default="5,3,2,1", help="beam widths in context")
    parser.add_argument("--no-write", action="store_true", help="leave RESULTS.md alone")
    args = parser.parse_args(argv)
    args.beams = [int(b) for b in args.beams.split(",")]
    rows = run(args)
    print(json.dumps({"machine": machine_info(), "rows": rows}))
    table = markdown_table(rows, list(rows[0]))
    print(table)
    if not args.no_write:
        write_section(
            "final_cost",
            "A final's encode and generate time (ms, mean over the pairs; the model called "
            "directly, each case timed after a warm-up). `alone`: the utterance and 300 ms "
            "of tail on Whisper's 30 s input, as the per-utterance path decodes it; `in "
            "context`: the previous clip, a second of silence and the utterance, the "
            "previous clip's text forced as the prefix.\n\n" + table,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
