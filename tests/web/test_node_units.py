"""Runs the page's JavaScript unit tests (tests/web/*.test.mjs) under node, so `pytest` covers them.

They test the pure modules in web/: the worklet's resampler and PCM framing, the transcript
model and its .txt/.srt export (revisions included), the word diff behind a
revision's marks, and the connection helpers.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]


def test_javascript_units_pass_under_node() -> None:
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        pytest.fail("node is not installed: apt-get install nodejs (.ci/run does)")
    files = sorted(str(p.relative_to(REPO_ROOT)) for p in HERE.glob("*.test.mjs"))
    assert files, "no JavaScript tests found"
    # Files, not the folder: node 18 and 20+ treat a directory argument differently.
    proc = subprocess.run(
        [node, "--test", *files],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, f"node --test failed:\n{proc.stdout}\n{proc.stderr}"
