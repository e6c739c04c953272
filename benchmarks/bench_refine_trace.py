"""The refinement requests in real time beside the same sets decoded at once (issue 37).

Real time: the refinement log of `bench_accuracy --served --trace` (its JSON, one stream).
At once: the same sets' sessions driven here with each request decoded when asked for
(`bench_accuracy.run_session`), the same loggers at DEBUG. Per pass: how many refinements
were asked for and of how many finals, their windows (length, audio after the final, how far
the stream had got), prompt length, token budget, beam, encoder length, and what became of
them (revised / unchanged / kept by the churn rule).

    python benchmarks/bench_accuracy.py --sets a,b,m --served --trace   # writes the JSON
    python benchmarks/bench_refine_trace.py                            # reads it

Writes benchmarks/bench_refine_trace.json and its RESULTS.md section.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _served  # noqa: E402
from _results import machine_info, markdown_table, write_section  # noqa: E402

SECTION = "bench_refine_trace"


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"DEBUG {record.name}: {record.getMessage()}")


def at_once(set_names: Sequence[str], clips_per_conversation: int) -> list[str]:
    """The refinement log of each set's sessions, every request decoded when asked for."""
    import bench_accuracy as ba
    from kettle.transcribe.model.adapter import WhisperAdapter

    clips = ba.load_eval(ba.eval_dir())
    builders = {
        "a": lambda: ba.set_a(clips, 1, clips_per_conversation),
        "b": lambda: ba.set_b(2),
        "m": ba.set_m,
    }
    handler = _Lines()
    loggers = [logging.getLogger(name) for name in _served.TRACE_LOGGERS]
    for logger in loggers:
        logger.setLevel(logging.DEBUG)
        logger.addHandler(handler)
    decoder = WhisperAdapter()
    for name in set_names:
        for item in builders[name]():
            ba.run_session(decoder, None, item, "refined")
    for logger in loggers:
        logger.removeHandler(handler)
    return handler.lines


def real_time(path: Path, set_names: Sequence[str]) -> list[str]:
    """The one-stream runs' refinement log from bench_accuracy's served JSON."""
    data = json.loads(path.read_text(encoding="utf-8"))
    lines: list[str] = []
    seen: set[str] = set()
    for run in data["trace"]:
        if run["set"] not in set_names or not run["revisions"]:
            continue
        # Runs go stream count by stream count, one stream first (older JSON has no count).
        first = run["set"] not in seen
        seen.add(run["set"])
        if run.get("streams", 1 if first else None) == 1:
            lines += run["lines"]
    return lines


def _seconds(span: str) -> tuple[float, float]:
    start, _, end = span.partition("-")
    return float(start), float(end)


def summarize(lines: Iterable[str]) -> dict[int, dict[str, Any]]:
    """Per pass: the requests' shape and their outcomes."""
    requests: dict[int, list[dict[str, str]]] = {}
    outcomes: dict[int, dict[str, int]] = {}
    for line in lines:
        fields = _served.trace_fields(line)
        if "refine request:" in line:
            requests.setdefault(int(fields["pass"]), []).append(fields)
        elif "refine result:" in line and "pass" in fields:
            counts = outcomes.setdefault(int(fields["pass"]), {})
            counts[fields["outcome"]] = counts.get(fields["outcome"], 0) + 1
    out: dict[int, dict[str, Any]] = {}
    for number, asked in sorted(requests.items()):
        windows = [_seconds(r["window"]) for r in asked]
        targets = [_seconds(r["target"]) for r in asked]
        out[number] = {
            "requests": len(asked),
            "window_s": _mean(e - s for s, e in windows),
            "after_final_s": _mean(w[1] - t[1] for w, t in zip(windows, targets, strict=True)),
            "fed_after_final_s": _mean(
                float(r["fed"]) - t[1] for r, t in zip(asked, targets, strict=True)
            ),
            "prompt_chars": _mean(len(r["prompt"]) - 2 for r in asked),
            "max_tokens": _mean(float(r["max_tokens"]) for r in asked),
            "beam": sorted({r["beam"] for r in asked}),
            "encode_min_s": sorted({r["encode_min_s"] for r in asked}),
            "outcomes": outcomes.get(number, {}),
        }
    return out


def _mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return round(statistics.fmean(values), 2) if values else None


def table(once: dict[int, dict[str, Any]], live: dict[int, dict[str, Any]]) -> str:
    rows = []
    for number in sorted(set(once) | set(live)):
        for label, summary in (("at once", once), ("real time", live)):
            s = summary.get(number)
            if s is None:
                continue
            o = s["outcomes"]
            rows.append(
                {
                    "pass": number,
                    "decoded": label,
                    "requests": s["requests"],
                    "window s": s["window_s"],
                    "after final s": s["after_final_s"],
                    "fed after final s": s["fed_after_final_s"],
                    "prompt chars": s["prompt_chars"],
                    "max tokens": s["max_tokens"],
                    "beam / encode": f"{','.join(s['beam'])} / {','.join(s['encode_min_s'])}",
                    "revised/unchanged/kept": (
                        f"{o.get('revised', 0)}/{o.get('unchanged', 0)}/{o.get('kept', 0)}"
                    ),
                }
            )
    columns = list(rows[0]) if rows else []
    return markdown_table(rows, columns)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--served-json", type=Path, default=HERE / f"{_served.SECTION}.json")
    parser.add_argument("--sets", default="a,b,m")
    parser.add_argument("--clips", type=int, default=10, help="clips per conversation in (a)")
    parser.add_argument("--out", type=Path, default=HERE / f"{SECTION}.json")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    names = args.sets.split(",")
    live = summarize(real_time(args.served_json, names))
    once = summarize(at_once(names, args.clips))
    text = table(once, live)
    print(json.dumps({"at_once": once, "real_time": live}, indent=1))
    print(text)
    args.out.write_text(
        json.dumps({"machine": machine_info(), "at_once": once, "real_time": live}, indent=1),
        encoding="utf-8",
    )
    if not args.no_write:
        write_section(
            SECTION,
            f"Sets {args.sets}, one stream (real time: `bench_accuracy --served --trace`). "
            "Seconds on the stream's clock; `fed after final`: how much audio had followed "
            "the final when the refinement was asked for.\n\n" + text,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
