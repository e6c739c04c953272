"""Who spoke: online clustering of speaker embeddings (pure numpy, no model).

Each utterance's embedding (a unit vector, speaker_encoder.py) goes to the known speaker whose
centroid is nearest by cosine similarity, if that similarity reaches ``threshold``; otherwise
it opens a new speaker, up to ``max_speakers``. Speakers are numbered 0, 1, 2, ... in the order
they are first heard. Centroids are duration-weighted means, so a long utterance counts more
than a cough. An utterance too short to trust (``min_new_s``) never opens a speaker and never
moves a centroid: it only takes the nearest label.

``label_offline`` does the same over a whole file, then reassigns every segment to the nearest
final centroid once (files can look ahead; live streams cannot).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

# Measured with benchmarks/bench_diarize.py (see RESULTS.md, bench_diarize): GE2E similarity
# of one speaker's utterances lies mostly above 0.75, of two speakers' mostly below 0.70.
DEFAULT_THRESHOLD = 0.72
DEFAULT_MAX_SPEAKERS = 16
MIN_NEW_SPEAKER_S = 1.0


@dataclass(frozen=True)
class SpeakerLabel:
    speaker: int
    confidence: float  # 0..1: how clearly the utterance belongs to this speaker


@dataclass
class SpeakerClusters:
    threshold: float = DEFAULT_THRESHOLD
    max_speakers: int = DEFAULT_MAX_SPEAKERS
    min_new_s: float = MIN_NEW_SPEAKER_S
    _sums: list[np.ndarray] = field(default_factory=list)
    _last: int = 0  # the speaker of the latest utterance

    @property
    def count(self) -> int:
        return len(self._sums)

    def centroids(self) -> np.ndarray:
        if not self._sums:
            return np.zeros((0, 0), np.float32)
        sums = np.stack(self._sums)
        return sums / np.linalg.norm(sums, axis=1, keepdims=True).clip(1e-12)

    def assign(self, embedding: np.ndarray | None, seconds: float) -> SpeakerLabel:
        """The label of one utterance; ``embedding`` None (it could not be computed) takes
        the last speaker heard, with confidence 0."""
        if embedding is None:
            return SpeakerLabel(self._last if self._sums else self._open(None, 0.0), 0.0)
        if not self._sums:
            return SpeakerLabel(self._open(embedding, seconds), 1.0)
        sims = self.centroids() @ embedding
        best = int(np.argmax(sims))
        trusted = seconds >= self.min_new_s
        if sims[best] < self.threshold and trusted and self.count < self.max_speakers:
            return SpeakerLabel(self._open(embedding, seconds), _new_confidence(sims, self))
        if trusted:
            self._sums[best] = self._sums[best] + embedding * seconds
        self._last = best
        return SpeakerLabel(best, _confidence(sims, best, self.threshold))

    def nearest(self, embedding: np.ndarray) -> SpeakerLabel | None:
        """The known speaker nearest ``embedding`` now (no update); None before any."""
        if not self._sums:
            return None
        sims = self.centroids() @ embedding
        best = int(np.argmax(sims))
        return SpeakerLabel(best, _confidence(sims, best, self.threshold))

    def _open(self, embedding: np.ndarray | None, seconds: float) -> int:
        vector = embedding if embedding is not None else np.zeros(1, np.float32)
        self._sums.append(vector * max(seconds, 1e-3))
        self._last = len(self._sums) - 1
        return self._last


def _confidence(sims: np.ndarray, best: int, threshold: float) -> float:
    """1 when the nearest speaker is far nearer than the next (or than the threshold)."""
    others = np.delete(sims, best)
    rival = max(float(others.max()) if len(others) else -1.0, threshold - (1 - threshold))
    return float(np.clip(0.5 + (sims[best] - rival) / (2 * (1 - threshold)), 0.0, 1.0))


def _new_confidence(sims: np.ndarray, clusters: SpeakerClusters) -> float:
    """A new speaker is as sure as the nearest known one is far below the threshold."""
    gap = clusters.threshold - float(sims.max())
    return float(np.clip(0.5 + gap / (2 * (1 - clusters.threshold)), 0.0, 1.0))


def label_offline(
    embeddings: Sequence[np.ndarray | None],
    seconds: Sequence[float],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    max_speakers: int = DEFAULT_MAX_SPEAKERS,
) -> list[SpeakerLabel]:
    """Labels for a whole file's segments: online clustering, then each segment moved to
    its nearest final centroid; speakers renumbered by first appearance."""
    clusters = SpeakerClusters(threshold, max_speakers)
    labels = [clusters.assign(e, s) for e, s in zip(embeddings, seconds, strict=True)]
    if clusters.count < 2:
        return labels
    centroids = clusters.centroids()
    moved = []
    for embedding, label in zip(embeddings, labels, strict=True):
        if embedding is None:
            moved.append(label)
            continue
        sims = centroids @ embedding
        best = int(np.argmax(sims))
        moved.append(SpeakerLabel(best, _confidence(sims, best, threshold)))
    order: dict[int, int] = {}
    for label in moved:
        order.setdefault(label.speaker, len(order))
    return [SpeakerLabel(order[label.speaker], label.confidence) for label in moved]
