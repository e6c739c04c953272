"""Online speaker clustering (transcribe/speakers/clusters.py) on synthetic unit vectors."""

from __future__ import annotations

import numpy as np
from kettle.transcribe.speakers.clusters import SpeakerClusters, label_offline


def voice(index: int, noise: float = 0.0, seed: int = 0) -> np.ndarray:
    """A unit vector near axis ``index`` (one speaker), with some noise."""
    rng = np.random.default_rng(seed)
    v = np.zeros(16, np.float32)
    v[index] = 1.0
    v = v + noise * rng.standard_normal(16).astype(np.float32)
    return v / np.linalg.norm(v)


def test_speakers_are_numbered_in_the_order_first_heard() -> None:
    clusters = SpeakerClusters(threshold=0.7)
    labels = [
        clusters.assign(voice(i, 0.1, seed), 2.0).speaker
        for seed, i in enumerate([5, 5, 2, 5, 9, 2])
    ]
    assert labels == [0, 0, 1, 0, 2, 1]
    assert clusters.count == 3


def test_the_cap_sends_a_new_voice_to_the_nearest_speaker() -> None:
    clusters = SpeakerClusters(threshold=0.7, max_speakers=2)
    assert clusters.assign(voice(0), 2.0).speaker == 0
    assert clusters.assign(voice(1), 2.0).speaker == 1
    near_one = voice(1) * 0.6 + voice(2) * 0.4
    assert clusters.assign(near_one / np.linalg.norm(near_one), 2.0).speaker == 1
    assert clusters.count == 2


def test_a_short_utterance_opens_no_speaker_and_moves_no_centroid() -> None:
    clusters = SpeakerClusters(threshold=0.7, min_new_s=1.0)
    clusters.assign(voice(0), 2.0)
    before = clusters.centroids().copy()
    label = clusters.assign(voice(3), 0.4)
    assert label.speaker == 0 and clusters.count == 1
    np.testing.assert_array_equal(clusters.centroids(), before)


def test_a_missing_embedding_takes_the_last_speaker_at_confidence_zero() -> None:
    clusters = SpeakerClusters(threshold=0.7)
    clusters.assign(voice(0), 2.0)
    clusters.assign(voice(4), 2.0)
    label = clusters.assign(None, 2.0)
    assert (label.speaker, label.confidence) == (1, 0.0)


def test_confidence_is_high_for_a_clear_match_and_lower_for_an_ambiguous_one() -> None:
    clusters = SpeakerClusters(threshold=0.7)
    clusters.assign(voice(0), 2.0)
    clusters.assign(voice(1), 2.0)
    clear = clusters.assign(voice(0, 0.05, 3), 2.0)
    halfway = voice(0) + voice(1) * 0.9
    ambiguous = clusters.assign(halfway / np.linalg.norm(halfway), 2.0)
    assert 0.0 <= ambiguous.confidence < clear.confidence <= 1.0


def test_offline_labels_follow_the_turns_numbered_by_first_appearance() -> None:
    turns = [3, 3, 7, 3, 7, 7, 1]
    embeddings = [voice(i, 0.08, seed) for seed, i in enumerate(turns)]
    labels = label_offline(embeddings, [2.0] * len(turns), threshold=0.7)
    assert [label.speaker for label in labels] == [0, 0, 1, 0, 1, 1, 2]
    assert all(0.5 < label.confidence <= 1.0 for label in labels)
