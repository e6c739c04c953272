"""The encoder with its cache: log-mel features (incremental for a growing stream window) and
one batched encoder pass for the windows the cache does not hold.

It knows nothing of streaming lifecycles: a request's ``stream_key`` only says "this window
may extend the previous one of that key"; the feature state of keys no longer used ages out of
a bounded LRU, or goes at once when the caller says so (``release_stream``, safe from any
thread: applied before the next pass).
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
from kettle.transcribe.model.encoder_cache import EncoderCache, window_key
from kettle.transcribe.model.features import FeatureComputer
from kettle.transcribe.model.job import Job
from kettle.transcribe.model.replicas import Replicas
from kettle.transcribe.types import DecodeKind, encoder_frames


class Encoder:
    def __init__(
        self,
        ct2: Any,
        fw: Any,
        features: FeatureComputer,
        cache: EncoderCache,
        replicas: Replicas | None = None,
    ) -> None:
        self._ct2 = ct2
        self._fw = fw
        self._replicas = replicas or Replicas(1)
        self.features = features
        self.cache = cache
        self._released: set[Hashable] = set()
        self._released_lock = threading.Lock()

    def release_stream(self, key: Hashable) -> None:
        """The caller is done with this stream key: drop its incremental feature state."""
        with self._released_lock:
            self._released.add(key)

    def stack(self, jobs: Sequence[Job]) -> Any:
        """The jobs' encoder outputs as one StorageView (the model's input to generate).

        generate takes one dense tensor and no per-row lengths, so the jobs must share one
        encoder length (``group_by_frames``): a row is never padded to fit its batch-mates."""
        rows = [j.encoded for j in jobs if j.encoded is not None]
        assert len(rows) == len(jobs), "every job is encoded before it is stacked"
        lengths = {r.shape for r in rows}
        if len(lengths) > 1:
            raise ValueError(f"encoder outputs of differing shapes stacked: {sorted(lengths)}")
        return self._fw.storage(np.stack(rows))

    def encode(self, jobs: Sequence[Job]) -> None:
        """Fill ``job.frames`` and ``job.encoded`` from the cache or batched encodes of the
        misses: one encoder pass per input length.

        Each job is encoded on its own length (``encoder_frames`` of its window and
        ``encode_min_s``), never on a batch-mate's, so a request's encoder input, and its
        text, do not depend on what it was batched with."""
        self._apply_releases()
        pending: dict[Any, list[Job]] = {}
        for job in jobs:
            r = job.request
            job.frames = encoder_frames(job.audio.shape[0], r.encode_min_s)
            # A caller's key is paired with the window length, so a reused key can never
            # hand one window's encoding to a different-length window; and with the input
            # length, since one window may be encoded on several.
            key = (
                ("key", r.cache_key, job.audio.shape[0], job.frames)
                if r.cache_key is not None
                else (window_key(job.audio), job.frames)
            )
            if key in pending:  # same window twice in one batch: encoded once
                pending[key].append(job)
                job.cache_hit = True
                self.cache.count_hit()
                continue
            hit = self.cache.get(key)
            if hit is not None:
                job.encoded, job.cache_hit = hit, True
            else:
                pending[key] = [job]
        by_frames: dict[int, list[Any]] = {}
        for key, waiting in pending.items():
            by_frames.setdefault(waiting[0].frames, []).append(key)
        for frames, keys in by_frames.items():
            self._encode_misses(frames, [pending[k] for k in keys], keys)

    def _encode_misses(self, frames: int, groups: list[list[Job]], keys: list[Any]) -> None:
        """One encoder pass over windows of one input length (``groups[i]``: the jobs that
        share window ``keys[i]``)."""
        feats: list[np.ndarray | None] = []
        for waiting in groups:
            first = waiting[0]
            r = first.request
            feat = None
            if r.stream_key is not None and r.kind is DecodeKind.PARTIAL:
                feat = self.features.stream(r.stream_key, first.audio, frames)
            feats.append(feat)
        todo = [i for i, f in enumerate(feats) if f is None]
        if todo:
            computed = self.features.batch([groups[i][0].audio for i in todo], frames)
            for i, row in zip(todo, computed, strict=True):
                feats[i] = row
        encoded = self._replicas.map(self._encode_rows, [f for f in feats if f is not None])
        for key, waiting, row in zip(keys, groups, encoded, strict=True):
            row = np.ascontiguousarray(row)
            self.cache.put(key, row)
            for job in waiting:
                job.encoded = row

    def _encode_rows(self, rows: Sequence[np.ndarray]) -> list[np.ndarray]:
        batch = self._fw.storage(np.stack(rows))
        return list(self._fw.to_numpy(self._ct2.encode(batch, to_cpu=True)))

    def _apply_releases(self) -> None:
        with self._released_lock:
            released, self._released = self._released, set()
        for key in released:
            self.features.forget(key)


def group_by_frames(jobs: Sequence[Job]) -> list[list[Job]]:
    """Encoded jobs split by encoder input length, in order of first appearance: each group
    can be stacked for generate (``Encoder.stack``)."""
    groups: dict[int, list[Job]] = {}
    for job in jobs:
        groups.setdefault(job.frames, []).append(job)
    return list(groups.values())
