"""The audio REST API's list and object form fields: ``include[]``, ``keywords[]``,
``languages[]`` and ``chunking_strategy``, parsed from a multipart form's text fields.

The SDK sends a list as repeated ``name[]`` fields and an object as ``name[key]`` fields
(``chunking_strategy[type]=server_vad``); a hand-written request may send ``name`` without
brackets, or the object as JSON text: both are taken too. Errors are ``FieldError``, which
the form parser answers as a 400 naming the field.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from kettle.transcribe import keyterms
from kettle.transcribe.errors import ConfigError
from kettle.transcribe.windows import WindowConfig

INCLUDES = ("logprobs",)
CHUNKING_KEYS = ("type", "prefix_padding_ms", "silence_duration_ms", "threshold")
# Silero's threshold must lie strictly inside (0, 1); OpenAI's 0 and 1 become the nearest.
_THRESHOLD_BOUNDS = (0.01, 0.99)


class FieldError(Exception):
    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


Fields = Mapping[str, Sequence[str]]


def listed(values: Fields, name: str) -> list[str]:
    """A list field's items, bracketed or not, in the order sent."""
    return [*values.get(name + "[]", ()), *values.get(name, ())]


def includes(values: Fields) -> frozenset[str]:
    got = listed(values, "include")
    for item in got:
        if item not in INCLUDES:
            raise FieldError(f"include holds {item!r}; the one value is logprobs.", "include")
    return frozenset(got)


def keywords(values: Fields) -> tuple[str, ...]:
    try:
        return keyterms.normalize(listed(values, "keywords"))
    except ConfigError as exc:
        raise FieldError(f"keywords: {exc}.", "keywords") from None


def chunking(values: Fields, base: WindowConfig) -> WindowConfig:
    """The window settings ``chunking_strategy`` asks for (``base`` for none or "auto")."""
    obj = _chunking_object(values)
    if obj is None:
        return base
    param = "chunking_strategy"
    unknown = sorted(set(obj) - set(CHUNKING_KEYS))
    if unknown:
        raise FieldError(f"{param} has unknown keys: {', '.join(unknown)}.", param)
    if obj.get("type") != "server_vad":
        raise FieldError(f'{param} must be "auto" or an object with type "server_vad".',
                         f"{param}.type")  # fmt: skip
    changes: dict[str, Any] = {}
    if "threshold" in obj:
        t = _number(obj["threshold"])
        if not 0.0 <= t <= 1.0:
            raise FieldError(f"{param}.threshold must be a number from 0 to 1.",
                             f"{param}.threshold")  # fmt: skip
        low, high = _THRESHOLD_BOUNDS
        changes["vad_threshold"] = min(high, max(low, t))
    for key, field in (("silence_duration_ms", "min_silence_ms"),
                       ("prefix_padding_ms", "speech_pad_ms")):  # fmt: skip
        if key in obj:
            ms = _number(obj[key])
            if not (ms.is_integer() and 0 <= ms <= 10_000):
                raise FieldError(f"{param}.{key} must be an integer from 0 to 10000.",
                                 f"{param}.{key}")  # fmt: skip
            changes[field] = int(ms)
    return replace(base, vad=True, **changes)


def _chunking_object(values: Fields) -> dict[str, Any] | None:
    keyed = {
        name[len("chunking_strategy[") : -1]: got[-1]
        for name, got in values.items()
        if name.startswith("chunking_strategy[") and name.endswith("]") and got
    }
    if keyed:
        return keyed
    raw = values.get("chunking_strategy")
    text = raw[-1].strip() if raw else ""
    if text in ("", "auto", "null"):
        return None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        obj = None
    if not isinstance(obj, dict):
        raise FieldError('chunking_strategy must be "auto" or a server_vad object.',
                         "chunking_strategy")  # fmt: skip
    return obj


def _number(value: object) -> float:
    if isinstance(value, bool):
        return math.nan
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(str(value))
    except ValueError:
        return math.nan
