"""The user's documents link only to what the repository holds: every relative link in the
README and docs/ names a file that exists, and every #anchor a heading in it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import heading_anchors

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", ROOT / "deploy" / "README.md", *sorted(ROOT.glob("docs/*.md"))]
LINK = re.compile(r"\]\(([^)#\s]*)(#[^)\s]*)?\)")


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(document: Path) -> None:
    broken = []
    for match in LINK.finditer(document.read_text(encoding="utf-8")):
        target, anchor = match.group(1), match.group(2)
        if re.match(r"[a-z]+:", target):
            continue  # a URL elsewhere
        path = (document.parent / target).resolve() if target else document
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor[1:] not in heading_anchors(path):
            broken.append(f"{target}{anchor}: no such heading")
    assert not broken, broken


def test_the_documents_cite_nothing_outside_the_repository() -> None:
    for document in DOCUMENTS:
        text = document.read_text(encoding="utf-8")
        assert "shared design folder" not in text and "../shared" not in text, document
