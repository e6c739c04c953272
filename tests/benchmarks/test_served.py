"""benchmarks/_served.py: the pure parts of the real-time served method (no model, no server)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from _served import (
    FinalRec,
    RevisionRec,
    StreamLog,
    Track,
    at_once_wers,
    final_lags,
    finals_of,
    groups,
    histogram,
    metric_delta,
    next_end_delays,
    outcomes,
    page_config,
    parse_metrics,
    refined_text,
    revision_effects,
    revisions_of,
    stream_clock,
    trace_fields,
    wall_at,
)

REFERENCE = "the cat sat on the mat. the dog ran home."
FINALS = [
    FinalRec(0, "the cat sat on a hat.", 2.0, 3.0),
    FinalRec(1, "the dog ran home.", 5.0, 6.0),
]


def test_each_revision_is_judged_alone_against_the_live_finals() -> None:
    revisions = [
        RevisionRec(0, "the cat sat on the mat.", 7.0, 1),  # two errors fewer
        RevisionRec(1, "the dog ran hone.", 8.0, 1),  # one more
        RevisionRec(1, "The dog ran home!", 9.0, 2),  # the same words
    ]
    effects = revision_effects(REFERENCE, FINALS, revisions)
    assert (effects["better"], effects["worse"], effects["same"]) == (1, 1, 1)


def test_the_refined_transcript_takes_each_finals_latest_revision() -> None:
    revisions = [RevisionRec(1, "a dog", 7.0, 1), RevisionRec(1, "the dogs", 8.0, 2)]
    assert refined_text(FINALS, revisions) == "the cat sat on a hat. the dogs"
    assert refined_text(FINALS, []) == "the cat sat on a hat. the dog ran home."


def test_audio_time_maps_to_the_wall_time_its_chunk_was_sent() -> None:
    sent = [(1600, 10.1), (3200, 10.2), (4800, 10.3)]  # 100 ms chunks
    assert wall_at(sent, 0.0) == 10.1
    assert wall_at(sent, 0.1) == 10.1  # the chunk's last sample
    assert wall_at(sent, 0.15) == 10.2
    assert wall_at(sent, 0.3) == 10.3
    assert wall_at(sent, 0.31) is None  # never sent
    assert round(stream_clock(sent, 10.25), 3) == 0.25  # the first sample: recorded at 10.0


def test_revision_delay_counts_from_the_next_utterances_end() -> None:
    sent = [(n * 1600, 100.0 + n * 0.1) for n in range(1, 101)]  # 10 s, 100 ms chunks
    finals = [FinalRec(0, "a", 2.0, 103.0), FinalRec(1, "b", 5.0, 106.0)]
    revisions = [
        RevisionRec(0, "a2", 107.5, 1),  # 5.0 s of audio was sent at 105.0: 2.5 s after it
        RevisionRec(0, "a3", 104.0, 2),  # before the next utterance ended: negative
        RevisionRec(1, "b2", 109.0, 1),  # no final after it: left out
    ]
    delays = next_end_delays(finals, revisions, sent)
    assert [(order, round(d, 3)) for order, d in delays] == [(1, 2.5), (2, -1.0)]
    assert [round(x, 3) for x in final_lags(finals, sent)] == [1.0, 1.0]


def test_messages_become_finals_and_revisions_numbered_by_arrival() -> None:
    log = StreamLog("x", REFERENCE, 10.0)
    messages: list[dict[str, Any]] = [
        {"type": "ready"},
        {"type": "final", "utterance": 0, "text": "a", "start": 0.5, "end": 2.0},
        {"type": "final", "utterance": 1, "text": "b", "start": 3.0, "end": 5.0},
        {"type": "revision", "utterance": 0, "text": "a2", "start": 0.5, "end": 2.0},
        {"type": "revision", "utterance": 1, "text": "b2", "start": 3.0, "end": 5.0, "pass": 2},
        {"type": "revision", "utterance": 0, "text": "a3", "start": 0.5, "end": 2.0},
        {"type": "done", "audio_seconds": 10.0, "utterances": 2},
    ]
    log.messages = [(float(k), m) for k, m in enumerate(messages)]
    assert [(f.utterance, f.end_s, f.wall) for f in finals_of(log)] == [
        (0, 2.0, 1.0),
        (1, 5.0, 2.0),
    ]
    assert [(r.utterance, r.order) for r in revisions_of(log)] == [(0, 1), (1, 2), (0, 2)]


def test_the_servers_counters_are_read_as_deltas() -> None:
    page = """# HELP kettle_refinements_total Finals offered
kettle_refinements_total{outcome="revised"} 3.0
kettle_refinements_total{outcome="kept"} 5.0
kettle_refinements_created{outcome="kept"} 1.7e9
kettle_revision_delay_seconds_bucket{le="2.0"} 1.0
kettle_revision_delay_seconds_bucket{le="+Inf"} 4.0
kettle_revision_delay_seconds_count 4.0
kettle_revision_delay_seconds_sum 20.0
kettle_sessions_active 1.0
"""
    before = parse_metrics(page.replace("3.0", "1.0").replace("4.0", "2.0").replace("20.0", "8.0"))
    delta = metric_delta(before, parse_metrics(page))
    assert outcomes(delta) == {"revised": 2, "unchanged": 0, "kept": 0, "skipped": 0, "last": 0}
    hist = histogram(delta, "kettle_revision_delay_seconds")
    assert hist == {"count": 2, "mean": 6.0, "le": {"+Inf": 2}}


def test_the_page_config_and_stream_groups() -> None:
    assert page_config(True) | {"revisions": False} == page_config(False)
    assert page_config(True)["word_timestamps"] is True
    tracks = [Track(name, np.zeros(16), "") for name in "abcd"]
    assert [[t.name for t in g] for g in groups(tracks, 1)] == [["a"], ["b"], ["c"], ["d"]]
    three = groups(tracks, 3)
    assert [[t.name for t in g] for g in three] == [["a", "b", "c"], ["d", "a", "b"]]
    assert [t.offset_s for t in three[1]] == [0.0, 1.0, 2.0]


def test_at_once_columns_are_labelled_by_method() -> None:
    rows = [
        {"set": "m", "method": "refined", "wer": 0.1, "live_wer": 0.15},
        {"set": "m", "method": "offline", "wer": 0.07},
        {"set": "b", "method": "offline", "wer": 0.2},
        {"set": "n", "method": "stream", "words": 0},
    ]
    assert at_once_wers(rows, "m") == {"refined live": 0.15, "refined": 0.1, "offline": 0.07}


def test_trace_lines_give_their_fields() -> None:
    line = (
        "DEBUG kettle.streaming.core.refine_lane: refine request: final=3 pass=1 "
        "window=12.40-21.90 max_tokens=40 prompt='it\\'s a test' text=\"x y\""
    )
    fields = trace_fields(line)
    assert fields["final"] == "3" and fields["window"] == "12.40-21.90"
    assert fields["prompt"] == "'it\\'s a test'" and fields["text"] == '"x y"'
