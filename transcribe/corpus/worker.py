"""The worker side of `kettle transcribe --ray`: one model per Ray actor, files in, rows out.

Ray Data calls ``TranscribeWorker`` with a batch of rows, one per file (its bytes and how to
read them), and gets one row back per file: the transcript as JSON, or the reason it failed.
A failing file never raises: an exception here would make Ray retry the batch, or fail the
whole run. The files of one call go through the local pipeline together, so their windows
share decode batches as they do on one machine. Warnings logged while a file is read (a cut-off
recording) travel back in the row, for the driver to print where the user sees them.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from kettle.transcribe.audio.read import RawFormat, load_audio
from kettle.transcribe.errors import ConfigError, KettleError, ModelError
from kettle.transcribe.files.pipeline import FileJob, FileOutcome, PipelineConfig, transcribe_files
from kettle.transcribe.types import Decoder

# Row columns: what the driver sends, and what comes back.
IN_COLUMNS = ("index", "label", "data", "raw")
OUT_COLUMNS = ("index", "transcript", "error", "fatal", "warnings", "worker")


@dataclass(frozen=True)
class WorkerSpec:
    """What every worker builds: its model (by a picklable factory) and the pipeline options."""

    make_decoder: Callable[[], Decoder]
    config: PipelineConfig


@dataclass(frozen=True)
class Row:
    """One file's result, as the worker returns it (``transcript`` is Transcript JSON)."""

    index: int
    transcript: str = ""
    error: str = ""
    fatal: bool = False  # the model or the options are unusable: every file would fail
    warnings: str = "[]"  # JSON list of [logger, level, message]
    worker: str = ""


class TranscribeWorker:
    """A Ray Data callable class: the model is loaded once, in the constructor."""

    def __init__(self, spec: WorkerSpec) -> None:
        self._config = spec.config
        self._worker = f"{os.getpid()}@{socket.gethostname()}"
        self._decoder: Decoder | None = None
        self._fatal = ""
        started = time.monotonic()
        try:
            self._decoder = spec.make_decoder()
        except KettleError as exc:  # reported once per file, and by the driver as fatal
            self._fatal = str(exc)
        self.load_s = time.monotonic() - started

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, list[Any]]:
        indices = [int(i) for i in batch["index"]]
        rows = self.transcribe(
            indices,
            [str(n) for n in batch["label"]],
            [bytes(d) for d in batch["data"]],
            [str(r) if r else "" for r in batch["raw"]],
        )
        return {col: [getattr(r, col) for r in rows] for col in OUT_COLUMNS}

    def transcribe(
        self,
        indices: Sequence[int],
        labels: Sequence[str],
        data: Sequence[bytes],
        raws: Sequence[str],
    ) -> list[Row]:
        """Transcribe files given as bytes; ``labels`` are what warnings call them."""
        if self._decoder is None:
            return [Row(i, error=self._fatal, fatal=True, worker=self._worker) for i in indices]
        warnings: dict[int, list[list[object]]] = {i: [] for i in indices}
        jobs = [
            FileJob(label, _loader(blob, raw, label, warnings[i]))
            for i, label, blob, raw in zip(indices, labels, data, raws, strict=True)
        ]
        try:
            outcomes = list(transcribe_files(jobs, self._decoder, self._config))
        except (ModelError, ConfigError) as exc:
            return [Row(i, error=str(exc), fatal=True, worker=self._worker) for i in indices]
        except Exception as exc:  # a bug must cost these files, not the worker or the run
            logging.getLogger(__name__).exception("transcribing a batch failed")
            reason = f"worker failed: {type(exc).__name__}: {exc}"
            return [Row(i, error=reason, worker=self._worker) for i in indices]
        return [
            _row(i, outcome, warnings[i], self._worker)
            for i, outcome in zip(indices, outcomes, strict=True)
        ]


def _row(index: int, outcome: FileOutcome, warnings: list[list[object]], worker: str) -> Row:
    transcript = outcome.transcript.to_json(indent=None) if outcome.transcript else ""
    error = "" if outcome.transcript else (outcome.error or "failed")
    return Row(index, transcript, error, warnings=json.dumps(warnings), worker=worker)


def _loader(
    data: bytes, raw: str, label: str, sink: list[list[object]]
) -> Callable[[], np.ndarray]:
    fmt = RawFormat.parse(raw) if raw else None

    def load() -> np.ndarray:
        with _captured_warnings(sink):
            return load_audio(data, fmt, name=label)

    return load


def enable_kettle_loggers() -> None:
    """Switch kettle's module loggers back on.

    Ray's start-up (``ray.init`` on the driver, worker start-up on the workers) may configure
    logging with ``disable_existing_loggers``, which silences every logger created before it:
    a cut-off file's warning would then be lost on either side.
    """
    for name, existing in list(logging.root.manager.loggerDict.items()):
        if name.startswith("kettle") and isinstance(existing, logging.Logger):
            existing.disabled = False


class _Sink(logging.Handler):
    def __init__(self, sink: list[list[object]]) -> None:
        super().__init__(logging.WARNING)
        self._sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        self._sink.append([record.name, record.levelno, record.getMessage()])


@contextmanager
def _captured_warnings(sink: list[list[object]]) -> Iterator[None]:
    root = logging.getLogger("kettle")
    enable_kettle_loggers()
    handler = _Sink(sink)
    level = root.level
    if root.getEffectiveLevel() > logging.WARNING:
        root.setLevel(logging.WARNING)
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
