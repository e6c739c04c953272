"""What the handshake parsers of several APIs share: the error a refused parameter raises and
the language-tag rule. No I/O."""

from __future__ import annotations

from kettle.transcribe.errors import KettleError
from kettle.transcribe.model.languages import LANGUAGES


class ParamError(KettleError):
    """A query parameter the endpoint refuses; the message is meant for the peer (HTTP 400)."""


def parse_language(raw: str) -> str | None:
    """A language tag (``en``, ``en-US``, ``pt_BR``) as its ISO 639-1 code; ``multi``: None
    (detect). ParamError for a language kettle's models do not know."""
    tag = raw.strip()
    if tag.lower() == "multi":
        return None
    primary = tag.split("-")[0].split("_")[0].lower()
    if primary not in LANGUAGES:
        raise ParamError(f"language {raw!r} is not one kettle's models know")
    return primary


__all__ = ["ParamError", "parse_language"]
