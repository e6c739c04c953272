"""Imports point one way: kernels <- transcribe <- streaming; web holds assets only.

streaming may import kettle.web only to find the asset folder; web imports nothing.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Which project packages each package may import.
ALLOWED = {
    "kernels": set(),
    "transcribe": {"kernels", "transcribe"},
    # The server locates the page's assets through the kettle.web package.
    "streaming": {"kernels", "transcribe", "streaming", "web"},
    "web": set(),
}


def _project_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] == "kettle" and len(parts) > 1:
                found.add(parts[1])
    return found


def test_import_arrows_point_one_way() -> None:
    wrong = []
    for package, allowed in ALLOWED.items():
        for path in sorted((ROOT / package).rglob("*.py")):
            bad = _project_imports(path) - allowed
            if bad:
                wrong.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert not wrong, "\n".join(wrong)


def test_kernels_use_no_relative_imports_outside() -> None:
    for path in (ROOT / "kernels").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                assert node.level <= 1, f"{path} reaches outside kernels/"
