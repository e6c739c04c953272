"""The audio REST API's form fields, read through their table (openai_fields.py): ``Form``
gives each field's checked value, and ``chunking`` reads ``chunking_strategy``.

A multipart form's fields are text; a list is repeated ``name[]`` fields (the SDK's way) or
repeated ``name`` fields, an object is ``name[key]`` fields (``chunking_strategy[type]=
server_vad``) or JSON text. An empty field counts as not sent. Every refusal is an
``OpenAIError`` (400) naming the field, with OpenAI's code for what was wrong
(openai_errors.field_refusal).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from kettle.streaming.protocols import fields
from kettle.streaming.protocols.openai.errors import bad_request, field_error
from kettle.streaming.protocols.openai.fields import CHUNKING_VAD
from kettle.transcribe.errors import ConfigError
from kettle.transcribe.files.windows import WindowConfig
from kettle.transcribe.model import keyterms

CHUNKING = "chunking_strategy"
# Silero's threshold must lie strictly inside (0, 1); OpenAI's 0 and 1 become the nearest.
_THRESHOLD_BOUNDS = (0.01, 0.99)
# Form spellings OpenAI's API takes besides true/false (curl users send them).
_BOOL_TEXT = {"1": "true", "0": "false"}

Fields = Mapping[str, Sequence[str]]


class Form:
    """A form's fields (name -> values in the order sent), read only through ``table``."""

    def __init__(self, values: Fields, table: fields.FieldTable) -> None:
        self.values = values
        self.table = table

    def text(self, name: str) -> str | None:
        """The last value sent of a one-value field, unchecked (None: not sent, or empty)."""
        got = self.values.get(name)
        return got[-1] if got and got[-1].strip() else None

    def one(self, name: str, *, lower: bool = False) -> Any:
        """A one-value field's checked value (None: not sent)."""
        spec = self.table[name]
        raw = self.text(name)
        if raw is None:
            return None
        raw = raw.strip().lower() if lower else raw
        if spec.kind == fields.BOOL:
            raw = _BOOL_TEXT.get(raw.strip(), raw)
        try:
            return spec.parse_query(raw)
        except fields.FieldError as exc:
            raise field_error(exc, name, spec.kind) from None

    def many(self, name: str) -> list[str]:
        """A list field's checked items, bracketed or not, in the order sent."""
        spec = self.table[name]
        got = [*self.values.get(name + "[]", ()), *self.values.get(name, ())]
        try:
            return list(spec.check_json(got))
        except fields.FieldError as exc:
            raise field_error(exc, name, spec.kind) from None


def keywords(form: Form) -> tuple[str, ...]:
    try:
        return keyterms.normalize(form.many("keywords"))
    except ConfigError as exc:
        raise bad_request(f"keywords: {exc}.", "keywords") from None


def chunking(form: Form, base: WindowConfig) -> WindowConfig:
    """The window settings ``chunking_strategy`` asks for (``base`` for none or "auto")."""
    obj = _chunking_object(form)
    if obj is None:
        return base
    unknown = sorted(set(obj) - CHUNKING_VAD.names)
    if unknown:
        raise bad_request(f"{CHUNKING} has unknown keys: {', '.join(unknown)}.", CHUNKING,
                          "unknown_parameter")  # fmt: skip
    checked: dict[str, Any] = {}
    for spec in CHUNKING_VAD.fields:
        param = f"{CHUNKING}.{spec.name}"
        try:
            if spec.name not in obj:
                if spec.required:
                    raise fields.FieldError(spec.name, f"{spec.name} is required", fields.MISSING)
                continue
            value = obj[spec.name]
            checked[spec.name] = (
                spec.parse_query(value) if isinstance(value, str) else spec.check_json(value)
            )
        except fields.FieldError as exc:
            raise field_error(exc, param, spec.kind) from None
    changes: dict[str, Any] = {}
    if "threshold" in checked:
        low, high = _THRESHOLD_BOUNDS
        changes["vad_threshold"] = min(high, max(low, float(checked["threshold"])))
    for key, setting in (("silence_duration_ms", "min_silence_ms"),
                         ("prefix_padding_ms", "speech_pad_ms")):  # fmt: skip
        if key in checked:
            changes[setting] = int(checked[key])
    return replace(base, vad=True, **changes)


def _chunking_object(form: Form) -> Mapping[str, Any] | None:
    """The server_vad object sent as ``chunking_strategy[key]`` fields or as JSON text (None:
    unset or "auto"). Bracketed keys are found by name (their values read only for the
    table's keys; any other key is refused unread)."""
    prefix = CHUNKING + "["
    bracketed = [n[len(prefix) : -1] for n in form.values if n.startswith(prefix) and n[-1] == "]"]
    if bracketed:
        unknown = sorted(set(bracketed) - CHUNKING_VAD.names)
        if unknown:
            raise bad_request(f"{CHUNKING} has unknown keys: {', '.join(unknown)}.", CHUNKING,
                              "unknown_parameter")  # fmt: skip
        keyed = {k: form.values[f"{prefix}{k}]"] for k in CHUNKING_VAD.names if k in bracketed}
        return {k: got[-1] for k, got in keyed.items() if got}
    text = (form.text(CHUNKING) or "").strip()
    if text in ("", "auto", "null"):
        return None
    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        obj = None
    if not isinstance(obj, dict):
        raise bad_request(f'Invalid value for \'{CHUNKING}\': it must be "auto" or a server_vad '
                          "object.", CHUNKING)  # fmt: skip
    return obj
