"""Language detection restricted to a request's ``languages`` (OpenAI's ``languages[]``)."""

from __future__ import annotations

from kettle.transcribe.model.prompts import _likeliest

RANKED = [("<|en|>", 0.6), ("<|de|>", 0.3), ("<|fr|>", 0.1)]


def test_detection_picks_the_likeliest_allowed_code() -> None:
    assert _likeliest(RANKED, ()) == "en"
    assert _likeliest(RANKED, ("fr", "de")) == "de"
    assert _likeliest(RANKED, ("ja",)) == "en"  # none ranked: detection's own best
