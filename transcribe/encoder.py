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
from kettle.transcribe.encoder_cache import EncoderCache, window_key
from kettle.transcribe.features import FeatureComputer
from kettle.transcribe.job import Job
from kettle.transcribe.types import FULL_ENCODER_FRAMES, DecodeKind, encoder_frames


class Encoder:
    def __init__(self, ct2: Any, fw: Any, features: FeatureComputer, cache: EncoderCache) -> None:
        self._ct2 = ct2
        self._fw = fw
        self.features = features
        self.cache = cache
        self._released: set[Hashable] = set()
        self._released_lock = threading.Lock()

    def release_stream(self, key: Hashable) -> None:
        """The caller is done with this stream key: drop its incremental feature state."""
        with self._released_lock:
            self._released.add(key)

    def stack(self, jobs: Sequence[Job]) -> Any:
        """The jobs' encoder outputs as one StorageView (the model's input to generate)."""
        rows = [j.encoded for j in jobs]
        assert all(r is not None for r in rows)
        return self._fw.storage(np.stack(rows))

    def encode(self, jobs: Sequence[Job]) -> None:
        """Fill ``job.encoded`` from the cache or one batched encode of the misses.

        Every job of a batch gets the same input length (their outputs are stacked for
        generate): the longest any of them asks for (``encoder_frames``)."""
        self._apply_releases()
        frames = max(
            (encoder_frames(j.audio.shape[0], j.request.encode_min_s) for j in jobs),
            default=FULL_ENCODER_FRAMES,
        )
        pending: dict[Any, list[Job]] = {}
        for job in jobs:
            r = job.request
            # A caller's key is paired with the window length, so a reused key can never
            # hand one window's encoding to a different-length window; and with the input
            # length, since one window may be encoded on several.
            key = (
                ("key", r.cache_key, job.audio.shape[0], frames)
                if r.cache_key is not None
                else (window_key(job.audio), frames)
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
        if not pending:
            return
        keys = list(pending)
        feats: list[np.ndarray | None] = []
        for key in keys:
            first = pending[key][0]
            r = first.request
            feat = None
            if r.stream_key is not None and r.kind is DecodeKind.PARTIAL:
                feat = self.features.stream(r.stream_key, first.audio, frames)
            feats.append(feat)
        todo = [i for i, f in enumerate(feats) if f is None]
        if todo:
            computed = self.features.batch([pending[keys[i]][0].audio for i in todo], frames)
            for i, row in zip(todo, computed, strict=True):
                feats[i] = row
        batch = np.stack([f for f in feats if f is not None])
        encoded = self._fw.to_numpy(self._ct2.encode(self._fw.storage(batch), to_cpu=True))
        for key, row in zip(keys, encoded, strict=True):
            row = np.ascontiguousarray(row)
            self.cache.put(key, row)
            for job in pending[key]:
                job.encoded = row

    def _apply_releases(self) -> None:
        with self._released_lock:
            released, self._released = self._released, set()
        for key in released:
            self.features.forget(key)
