"""benchmarks/bench_wyoming.py's pure parts: the clips it picks, speech onsets, what a trial
measures, the summary and targets, and how it reads wyoming-bench's report."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_wyoming import (
    SR,
    Trial,
    first_run,
    parse_wyoming_bench,
    pick_clips,
    section_body,
    speech_onset,
    summarize,
    targets,
    wb_rows,
)

# wyoming-bench 2026.10.0's output against wyoming-faster-whisper (3 clips, --rounds 1),
# with a streaming block as it prints one for a server that streams.
WB_OUTPUT = """\
=== 127.0.0.1:51899 (faster-whisper) ===
  [streaming] NOT SUPPORTED by 127.0.0.1:51899 (not advertised by server); skipping streaming mode

Server: 127.0.0.1:51899 (faster-whisper)
------------------------------------------------------------------------------
[non_streaming] ok=3 fail=0
  metric             min      mean    median       p95       max
  Total (ms)       552.6     618.1     570.8     714.8     730.8
  RTF (x)           0.05      0.06      0.06      0.07      0.07
  Audio        mean=10.26s input
  Accuracy     WER=8.2%  CER=3.6%  SAR=0.0%
               edits S=6 I=0 D=0  (ref words=73)

==============================================================================
Summary (lower is better)
==============================================================================

[non_streaming]
  server                              ok      WER      CER     SAR  Total_mean   TTFT_p95  RTF_mean
  127.0.0.1:51899 (faster-whisper)     3     8.2%     3.6%    0.0%       618.1        n/a      0.06
"""
WB_STREAMING = """\
Server: 127.0.0.1:4000 (kettle)
------------------------------------------------------------------------------
[streaming] ok=2 fail=1
  metric             min      mean    median       p95       max
  Total (ms)       100.0     150.0     150.0     195.0     200.0
  TTFT (ms)          n/a      40.5      40.5      44.1      45.0
  RTF (x)           0.01      0.02      0.02      0.02      0.02
  Audio        mean=5.00s input
  Accuracy     WER=n/a  CER=n/a  SAR=n/a
"""


def tone(seconds: float, level: float) -> np.ndarray:
    t = np.arange(int(seconds * SR)) / SR
    return (level * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def test_pick_clips_takes_english_single_speaker_clips_of_3_to_15_s_fleurs_first() -> None:
    rows = [
        ("ls_a", np.zeros(5 * SR, np.float32), "a", "librispeech"),
        ("cmd", np.zeros(5 * SR, np.float32), "b", "command_short"),  # not a category it reads
        ("fl_short", np.zeros(2 * SR, np.float32), "c", "fleurs"),  # under 3 s
        ("fl_a", np.zeros(4 * SR, np.float32), "d", "fleurs"),
        ("fl_long", np.zeros(16 * SR, np.float32), "e", "fleurs"),  # over 15 s
        ("fl_b", np.zeros(15 * SR, np.float32), "f", "fleurs"),
    ]
    assert [c.name for c in pick_clips(rows, 10)] == ["fl_a", "fl_b", "ls_a"]
    assert [(c.name, c.reference) for c in pick_clips(rows, 1)] == [("fl_a", "d")]


@pytest.mark.parametrize(
    ("flags", "run", "start"),
    [
        ([False, True, False, True, True, True], 3, 3),
        ([True, True, True], 3, 0),
        ([True, False, True, True], 3, None),
        ([], 1, None),
    ],
)
def test_first_run(flags: list[bool], run: int, start: int | None) -> None:
    assert first_run(flags, run) == start


def test_speech_onset_is_the_first_loud_run_whatever_the_level() -> None:
    for level in (0.5, 0.003):  # eval clips peak anywhere from -2 to -50 dBFS
        audio = np.concatenate([np.zeros(SR, np.float32), tone(1.0, level)])
        assert speech_onset(audio) == pytest.approx(0.99, abs=0.031)  # 30 ms frames


def test_speech_onset_ignores_a_click_and_a_noise_floor() -> None:
    rng = np.random.default_rng(0)
    floor = (0.001 * rng.standard_normal(2 * SR)).astype(np.float32)
    floor[SR // 2 : SR // 2 + 160] = 0.4  # 10 ms click: one frame, not three
    audio = np.concatenate([floor, tone(1.0, 0.2)])
    assert speech_onset(audio) == pytest.approx(1.98, abs=0.031)
    assert speech_onset(np.zeros(SR, np.float32)) == 0.0


def trial(text: str, chunks: list[tuple[float, str]], *, final_s: float = 0.2) -> Trial:
    t = Trial("c", "the cat sat on the mat", audio_s=3.0, onset_s=0.5, origin=100.0)
    t.stop_sent = 103.0
    t.transcript_at = 103.0 + final_s
    t.chunks = [(100.0 + at, words) for at, words in chunks]
    t.events = "S" + "C" * len(chunks) + "TP"
    t.text = text
    return t


def test_trial_times_are_from_audio_stop_and_from_the_speech_onset() -> None:
    t = trial("The cat sat on the mat.", [(1.7, " The cat"), (2.4, " sat on"), (3.1, " the mat.")])
    assert t.final_s == pytest.approx(0.2)
    assert t.first_chunk_s == pytest.approx(1.2)  # 1.7 s into the clip, speech from 0.5 s
    assert t.chunk_text == " The cat sat on the mat."
    record = t.record()
    assert record["chunks"] == 3
    assert record["chunks_before_stop"] == 2  # the third came after AudioStop
    assert record["chunk_times_s"] == [1.7, 2.4, 3.1]
    assert record["stop_late_s"] == 0.0  # AudioStop left 3.0 s after sample 0, on time
    silent = Trial("c", "x", audio_s=1.0, onset_s=0.0)
    assert silent.final_s is None and silent.first_chunk_s is None


def test_summarize_scores_finals_and_checks_chunks_against_them() -> None:
    trials = [
        trial("The cat sat on the mat.", [(1.0, " The cat"), (2.0, " sat on the mat")], final_s=0),
        trial("The cat sat on a mat", [(2.5, " The cat sat")], final_s=0.3),  # chunks lack words
        trial("the cat sat on the mat", [], final_s=0.5),
    ]
    s = summarize(trials)
    assert (s["final_p50_s"], s["final_max_s"]) == (0.3, 0.5)  # of 0, 0.3 and 0.5
    assert (s["first_chunk_p50_s"], s["first_chunk_max_s"]) == (1.25, 2.0)
    assert (s["clips_with_chunks"], s["chunks"], s["chunks_match"]) == (2, 3, 1)
    assert s["wer"] == pytest.approx(100 / 18, abs=0.01)  # one word of 18
    assert s["errors"] == 0
    assert s["order_ok"] == 3


@pytest.mark.parametrize(
    ("events", "ok"),
    [("SCCTP", True), ("STP", True), ("T", True), ("SCTCP", False), ("SCCP", False), ("", False)],
)
def test_order_is_the_wyoming_readmes(events: str, ok: bool) -> None:
    t = Trial("c", "x", audio_s=1.0, onset_s=0.0)
    t.events = events
    assert t.order_ok is ok


def test_targets() -> None:
    wfw = {"final_p50_s": 0.54, "wer": 6.6, "first_chunk_max_s": None}
    kettle = {
        "final_p50_s": 0.2, "wer": 6.0, "first_chunk_max_s": 2.1,
        "clips_with_chunks": 10, "clips": 10,
    }  # fmt: skip
    assert targets(kettle, wfw) == {
        "final_p50_ratio": 0.37, "final_p50_ok": True, "wer_ok": True, "first_chunk_ok": True,
    }  # fmt: skip
    late = {**kettle, "final_p50_s": 0.3, "wer": 7.0, "clips_with_chunks": 9}
    assert targets(late, wfw) == {
        "final_p50_ratio": 0.556, "final_p50_ok": False, "wer_ok": False,
        "first_chunk_ok": False,  # a clip without chunks misses it
    }  # fmt: skip


def test_parse_wyoming_bench_reads_the_per_server_report() -> None:
    modes = parse_wyoming_bench(WB_OUTPUT)
    assert modes["streaming"] == {
        "skipped": "[streaming] NOT SUPPORTED by 127.0.0.1:51899 (not advertised by server); "
        "skipping streaming mode"
    }
    ns = modes["non_streaming"]
    assert (ns["ok"], ns["fail"]) == (3, 0)
    assert ns["total_ms"] == {
        "min": 552.6, "mean": 618.1, "median": 570.8, "p95": 714.8, "max": 730.8,
    }  # fmt: skip
    assert ns["rtf"]["mean"] == 0.06
    assert "ttft_ms" not in ns  # wyoming-bench prints TTFT in streaming mode only
    assert (ns["wer"], ns["cer"], ns["sar"]) == (8.2, 3.6, 0.0)


def test_parse_wyoming_bench_streaming_block_and_rows() -> None:
    modes = parse_wyoming_bench(WB_STREAMING)
    st = modes["streaming"]
    assert (st["ok"], st["fail"]) == (2, 1)
    assert st["ttft_ms"]["min"] is None and st["ttft_ms"]["p95"] == 44.1
    assert st["wer"] is None
    rows = wb_rows({"kettle": {"wyoming_bench": {"modes": modes}}})
    assert rows[0]["ttft_median_ms"] == 40.5
    assert rows[0]["wer"] == "n/a"


def test_the_section_lists_each_clips_first_chunk_and_counts_the_late_ones() -> None:
    clips = [{"first_chunk_s": 1.2}, {"first_chunk_s": 2.91}, {"first_chunk_s": None}]
    result = {
        "threads": 2,
        "onset": "o",
        "targets": None,
        "systems": {"kettle": {"per_clip": clips}},
    }
    body = section_body("Data", result, "| t |\n", "")
    assert "first chunk per clip (s): 1.20, 2.91, none (2 of 3 over 2.5 s)." in body
