"""benchmarks/bench_rss.py: the summary's warm-up, growth and per-decode figures."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import pytest
from bench_rss import rss_mb, summarize


def test_growth_counts_from_the_sample_a_quarter_in() -> None:
    samples = [
        {"decodes": 0, "rss_mb": 100.0, "t": 0.0},
        *(
            {"decodes": 25.0 * i, "rss_mb": 300.0 + i, "t": i, "decode_s": 2.5 * i}
            for i in range(1, 9)
        ),
    ]
    summary = summarize(samples)
    assert summary["rss_first_mb"] == 301.0
    assert summary["rss_warm_mb"] == 302.0  # samples[8 // 4 + ...]: 9 samples, index 2
    assert summary["rss_end_mb"] == 308.0
    assert summary["growth_after_warm_pct"] == round(100 * (308 / 302 - 1), 1)
    assert summary["mb_per_100_decodes"] == 4.0  # 6 MB over 150 decodes
    assert summary["ms_per_decode"] == 100.0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_rss_of_this_process_is_read() -> None:
    assert rss_mb() > 1.0
