"""Scoring for bench_diarize: best label mapping, attribution shares, frame-level DER.

Pure functions. Turns and hypothesis spans are (start_s, end_s, speaker) triples; the
hypothesis labels are mapped one-to-one onto the true speakers (Hungarian, scipy) so that
the most units agree; a label left unmapped counts as wrong.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Span = tuple[float, float, int]
FRAME_S = 0.01  # DER frames: 10 ms


def best_mapping(pairs: Sequence[tuple[int, int]]) -> dict[int, int]:
    """hyp label -> true speaker maximizing the agreeing (hyp, true) pairs."""
    from scipy.optimize import linear_sum_assignment

    hyps = sorted({h for h, _ in pairs})
    refs = sorted({r for _, r in pairs})
    if not pairs:
        return {}
    counts = np.zeros((len(hyps), len(refs)))
    for h, r in pairs:
        counts[hyps.index(h), refs.index(r)] += 1
    rows, cols = linear_sum_assignment(-counts)
    return {hyps[i]: refs[j] for i, j in zip(rows, cols, strict=True)}


def share_right(pairs: Sequence[tuple[int, int]]) -> tuple[int, int]:
    """(right, total) after the best mapping."""
    mapping = best_mapping(pairs)
    return sum(mapping.get(h) == r for h, r in pairs), len(pairs)


def true_speaker(turns: Sequence[Span], start: float, end: float) -> int:
    """The turn overlapping [start, end] most; else the nearest turn."""
    best, overlap = -1, 0.0
    for s, e, spk in turns:
        o = min(e, end) - max(s, start)
        if o > overlap:
            best, overlap = spk, o
    if best >= 0:
        return best
    mid = (start + end) / 2
    return min(turns, key=lambda t: min(abs(t[0] - mid), abs(t[1] - mid)))[2]


def _frames(spans: Sequence[Span], n: int) -> np.ndarray:
    out = np.full(n, -1, np.int64)
    for s, e, spk in spans:
        out[max(0, round(s / FRAME_S)) : min(n, round(e / FRAME_S))] = spk
    return out


def der(reference: Sequence[Span], hypothesis: Sequence[Span]) -> dict[str, float]:
    """Frame-level (10 ms) DER, no collar, one speaker per frame: (missed + false alarm +
    confusion) / reference speech frames, labels mapped by the best frame overlap."""
    end = max([e for _, e, _ in [*reference, *hypothesis]], default=0.0)
    n = int(np.ceil(end / FRAME_S)) + 1
    ref, hyp = _frames(reference, n), _frames(hypothesis, n)
    speech = ref >= 0
    both = speech & (hyp >= 0)
    mapping = best_mapping(list(zip(hyp[both].tolist(), ref[both].tolist(), strict=True)))
    mapped = np.array([mapping.get(int(h), -2) for h in hyp[both]], np.int64)
    total = max(int(speech.sum()), 1)
    missed = int((speech & (hyp < 0)).sum())
    false_alarm = int((~speech & (hyp >= 0)).sum())
    confusion = int((mapped != ref[both]).sum())
    return {
        "der": (missed + false_alarm + confusion) / total,
        "missed": missed / total,
        "false_alarm": false_alarm / total,
        "confusion": confusion / total,
    }
