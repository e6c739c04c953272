"""`kettle transcribe`'s inputs: the files, folders and stdin named on the command line, and
the one job each becomes, for the local pipeline (`FileJob`) or for Ray (`RemoteJob`).

Both paths see an input the same way (`plan_inputs`): whether ``--raw`` applies to it, its
result-cache key and its expected duration for the progress bar. They differ only in how the
audio is reached: loaded here, or its bytes read here and decoded on a worker.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from kettle.transcribe.audio.read import (
    RAW_SUFFIXES,
    RawFormat,
    is_audio_path,
    load_audio,
    read_input,
)
from kettle.transcribe.corpus.driver import RemoteJob
from kettle.transcribe.files.pipeline import FileJob, PipelineConfig
from kettle.transcribe.files.progress import Progress
from kettle.transcribe.files.result_cache import ResultCache, cache_key, hash_file, hash_stream

STDIN = "-"


@dataclass(frozen=True)
class Input:
    """One thing to transcribe: a file (``path``) or stdin (``data``), and where it writes."""

    name: str
    path: Path | None
    out_stem: Path  # relative output path without the format suffix
    data: bytes | None = None


def collect_inputs(paths: Sequence[str], errors: list[tuple[str, str]]) -> list[Input]:
    """Expand files and folders; problems go to ``errors`` as (name, reason)."""
    inputs: list[Input] = []
    stdin_used = False
    for arg in paths:
        if arg == STDIN:
            if stdin_used:
                errors.append((arg, "stdin can be read only once"))
                continue
            stdin_used = True
            inputs.append(Input("<stdin>", None, Path("stdin"), data=sys.stdin.buffer.read()))
            continue
        path = Path(arg)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and is_audio_path(p))
            if not found:
                errors.append((arg, "no audio files in this folder"))
            for p in found:
                rel = p.relative_to(path)
                inputs.append(Input(str(p), p, rel.with_suffix("")))
        elif path.exists():
            inputs.append(Input(arg, path, Path(path.stem)))
        else:
            errors.append((arg, "no such file or directory"))
    return inputs


@dataclass(frozen=True)
class PlannedInput:
    """One input as both paths see it, before either reads its audio."""

    item: Input
    raw: RawFormat | None  # --raw, where it applies to this input
    cache_key: str | None
    expected_s: float

    def file_job(self) -> FileJob:
        """The local pipeline's job: the audio is loaded in this process."""
        return FileJob(
            name=self.item.name,
            load=_loader(self.item, self.raw),
            cache_key=self.cache_key,
            expected_s=self.expected_s,
        )

    def remote_job(self) -> RemoteJob:
        """Ray's job: the bytes are read here (the workers may not see this file system)."""
        item = self.item
        return RemoteJob(
            name=item.name,
            read=_reader(item, self.raw),
            # What the local path's warnings call it: the file's name, or <input>.
            label=item.path.name if item.path is not None else "<input>",
            raw=self.raw,
            cache_key=self.cache_key,
            expected_s=self.expected_s,
        )


def plan_inputs(
    inputs: Sequence[Input],
    raw: RawFormat | None,
    identity: str,
    config: PipelineConfig,
    cache: ResultCache | None,
    progress: Progress,
) -> list[PlannedInput]:
    """Each input's raw format, cache key (``cache`` given) and expected duration, in order;
    the progress bar is told each one's duration."""
    planned: list[PlannedInput] = []
    for item in inputs:
        item_raw = raw if raw is not None and is_raw(item) else None
        key = None if cache is None else _key(item, item_raw, identity, config)
        planned.append(PlannedInput(item, item_raw, key, _expected_seconds(item, item_raw)))
        progress.expect(item.name, planned[-1].expected_s)
    return planned


def is_raw(item: Input) -> bool:
    """Whether ``--raw`` applies: stdin, .raw/.pcm files and files without an extension."""
    return item.path is None or item.path.suffix.lower() in RAW_SUFFIXES or not item.path.suffix


def _expected_seconds(item: Input, raw: RawFormat | None) -> float:
    """A cheap duration estimate from the file header, for the progress bar only."""
    try:
        if item.path is None:
            return 0.0
        if raw is not None:
            return item.path.stat().st_size / raw.frame_bytes / raw.sample_rate
        import soundfile as sf

        return float(sf.info(str(item.path)).duration)
    except Exception:
        return 0.0


def _key(item: Input, raw: RawFormat | None, identity: str, config: PipelineConfig) -> str | None:
    try:
        if item.data is not None:
            digest = hash_stream(io.BytesIO(item.data))
        else:
            assert item.path is not None
            digest = hash_file(item.path)
    except OSError:
        return None  # unreadable: loading will report it
    return cache_key(digest, identity, {**config.cache_options(), "raw": str(raw)})


def _reader(item: Input, raw: RawFormat | None) -> Callable[[], bytes]:
    def read() -> bytes:
        if item.data is not None:
            return item.data
        assert item.path is not None
        return read_input(item.path, raw)

    return read


def _loader(item: Input, raw: RawFormat | None) -> Callable[[], np.ndarray]:
    def load() -> np.ndarray:
        if item.data is not None:
            return load_audio(item.data, raw)
        assert item.path is not None
        return load_audio(item.path, raw)

    return load
