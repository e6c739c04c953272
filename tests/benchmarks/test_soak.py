"""The soak benchmark's short version: 2 minutes of honest streams beside abusive clients on
`kettle serve --fake-model` (real VAD, real WebSockets), checked for what must hold however
loaded the machine: nothing lost, nothing leaked, abusers answered and slowed, not obeyed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from soak import rss_pair_medians  # noqa: E402


def test_rss_level_is_the_median_of_each_pair_of_blocks() -> None:
    blocks = [(0.0, 10.0, False), (10.0, 20.0, True), (20.0, 30.0, False), (30.0, 40.0, True)]
    # a one-sample spike (a decode's buffers) does not move a pair's level
    rss = [(t, 900.0 if t == 12.0 else 300.0 + t // 20) for t in range(0, 40, 2)]
    assert rss_pair_medians([(float(t), m) for t, m in rss], blocks) == [300.0, 301.0]
    assert rss_pair_medians([], blocks) == []


# slow too: 2.5 minutes of wall time, so the quick run (-m "not slow") leaves it out.
@pytest.mark.soak
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_two_minute_soak_with_the_fake_model(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "soak.py"),
            "--fake-model",
            "--minutes",
            "2",
            "--block-s",
            "30",
            "--streams",
            "4",
            "--audio",
            str(ROOT / "tests" / "data" / "jfk.flac"),
            "--json",
            str(out),
            "--no-write",
        ],
        capture_output=True,
        text=True,
        timeout=800,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["finals_lost"] == 0
    assert result["sessions_leaked"] == 0
    assert result["honest_finals"] > 0
    # Honest clients see at most "overloaded" (partials thinned on a busy box), nothing else.
    assert set(result["honest_errors"]) <= {"overloaded"}
    # The flooder is slowed by admission, silently: no error of its own (no audio_backlog),
    # far below its 50x. Like every stream on a busy box it may be told "overloaded" when its
    # partials are thinned: a notice about the server's load, not about the client.
    assert result["flood_audio_s"] > 0 and set(result["flood_errors"]) <= {"overloaded"}
    # What the server transcribed of it: at most its 10 s burst plus 2x real time (a 30 s block).
    assert result["flood_rate_x_realtime"] < 3.0
    assert result["flood_sent_s"] > result["flood_audio_s"]
    # Held back, not dropped: no keepalive timeout while its pong waits behind its audio.
    assert not [f for f in result["client_failures"] if f.startswith("flooder")]
    # Garbage is answered with errors, and the session still ends normally.
    assert {"bad_message", "bad_audio"} <= set(result["garbage_errors"])
    assert set(result["garbage_closes"]) == {"1000"}
    assert result["disconnects"] >= 1
    assert result["server_errors"].get("internal", 0) == 0
