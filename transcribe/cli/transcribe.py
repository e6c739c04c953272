"""`kettle transcribe`: transcribe files and folders offline.

Without ``-o`` (or with ``-o -``) the transcript goes to stdout; with ``-o DIR`` each input
gets ``DIR/<name>.<format>`` files. A bad input gets one ``kettle: error: FILE: reason`` line
on stderr and the rest still finish; the exit status is 1 when any input failed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import json
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from kettle.transcribe.audio.read import RawFormat
from kettle.transcribe.cli.args import (
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    speaker_count,
)
from kettle.transcribe.cli.inputs import (
    STDIN,
    Input,
    PlannedInput,
    collect_inputs,
    plan_inputs,
)
from kettle.transcribe.corpus.driver import RayOptions, connect
from kettle.transcribe.errors import ConfigError
from kettle.transcribe.files.pipeline import FileOutcome, PipelineConfig, transcribe_files
from kettle.transcribe.files.progress import Progress
from kettle.transcribe.files.result_cache import ResultCache
from kettle.transcribe.files.windows import WindowConfig
from kettle.transcribe.files.writers import FORMATS, parse_formats, render, write_outputs
from kettle.transcribe.model import defaults
from kettle.transcribe.speakers import encoder as speaker_encoder
from kettle.transcribe.speakers.clusters import DEFAULT_MAX_SPEAKERS
from kettle.transcribe.speakers.encoder import SpeakerEncoder
from kettle.transcribe.transcript import Transcript
from kettle.transcribe.types import Decoder, DecodeRequest, DecodeResult

if TYPE_CHECKING:
    from kettle.transcribe.model.adapter import ModelConfig

log = logging.getLogger(__name__)

DEFAULT_MODEL = "tiny.en"
# Replicas when --threads is 0: one per core, up to a batch's 8 rows (they share the weights).
MAX_FILE_REPLICAS = 8

EPILOG = """\
output:
  Without -o, or with -o -, transcripts are printed to stdout (one format only; with several
  inputs each is headed by '==> NAME <==', and json becomes one JSON object per line).
  With -o DIR, each input FILE gets DIR/<stem>.<format> for every format; files found inside
  a folder argument keep their path relative to that folder. Existing files are replaced
  atomically; a failed input writes nothing.

inputs:
  Audio files (wav, flac, mp3, ogg/opus, m4a, ... anything libsndfile or PyAV decodes),
  folders (searched recursively for audio file extensions), or - for audio on stdin.
  Headerless PCM needs --raw ENCODING:RATE:CHANNELS (ENCODING one of s16le, f32le, mulaw, alaw);
  it applies to .raw/.pcm files, files without an extension, and stdin (which is otherwise
  read as a container: wav, flac, ...).

timestamps and cache:
  For srt, vtt and json, words are aligned, so cues are split at sentence ends and kept under
  about 7 s (kettle also uses the words to find speech the model skipped and decode it again;
  plain txt aligns only windows whose text is short for their speech);
  --word-timestamps also puts the words into json output. Results are cached
  (KETTLE_CACHE_DIR, default ~/.cache/kettle/results.sqlite) by audio content, model and
  options, so a second run over the same audio is instant; --no-cache skips the cache.
  The cache keeps at most --cache-max-mb (KETTLE_CACHE_MAX_MB, default 256) MB of results and
  evicts the least recently used first.

speakers:
  --diarize labels each segment's speaker (needs the speaker model: pip install
  'kettle[diarize]' && pip install --no-deps resemblyzer==0.1.4): '[Speaker 1] ...' lines in
  txt, cues starting '[Speaker 1] ' in srt, '<v Speaker 1>' in vtt, and a 0-based "speaker"
  per segment in json. --max-speakers N (1..16) caps how many it may find.

exit status: 0 all inputs transcribed, 1 some input failed, 2 usage or model error.
"""


def register_transcribe(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "transcribe",
        help="transcribe audio files and folders",
        description="Transcribe audio files and folders with batched int8 Whisper.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="audio file, folder, or -")
    parser.add_argument(
        "-o", "--output-dir", metavar="DIR", default=None, help="write files here (- = stdout)"
    )
    parser.add_argument(
        "-f",
        "--format",
        default="txt",
        metavar="FMT[,FMT]",
        help=f"output formats, comma-separated: {', '.join(FORMATS)} (default: txt)",
    )
    parser.add_argument("--model", default=DEFAULT_MODEL, help="model name or folder (tiny.en)")
    parser.add_argument("--language", default=None, help="language code (multilingual models)")
    parser.add_argument(
        "--beam-size",
        type=positive_int,
        default=defaults.BEAM_SIZE,
        metavar="N",
        help=f"({defaults.BEAM_SIZE})",
    )
    parser.add_argument(
        "--word-timestamps", action="store_true", help="include word timings in json output"
    )
    parser.add_argument(
        "--batch-size", type=positive_int, default=8, metavar="N", help="windows per batch (8)"
    )
    parser.add_argument(
        "--threads",
        type=non_negative_int,
        default=0,
        metavar="N",
        help="CPU threads, one single-threaded model replica each (0: every core)",
    )
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help="(auto)")
    parser.add_argument(
        "--raw", default=None, metavar="ENC:RATE:CH", help="layout of headerless PCM input"
    )
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    parser.add_argument(
        "--cache-max-mb",
        type=positive_float,
        default=None,
        metavar="MB",
        help="cap the result cache; least recently used results go first "
        "(default: KETTLE_CACHE_MAX_MB or 256)",
    )
    parser.add_argument(
        "--fast",
        action="store_true",
        help="pack 30 s windows and skip re-decoding speech the model skipped: about 1.2x "
        "faster, far less accurate (see benchmarks/RESULTS.md, bench_files)",
    )
    parser.add_argument(
        "--diarize",
        action="store_true",
        help="label who speaks: [Speaker N] in txt/srt, <v Speaker N> in vtt, a 0-based "
        f"speaker per json segment (needs {speaker_encoder.INSTALL_HINT})",
    )
    parser.add_argument(
        "--max-speakers",
        type=speaker_count,
        default=DEFAULT_MAX_SPEAKERS,
        metavar="N",
        help=f"with --diarize: at most N speakers, 1..16 (default {DEFAULT_MAX_SPEAKERS})",
    )
    cluster = parser.add_argument_group("cluster (pip install 'kettle[ray]')")
    cluster.add_argument(
        "--ray",
        default=None,
        metavar="auto|ADDRESS",
        help="transcribe on a Ray cluster: 'auto' joins this machine's cluster or starts a "
        "local one; else HOST:PORT or ray://HOST:PORT",
    )
    cluster.add_argument(
        "--workers",
        type=positive_int,
        default=None,
        metavar="N",
        help="Ray workers, one model each (default: as many as the cluster's CPUs or GPUs hold)",
    )
    cluster.add_argument(
        "--gpus-per-worker",
        type=non_negative_float,
        default=0.0,
        metavar="G",
        help="GPUs per Ray worker, fractions allowed (default 0: CPU workers)",
    )
    parser.set_defaults(func=run)


# --fast: faster-whisper's batched pipeline's accuracy, a little faster than the default.
FAST_OPTIONS: dict[str, Any] = {"windows": WindowConfig(max_window_s=30.0), "recover_depth": 0}


def file_model_config(name: str, threads: int, device: str, beam_size: int) -> ModelConfig:
    """How ``kettle transcribe`` loads a model: one single-threaded replica per thread asked
    for (per core for 0), each decoding a part of every batch (replicas.py;
    benchmarks/RESULTS.md, bench_cli)."""
    from kettle.transcribe.model.adapter import ModelConfig

    replicas = threads or min(os.cpu_count() or 1, MAX_FILE_REPLICAS)
    return ModelConfig(name=name, device=device, threads=1, replicas=replicas, beam_size=beam_size)


def load_decoder(name: str, threads: int, device: str, beam_size: int) -> Decoder:
    """The Whisper adapter for ``kettle transcribe``'s options (module level: Ray pickles it)."""
    from kettle.transcribe.model.adapter import WhisperAdapter

    return WhisperAdapter(file_model_config(name, threads, device, beam_size))


class _LazyDecoder:
    """Loads the model on the first decode, so fully cached runs never load it; ``preload``
    starts loading it on a thread of its own, while the first file's audio is read and cut
    (its VAD runs on one core: the model's load, about 0.2 s, then costs no wall time)."""

    def __init__(self, name: str, threads: int, device: str, beam_size: int) -> None:
        self._name = name
        self._threads = threads
        self._device = device
        self._beam_size = beam_size
        self._real: Decoder | None = None
        self._loading: concurrent.futures.Future[Decoder] | None = None

    def preload(self) -> None:
        if self._real is None and self._loading is None:
            pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="kettle-load")
            self._loading = pool.submit(self._new)
            pool.shutdown(wait=False)

    def _new(self) -> Decoder:
        return load_decoder(self._name, self._threads, self._device, self._beam_size)

    def _load(self) -> Decoder:
        if self._real is None:
            # A failed preload raises here, where a load on the first decode would have.
            self._real = self._loading.result() if self._loading is not None else self._new()
        return self._real

    @property
    def name(self) -> str:
        return self._real.name if self._real is not None else self._name

    @property
    def multilingual(self) -> bool:
        return self._load().multilingual

    def decode_batch(self, requests: Sequence[DecodeRequest]) -> list[DecodeResult]:
        return self._load().decode_batch(requests)


def load_speaker_encoder() -> SpeakerEncoder:
    """The GE2E speaker model for --diarize; a ConfigError (not a traceback) when missing."""
    if not speaker_encoder.available():
        raise ConfigError(f"--diarize needs the speaker model: {speaker_encoder.INSTALL_HINT}")
    return speaker_encoder.shared_encoder()


def model_identity(name: str) -> str:
    """Model name plus where its weights are and their size/mtime (for the result cache).

    Raises ModelError for an unknown or missing model before any work starts.
    """
    from kettle.transcribe.model.models import resolve_model

    folder = resolve_model(name)
    weights = folder / "model.bin"
    try:
        stat = weights.stat()
        return f"{name}|{folder}|{stat.st_size}|{int(stat.st_mtime)}"
    except OSError:
        return f"{name}|{folder}"


def run(args: argparse.Namespace) -> int:
    formats = parse_formats(args.format)
    raw = RawFormat.parse(args.raw) if args.raw else None
    to_stdout = args.output_dir in (None, STDIN)
    if to_stdout and len(formats) > 1:
        raise ConfigError("several formats need -o DIR (stdout takes one format)")
    model = args.model
    config = PipelineConfig(
        batch_size=args.batch_size,
        beam_size=args.beam_size,
        language=args.language,
        word_timestamps=args.word_timestamps,
        # Timed cues (srt, vtt, json segments) are cut at words: every window is aligned.
        recover_align_all=formats != ("txt",),
        diarize=args.diarize,
        max_speakers=args.max_speakers,
        **(FAST_OPTIONS if args.fast else {}),
    )
    identity = model_identity(model)  # fails fast on an unknown model or a missing extra
    ray_options = _ray_options(args)
    if args.diarize and ray_options is not None:
        raise ConfigError("--diarize does not run on --ray yet; leave out one of them")
    speakers = load_speaker_encoder() if args.diarize else None

    errors: list[tuple[str, str]] = []
    inputs = collect_inputs(args.paths, errors)
    for name, reason in errors:
        _report(name, reason)
    out_dir = None if to_stdout else Path(args.output_dir)
    if out_dir is not None:
        _check_collisions(inputs, out_dir, formats)

    cache = None if args.no_cache else _open_cache(args.cache_max_mb)
    progress = Progress()
    by_name = {item.name: item for item in inputs}
    failed = len(errors)
    printed = 0
    started_ray = False
    try:
        if ray_options is not None:
            started_ray = connect(ray_options.address, verbose=args.verbose > 0)
        # Both paths see each input the same way; they differ in where its audio is decoded.
        planned = plan_inputs(inputs, raw, identity, config, cache, progress)
        if ray_options is None:
            outcomes = _local_outcomes(planned, args, config, cache, progress, speakers)
        else:
            outcomes = _ray_outcomes(planned, args, config, cache, progress, ray_options)
        for outcome in outcomes:
            if outcome.transcript is None:
                progress.clear()
                _report(outcome.name, outcome.error or "failed")
                failed += 1
                continue
            item = by_name[outcome.name]
            try:
                if out_dir is None:
                    _print(outcome, formats[0], len(inputs) > 1, printed == 0, sys.stdout)
                    printed += 1
                else:
                    write_outputs(outcome.transcript, out_dir / item.out_stem, formats)
            except OSError as exc:
                progress.clear()
                _report(outcome.name, f"cannot write output: {exc.strerror or exc}")
                failed += 1
    finally:
        progress.close()
        if cache is not None:
            cache.close()
        if started_ray:
            import ray

            ray.shutdown()
    return 1 if failed else 0


def _local_outcomes(
    planned: Sequence[PlannedInput],
    args: argparse.Namespace,
    config: PipelineConfig,
    cache: ResultCache | None,
    progress: Progress,
    speakers: SpeakerEncoder | None,
) -> Iterator[FileOutcome]:
    jobs = [p.file_job() for p in planned]
    decoder = _LazyDecoder(args.model, args.threads, args.device, args.beam_size)
    if cache is None or not all(p.cache_key and cache.contains(p.cache_key) for p in planned):
        decoder.preload()  # something will be decoded: load the model while audio is cut
    return transcribe_files(
        jobs, decoder, config, cache=cache, progress=progress, speakers=speakers
    )


def _ray_options(args: argparse.Namespace) -> RayOptions | None:
    if args.ray is None:
        if args.workers is not None or args.gpus_per_worker:
            raise ConfigError("--workers and --gpus-per-worker need --ray")
        return None
    try:
        import ray  # noqa: F401
    except ImportError:
        raise ConfigError("--ray needs Ray: pip install 'kettle[ray]'") from None
    return RayOptions(
        address=args.ray,
        workers=args.workers,
        gpus_per_worker=args.gpus_per_worker,
        # One model thread per reserved CPU, so workers on one node do not fight for cores.
        cpus_per_worker=1.0 if args.gpus_per_worker else float(max(1, args.threads)),
    )


def _ray_outcomes(
    planned: Sequence[PlannedInput],
    args: argparse.Namespace,
    config: PipelineConfig,
    cache: ResultCache | None,
    progress: Progress,
    options: RayOptions,
) -> Iterator[FileOutcome]:
    from kettle.transcribe.corpus.driver import transcribe_on_ray
    from kettle.transcribe.corpus.worker import WorkerSpec

    jobs = [p.remote_job() for p in planned]
    threads = int(options.cpus_per_worker) if not options.gpus_per_worker else args.threads
    device = "cuda" if options.gpus_per_worker else args.device
    model = args.model
    spec = WorkerSpec(
        make_decoder=functools.partial(load_decoder, model, threads, device, args.beam_size),
        config=config,
    )
    return transcribe_on_ray(jobs, spec, options, cache=cache, progress=progress)


def _open_cache(max_mb: float | None) -> ResultCache:
    try:
        return ResultCache(max_bytes=None if max_mb is None else max(1, int(max_mb * (1 << 20))))
    except ValueError as exc:  # a bad KETTLE_CACHE_MAX_MB
        raise ConfigError(str(exc)) from None


def _check_collisions(inputs: Sequence[Input], out_dir: Path, formats: Sequence[str]) -> None:
    seen: dict[Path, str] = {}
    for item in inputs:
        target = out_dir / item.out_stem
        if target in seen:
            raise ConfigError(
                f"{seen[target]} and {item.name} would both write "
                f"{target}.{formats[0]}; transcribe them into different -o folders"
            )
        seen[target] = item.name


def _print(outcome: FileOutcome, fmt: str, several: bool, first: bool, out: TextIO) -> None:
    transcript: Transcript | None = outcome.transcript
    assert transcript is not None
    if fmt == "json" and several:
        out.write(json.dumps({"file": outcome.name, **transcript.to_dict()}, ensure_ascii=False))
        out.write("\n")
    else:
        if several:
            out.write(("" if first else "\n") + f"==> {outcome.name} <==\n")
        out.write(render(transcript, fmt))
    out.flush()


def _report(name: str, reason: str) -> None:
    print(f"kettle: error: {name}: {reason}", file=sys.stderr, flush=True)
