"""benchmarks/_serve.py: the benchmarks' `kettle serve` subprocess starts, serves and stops."""

from __future__ import annotations

import sys
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from _serve import kettle_serving, start_kettle, ws_url


def test_a_server_that_serves_then_stops() -> None:
    with kettle_serving(["--fake-model"]) as (proc, base):
        assert base.startswith("http://127.0.0.1:") and ws_url(base) == (
            base.replace("http", "ws") + "/v1/stream"
        )
        with urllib.request.urlopen(base + "/healthz", timeout=30) as answer:
            assert answer.status == 200
    assert proc.returncode is not None  # stopped when the block ended


def test_a_server_that_cannot_start_is_reported() -> None:
    with pytest.raises(SystemExit, match="did not start"):
        start_kettle(["--no-such-option"])
