"""The driver side of `kettle transcribe --ray`: files become rows of a Ray Dataset, a pool of
actors with one model each transcribes them, and outcomes come back in input order.

Files the result cache holds are never submitted. Every other file is read once here: checked
as the local path checks it, and put into Ray's object store as a one-row block, so workers
need no shared filesystem and the driver never holds more than one file in memory. A file a
worker cannot transcribe comes back as an error row; only an unusable model (every file would
fail) or a lost worker stops the run. The driver writes what comes back through the same cache
as the local path, so a run that stops resumes where it left off.

Workers are not restarted when they die (``max_restarts=0``): Ray's default, endless restarts
with endless retries, would loop forever on a file that crashes the decoder.
"""

from __future__ import annotations

import json
import logging
import math
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from kettle.transcribe.audio.read import RawFormat
from kettle.transcribe.corpus.worker import TranscribeWorker, WorkerSpec, enable_kettle_loggers
from kettle.transcribe.errors import ConfigError, KettleError, ModelError
from kettle.transcribe.files.pipeline import FileOutcome
from kettle.transcribe.files.progress import Progress
from kettle.transcribe.files.result_cache import ResultCache
from kettle.transcribe.transcript import Transcript

log = logging.getLogger(__name__)

AUTO = "auto"


@dataclass(frozen=True)
class RayOptions:
    """Where the cluster is and how the actor pool is shaped.

    ``address`` "auto" joins the cluster this machine belongs to (``RAY_ADDRESS`` or one started
    with ``ray start``) and otherwise starts a local one; anything else is a cluster address
    (``HOST:6379`` or ``ray://HOST:10001``). ``workers`` None: as many as the cluster's CPUs
    (or GPUs, with ``gpus_per_worker``) allow.
    """

    address: str = AUTO
    workers: int | None = None
    gpus_per_worker: float = 0.0
    cpus_per_worker: float = 1.0
    rows_per_call: int | None = None  # files per worker call; None: picked for balance
    start_timeout_s: int = 600  # waiting for the pool's actors (and their models)

    def __post_init__(self) -> None:
        if self.workers is not None and self.workers < 1:
            raise ConfigError(f"--workers must be at least 1, got {self.workers}")
        if self.gpus_per_worker < 0 or not math.isfinite(self.gpus_per_worker):
            raise ConfigError(f"--gpus-per-worker must not be negative: {self.gpus_per_worker}")
        if self.cpus_per_worker <= 0:
            raise ConfigError(f"CPUs per worker must be positive: {self.cpus_per_worker}")


@dataclass(frozen=True)
class RemoteJob:
    """One input for the cluster: how to read its bytes here, and its cache key (if any)."""

    name: str  # what error lines call it
    read: Callable[[], bytes]  # raises AudioError with the local path's reasons
    label: str  # what warnings call it (the local path's name for it)
    raw: RawFormat | None = None
    cache_key: str | None = None
    expected_s: float = 0.0


def connect(address: str, *, verbose: bool = False) -> bool:
    """Join (or start) the cluster; True when this call did it and should ``ray.shutdown()``.

    A cluster already initialised in this process (a test's, an application's) is used as is.
    """
    import ray

    if ray.is_initialized():
        return False
    try:
        ray.init(
            address=None if address == AUTO else address,
            include_dashboard=False,
            log_to_driver=verbose,
            logging_level=logging.INFO if verbose else logging.ERROR,
        )
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise ConfigError(f"cannot join the Ray cluster at {address}: {_first_line(exc)}") from None
    return True


def default_workers(options: RayOptions) -> int:
    """As many workers as the cluster's free resources hold (at least one)."""
    import ray

    resources = ray.available_resources() or ray.cluster_resources()
    return max(1, fitting_workers(resources, options))


def fitting_workers(resources: dict[str, float], options: RayOptions) -> int:
    """How many workers of ``options``' shape these resources hold."""
    fits = int(resources.get("CPU", 0.0) // options.cpus_per_worker)
    if options.gpus_per_worker > 0:
        fits = min(fits, int(resources.get("GPU", 0.0) // options.gpus_per_worker))
    return fits


def check_fits(workers: int, options: RayOptions) -> None:
    """A pool the cluster cannot hold would wait for its actors until the start timeout:
    say so at once instead."""
    import ray

    total = ray.cluster_resources()
    if fitting_workers(total, options) >= workers:
        return
    gpus = f" and {options.gpus_per_worker:g} GPU" if options.gpus_per_worker else ""
    raise ConfigError(
        f"the Ray cluster has {total.get('CPU', 0):g} CPUs and {total.get('GPU', 0):g} GPUs: "
        f"{workers} worker(s) of {options.cpus_per_worker:g} CPU{gpus} each do not fit "
        "(lower --workers or --gpus-per-worker, or add nodes)"
    )


def transcribe_on_ray(
    jobs: Iterable[RemoteJob],
    spec: WorkerSpec,
    options: RayOptions,
    *,
    cache: ResultCache | None = None,
    progress: Progress | None = None,
) -> Iterator[FileOutcome]:
    """Transcribe on a Ray cluster (``connect`` first); one outcome per job, in input order."""
    jobs = list(jobs)
    outcomes: list[FileOutcome | None] = [None] * len(jobs)
    refs: list[Any] = []
    for index, job in enumerate(jobs):
        outcome = _cached(job, cache, progress)
        if outcome is None:
            try:
                refs.append(_put(index, job))
            except KettleError as exc:
                outcome = FileOutcome(job.name, None, error=str(exc))
                _done(progress, job.name, 0.0)
        outcomes[index] = outcome
    emitted = 0

    def ready() -> Iterator[FileOutcome]:
        nonlocal emitted
        while emitted < len(outcomes) and outcomes[emitted] is not None:
            out = outcomes[emitted]
            assert out is not None
            emitted += 1
            yield out

    yield from ready()
    if refs:
        for row in _run(refs, spec, options):
            index = int(row["index"])
            outcomes[index] = _outcome(jobs[index], row, cache, progress)
            yield from ready()
    assert emitted == len(jobs), "every submitted file comes back once"


def _cached(
    job: RemoteJob, cache: ResultCache | None, progress: Progress | None
) -> FileOutcome | None:
    if cache is None or job.cache_key is None:
        return None
    hit = cache.get(job.cache_key)
    if hit is None:
        return None
    if progress is not None:
        progress.loaded(job.name, hit.duration_s)
        progress.advance(hit.duration_s)
        progress.file_done()
    return FileOutcome(job.name, hit, cached=True)


def _put(index: int, job: RemoteJob) -> Any:
    """Read the file and put it into the object store as a one-row block."""
    import pyarrow as pa
    import ray

    data = job.read()
    table = pa.table(
        {
            "index": pa.array([index], pa.int64()),
            "label": pa.array([job.label], pa.string()),
            "data": pa.array([data], pa.large_binary()),  # files over 2 GiB too
            "raw": pa.array([str(job.raw) if job.raw else ""], pa.string()),
        }
    )
    return ray.put(table)


def _run(refs: list[Any], spec: WorkerSpec, options: RayOptions) -> Iterator[dict[str, Any]]:
    """Run the actor pool over the submitted files; rows come back as they finish."""
    import ray
    import ray.data

    _quiet_ray_data()
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False  # the CLI draws its own
    # Start every worker (and load its model) before the first file is handed out, so the
    # files spread over all of them and a cluster short of resources fails with a reason.
    context.wait_for_min_actors_s = options.start_timeout_s
    workers = min(options.workers or default_workers(options), len(refs))
    check_fits(workers, options)
    per_call = options.rows_per_call or _rows_per_call(len(refs), workers, spec)
    with warnings.catch_warnings():
        # max_restarts has no named parameter yet; Ray warns that the catch-all keyword
        # arguments go away in 2.64 (the extra pins ray below that).
        warnings.simplefilter("ignore", DeprecationWarning)
        dataset = ray.data.from_arrow_refs(refs).map_batches(
            TranscribeWorker,
            fn_constructor_kwargs={"spec": spec},
            batch_size=per_call,
            batch_format="numpy",
            # Two calls in flight per worker: the next one's rows arrive while one decodes.
            compute=ray.data.ActorPoolStrategy(size=workers, max_tasks_in_flight_per_actor=2),
            num_cpus=options.cpus_per_worker,
            num_gpus=options.gpus_per_worker or None,
            max_restarts=0,
        )
    try:
        for row in dataset.iter_rows():
            if row["fatal"]:
                raise ModelError(str(row["error"]))
            yield row
    except ray.exceptions.RayError as exc:
        raise KettleError(f"ray: {_first_line(exc)}") from None


def _rows_per_call(files: int, workers: int, spec: WorkerSpec) -> int:
    """Several files per call let their windows share decode batches; at least two calls per
    worker keep the load even when file lengths differ."""
    return max(1, min(spec.config.batch_size, files // (2 * workers)))


def _outcome(
    job: RemoteJob, row: dict[str, Any], cache: ResultCache | None, progress: Progress | None
) -> FileOutcome:
    enable_kettle_loggers()  # the driver's may have been silenced by ray.init
    for name, level, message in json.loads(str(row["warnings"])):
        logging.getLogger(str(name)).log(int(level), "%s", message)
    if not row["transcript"]:
        _done(progress, job.name, 0.0)
        return FileOutcome(
            job.name, None, error=str(row["error"]) or "failed", worker=str(row["worker"])
        )
    transcript = Transcript.from_json(str(row["transcript"]))
    if cache is not None and job.cache_key is not None:
        cache.put(job.cache_key, transcript)
    if progress is not None:
        progress.loaded(job.name, transcript.duration_s)
        progress.advance(transcript.duration_s)
    _done(progress, job.name, None)
    return FileOutcome(job.name, transcript, worker=str(row["worker"]))


def _done(progress: Progress | None, name: str, loaded_s: float | None) -> None:
    if progress is None:
        return
    if loaded_s is not None:
        progress.loaded(name, loaded_s)
    progress.file_done()


def _quiet_ray_data() -> None:
    """Ray Data logs every run's plan to the console; keep those lines in its log file
    (unless kettle runs with -v)."""
    level = logging.INFO if log.isEnabledFor(logging.INFO) else logging.ERROR
    for handler in logging.getLogger("ray.data").handlers:
        if isinstance(handler, logging.StreamHandler) and not isinstance(
            handler, logging.FileHandler
        ):
            handler.setLevel(level)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
