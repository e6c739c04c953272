"""`kettle simulate FILE...`: play files through the streaming engine as live streams."""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import sys
from pathlib import Path
from typing import Any

from kettle.transcribe.cli.args import non_negative_int, positive_float, positive_int
from kettle.transcribe.errors import ConfigError, KettleError

DEFAULT_MANIFEST = Path(__file__).resolve().parents[1].parent / "shared" / "eval" / "manifest.tsv"


def register_simulate(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "simulate",
        help="push audio files through the streaming engine as live streams",
        description=(
            "Play FILEs through the streaming engine as live streams and print the event "
            "timeline and a latency summary (partial and final lag P50/P95/P99, WER against "
            "the reference, stable-text revisions)."
        ),
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="audio files to play")
    pace = parser.add_mutually_exclusive_group()
    pace.add_argument(
        "--realtime",
        dest="realtime",
        action="store_true",
        default=True,
        help="feed 20 ms chunks on the wall clock (default)",
    )
    pace.add_argument(
        "--fast",
        dest="realtime",
        action="store_false",
        help="feed as fast as the engine takes the audio",
    )
    parser.add_argument(
        "--streams",
        type=positive_int,
        default=1,
        metavar="N",
        help="concurrent streams; stream i plays the files starting at the i-th (default 1)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.add_argument("--quiet", action="store_true", help="print the summary only")
    parser.add_argument("--model", default="tiny.en", metavar="M", help="model (default tiny.en)")
    parser.add_argument("--final-model", default=None, metavar="M", help="model for finals")
    parser.add_argument(
        "--batch-size",
        type=positive_int,
        default=8,
        metavar="N",
        help="max decode batch (default 8)",
    )
    parser.add_argument(
        "--threads", type=non_negative_int, default=0, help="CPU threads for the model"
    )
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument(
        "--reference",
        default=None,
        metavar="TEXT",
        help="reference transcript (one FILE); default: looked up in the eval manifest",
    )
    parser.add_argument(
        "--manifest",
        type=Path,
        default=None,
        metavar="TSV",
        help="manifest with file and reference_text columns (default: the one next to the "
        "files, else ../shared/eval/manifest.tsv)",
    )
    parser.add_argument(
        "--raw",
        default=None,
        metavar="ENC:RATE:CH",
        help="format of headerless .raw/.pcm files (default s16le:16000:1)",
    )
    parser.add_argument("--language", default=None, help="ISO 639-1 code (default: model's)")
    parser.add_argument("--no-partials", action="store_true", help="ask for finals only")
    parser.add_argument("--word-timestamps", action="store_true", help="words in finals")
    parser.add_argument(
        "--partial-interval",
        type=positive_float,
        default=0.5,
        metavar="S",
        help="seconds of new audio between partials (default 0.5)",
    )
    parser.add_argument(
        "--endpoint-ms",
        type=positive_int,
        default=500,
        metavar="MS",
        help="silence that ends an utterance (default 500)",
    )
    parser.add_argument(
        "--fixed-cadence",
        action="store_true",
        help="partials every --partial-interval exactly, as before scheduler v2 (default: "
        "stretched where the measured decode cost would keep the model over 60%% busy)",
    )
    parser.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    from kettle.streaming.cli.simulation import (
        format_event,
        format_summary,
        rotations,
        run_simulation,
    )
    from kettle.streaming.core.session import SessionConfig
    from kettle.streaming.engine.engine import Engine, EngineConfig
    from kettle.streaming.engine.scheduling.scheduler import SchedulerConfig

    if not 1 <= args.streams <= 1024:
        raise ConfigError("--streams must be within 1..1024")
    if args.reference is not None and len(args.files) != 1:
        raise ConfigError("--reference needs exactly one FILE")
    session = SessionConfig(
        language=args.language,
        partials=not args.no_partials,
        word_timestamps=args.word_timestamps,
        partial_interval_s=args.partial_interval,
        endpoint_silence_ms=args.endpoint_ms,
    )
    engine_config = EngineConfig(
        SchedulerConfig(max_batch_size=args.batch_size), adaptive_cadence=not args.fixed_cadence
    )
    clips = load_clips(args.files, args.reference, args.manifest, args.raw)
    decoder, final_decoder = _load_models(args)

    def emit(record: dict[str, Any]) -> None:
        if args.quiet:
            return
        print(json.dumps(record) if args.json else format_event(record), flush=True)

    async def go() -> dict[str, Any]:
        async with Engine(decoder, engine_config, final_decoder=final_decoder) as engine:
            result = await run_simulation(
                engine,
                rotations(clips, args.streams),
                realtime=args.realtime,
                config=session,
                on_event=emit,
            )
        return result.summary

    summary = asyncio.run(go())
    summary["mode"] = "realtime" if args.realtime else "fast"
    summary["model"] = args.model
    summary["final_model"] = args.final_model or args.model
    if args.json:
        print(json.dumps(summary), flush=True)
    else:
        print("\n" + format_summary(summary), flush=True)
    return 0 if summary["stable_revisions"] == 0 and summary["finals_lost"] == 0 else 1


def _load_models(args: argparse.Namespace) -> tuple[Any, Any]:
    from kettle.transcribe.model.adapter import ModelConfig, WhisperAdapter

    decoder = WhisperAdapter(ModelConfig(name=args.model, threads=args.threads, device=args.device))
    final = None
    if args.final_model and args.final_model != args.model:
        final = WhisperAdapter(
            ModelConfig(name=args.final_model, threads=args.threads, device=args.device)
        )
    return decoder, final


def load_clips(
    files: list[str], reference: str | None, manifest: Path | None, raw: str | None
) -> list[Any]:
    """Decode the files (16 kHz mono float32) and attach their reference transcripts."""
    from kettle.streaming.cli.simulation import Clip
    from kettle.transcribe.audio.read import RAW_SUFFIXES, RawFormat, load_audio

    clips = []
    for name in files:
        path = Path(name)
        fmt = (
            RawFormat.parse(raw or "s16le:16000:1") if path.suffix.lower() in RAW_SUFFIXES else None
        )
        try:
            audio = load_audio(path, raw=fmt)
        except KettleError as exc:
            raise KettleError(f"{name}: {exc}") from None
        ref = reference if reference is not None else manifest_reference(path, manifest)
        clips.append(Clip(path.name, audio, ref))
    return clips


def manifest_reference(path: Path, manifest: Path | None = None) -> str | None:
    """The reference_text of ``path`` in a manifest (one next to or above it, or the eval set's)."""
    candidates = (
        [manifest]
        if manifest is not None
        else [
            path.resolve().parent / "manifest.tsv",
            path.resolve().parent.parent / "manifest.tsv",
            DEFAULT_MANIFEST,
        ]
    )
    for tsv in candidates:
        if tsv is None or not tsv.is_file():
            continue
        try:
            with open(tsv, newline="", encoding="utf-8") as fh:
                for row in csv.DictReader(fh, delimiter="\t"):
                    listed = (tsv.parent / row.get("file", "")).resolve()
                    if listed == path.resolve():
                        return row.get("reference_text")
        except (OSError, csv.Error) as exc:
            print(f"kettle: warning: cannot read {tsv}: {exc}", file=sys.stderr)
    return None
