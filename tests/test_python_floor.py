"""The Python floor is stated once and agreed on by the packaging, the linters and the README."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_floor_is_consistent() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert config["project"]["requires-python"] == ">=3.11"
    assert config["tool"]["ruff"]["target-version"] == "py311"
    assert config["tool"]["mypy"]["python_version"] == "3.11"
    assert "Programming Language :: Python :: 3.11" in config["project"]["classifiers"]
    assert "Python 3.11 or newer" in (ROOT / "README.md").read_text()
    assert sys.version_info >= (3, 11)
