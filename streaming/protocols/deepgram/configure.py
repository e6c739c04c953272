"""Deepgram's live ``Configure`` message on ``/v1/listen``: what it asks, checked. No I/O.

Deepgram documents ``{"type": "Configure", "keyterms": [...], "features": {...}}`` on a
Nova-3 stream: ``keyterms`` replaces the whole list (the ``keyterm``/``keywords`` query's
included; ``[]`` clears it; absent or null keeps it), ``features`` turns formatting features
on or off, and every Configure is answered by exactly one ``ConfigureSuccess`` (with the
keyterms in effect when they were replaced) or ``ConfigureFailure``.

kettle's Whisper takes any keyterms as hotwords, so it answers like Nova-3. Of the
features it has ``punctuate`` and ``smart_format`` (formatted text, as the query's); the
others are accepted and ignored, as the query's unknown parameters are.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kettle.streaming.protocols.deepgram.fields import LIVE_CONFIGURE
from kettle.streaming.protocols.fields import FieldError
from kettle.transcribe.errors import ConfigError
from kettle.transcribe.model import keyterms

# The features a Configure may change that kettle has (the rest are ignored).
FORMAT_FEATURES = ("punctuate", "smart_format")
LIMIT_EXCEEDED = "CONFIGURE_KEYTERM_LIMIT_EXCEEDED"


@dataclass(frozen=True)
class ConfigureChange:
    """An accepted Configure: None leaves a setting as it is."""

    keyterms: tuple[str, ...] | None = None
    features: Mapping[str, bool] | None = None  # only FORMAT_FEATURES


@dataclass(frozen=True)
class ConfigureFailed:
    """A ``ConfigureFailure`` (a documented ``code``), nothing changed."""

    code: str
    description: str


@dataclass(frozen=True)
class ConfigureMalformed:
    """The message is not a Configure's shape: a ``SchemaError``, nothing changed."""

    description: str


def parse_configure(
    obj: Mapping[str, Any],
) -> ConfigureChange | ConfigureFailed | ConfigureMalformed:
    """A decoded ``Configure`` message, checked in full against ``LIVE_CONFIGURE`` before
    anything is changed (``type`` is the caller's: LIVE_MESSAGE)."""
    try:
        LIVE_CONFIGURE.check_json(obj)
    except FieldError as exc:
        return ConfigureMalformed(f"{exc} (or null)")
    raw_terms = obj.get("keyterms")
    terms: tuple[str, ...] | None = None
    if raw_terms is not None:
        try:
            # Deepgram's Configure keyterms are plain terms: no intensifiers to strip.
            terms = keyterms.normalize(raw_terms)
        except ConfigError as exc:
            return ConfigureFailed(LIMIT_EXCEEDED, str(exc))
    raw_features = obj.get("features")
    features: dict[str, bool] | None = None
    if raw_features is not None:
        if not all(isinstance(v, bool) for v in raw_features.values()):
            return ConfigureMalformed("features must be an object of true/false values")
        features = {k: v for k, v in raw_features.items() if k in FORMAT_FEATURES}
    return ConfigureChange(terms, features)


__all__ = [
    "FORMAT_FEATURES",
    "ConfigureChange",
    "ConfigureFailed",
    "ConfigureMalformed",
    "parse_configure",
]
