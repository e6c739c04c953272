"""What users of the voice-agent frameworks get: their STT clients, unchanged, against kettle.

Issue 37: a client that cuts speech at every short pause (Pipecat's default Silero VAD stops
after 0.2 s) sends ``Finalize`` or posts each fragment as its own file; the words it gets back
should be the words said, as well read as kettle reads the whole file.

A real ``kettle serve`` (the default model, tiny.en) runs on 127.0.0.1 on a free port. Each
surface of benchmarks/_clients.py (Pipecat 1.14's Deepgram, OpenAI REST and OpenAI Realtime
services after its default ``SileroVADAnalyzer()``; LiveKit Agents 1.8.9's ``deepgram.STT``
stream and ``openai.STT`` behind ``StreamAdapter`` with ``silero.VAD.load()``) streams each
recording in 20 ms frames at real time, one client at a time, and its finals are joined.

Recordings: JFK (tests/data/jfk.flac, pauses inside the sentence) and conversations of real
voices from the eval set (bench_accuracy's set (a) builders: 6 disjoint clips each, 0.6-2 s
gaps), each followed by 2 s of silence so the last turn ends.

Per surface and recording: WER (Whisper's English normalizer, jiwer) against the reference;
the WER of kettle's reading of the whole file (the file pipeline, `kettle transcribe`) and the
difference in points; finals, empty finals, cuts (the ends of speech the client saw: its
VAD's stops, or for livekit_deepgram the server's); repeated-token loops (one token 3+ times
in a row that the reference does not say so); repeated runs (3+ words twice back to back, in
one final or across two adjacent finals, said once in the reference). The JSON keeps each
run's finals and events (seconds from the first frame).

    python benchmarks/bench_clients.py                # all surfaces, JFK and 3 conversations
    python benchmarks/bench_clients.py --quick --surfaces pipecat_deepgram,livekit_openai

Writes benchmarks/bench_clients.json and its RESULTS.md section.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _clients import (
    KEY,
    SURFACES,
    Run,
    Speech,
    conversations,
    drive,
    jfk,
    score,
    spans,
    wer,
    whole_file_text,
)
from _results import eval_dir, machine_info, markdown_table, require_eval_set, write_section
from _serve import kettle_serving

CONVERSATIONS = 3
COLUMNS = [
    "surface", "speech", "wer", "whole_file_wer", "points", "finals", "empty_finals", "cuts",
    "shortest_span_s", "loops", "repeats", "error",
]  # fmt: skip


def load_speech(names: list[str]) -> tuple[list[Speech], str]:
    """The recordings asked for, and the line that says which data was used."""
    out = [jfk()] if "jfk" in names else []
    convs = [n for n in names if n.startswith("conv")]
    data_line = "JFK (tests/data/jfk.flac)"
    if convs:
        path = eval_dir()
        data_line = require_eval_set(path)
        built = {s.name: s for s in conversations(path, CONVERSATIONS)}
        unknown = [n for n in convs if n not in built]
        if unknown:
            sys.exit(f"unknown recordings {unknown}: jfk, conv1..conv{CONVERSATIONS}")
        out += [built[n] for n in convs]
    return out, data_line


def whole_file_readings(speech: list[Speech], model: str) -> dict[str, str]:
    """kettle's reading of each whole file, done before the server starts (2 cores)."""
    from kettle.transcribe.model.adapter import ModelConfig, WhisperAdapter

    decoder = WhisperAdapter(ModelConfig(name=model, threads=2))
    return {s.name: whole_file_text(s.audio, decoder) for s in speech}


async def run_all(base: str, surfaces: list[str], speech: list[Speech]) -> list[Run]:
    """Each surface on each recording, one client at a time, recordings interleaved."""
    runs = []
    for s in speech:
        for surface in surfaces:
            run = await drive(surface, base, s, key=KEY)
            shown = run.error or " | ".join(run.finals)
            print(f"{surface} {s.name} ({run.wall_s:.0f} s): {shown}", file=sys.stderr)
            runs.append(run)
    return runs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--surfaces", default=",".join(SURFACES), help="comma-separated")
    p.add_argument(
        "--audio",
        default="jfk," + ",".join(f"conv{k + 1}" for k in range(CONVERSATIONS)),
        help="comma-separated: jfk, conv1..conv3",
    )
    p.add_argument("--quick", action="store_true", help="JFK only")
    p.add_argument("--model", default="tiny.en", help="the server's model and the whole file's")
    p.add_argument("--no-write", action="store_true", help="do not rewrite RESULTS.md")
    args = p.parse_args(argv)
    surfaces = args.surfaces.split(",")
    unknown = sorted(set(surfaces) - set(SURFACES))
    if unknown:
        p.error(f"unknown surfaces {unknown}; known: {', '.join(SURFACES)}")
    speech, data_line = load_speech(["jfk"] if args.quick else args.audio.split(","))
    whole = whole_file_readings(speech, args.model)
    os.environ["KETTLE_API_KEYS"] = KEY  # (the server reads it; --api-key would show in ps)
    with kettle_serving(["--model", args.model]) as (_, base):
        runs = asyncio.run(run_all(base, surfaces, speech))
    refs = {s.name: s.reference for s in speech}
    rows = [score(r, refs[r.speech], wer(refs[r.speech], whole[r.speech])) for r in runs]
    table = markdown_table(rows, COLUMNS)
    info = machine_info()
    result = {
        "machine": info,
        "data": data_line,
        "rows": rows,
        "whole_file": {s.name: {"reference": s.reference, "text": whole[s.name]} for s in speech},
        "runs": [{**r.__dict__, "spans": spans(r)} for r in runs],
    }
    print(json.dumps({"machine": info, "rows": rows}, indent=2))
    print(table)
    Path(__file__).with_suffix(".json").write_text(json.dumps(result, indent=2))
    if not args.no_write:
        write_section("bench_clients", section_body(data_line, speech, table))
    return 0


def section_body(data_line: str, speech: list[Speech], table: str) -> str:
    seconds = ", ".join(f"{s.name} {s.seconds:.0f} s" for s in speech)
    return (
        f"{data_line}; recordings (with 2 s of silence after): {seconds}.\n\n"
        "The frameworks' STT clients, unchanged but for base URL and key, default VAD,\n"
        "20 ms frames at real time against `kettle serve` (tiny.en, one client at a time).\n"
        "wer: their finals joined; whole_file_wer: `kettle transcribe`'s reading of the whole\n"
        "file; points: the difference. cuts: the ends of speech the client saw (its VAD's\n"
        "stops, each a Finalize, a commit or a posted segment; livekit_deepgram has no VAD:\n"
        "there they are the server's); shortest_span_s: the shortest of those spans, from\n"
        "its start of speech to its end (LiveKit's StreamAdapter reports a start only once\n"
        "the previous segment's transcript is back). loops: one token 3+ times in a row;\n"
        "repeats: 3+ words twice back to back in a final or across adjacent finals; both\n"
        "only where the reference says them once. Finals text: benchmarks/bench_clients.json.\n\n"
        + table
    )


if __name__ == "__main__":
    raise SystemExit(main())
