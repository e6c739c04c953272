"""Field tables: each API's query parameters and message fields as its public reference
documents them (type, range or enum, required), one row per field with the reference's URL.

A codec validates what a client sends against its API's table, so that a client's mistake
gets the API's documented error instead of going unnoticed; tests check that every table
names exactly the fields its parser reads (``Recording`` notes what a parser looks at).

Query parameters arrive as text ("true", "16000"); message fields as JSON values. A row checks
either: ``parse_query`` turns the text into the typed value, ``check_json`` checks a JSON
value's type. Both raise ``FieldError`` with a message meant for the client.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kettle.transcribe.errors import KettleError

BOOL = "bool"
INT = "int"
NUMBER = "number"  # int or float
STRING = "string"
ENUM = "enum"  # a string from ``choices``
STRINGS = "strings"  # a list of strings (JSON), or a repeated query parameter
OBJECT = "object"  # a JSON object, checked by the codec itself
FILE = "file"  # a multipart form's file part (bytes), checked by the codec itself
KINDS = (BOOL, INT, NUMBER, STRING, ENUM, STRINGS, OBJECT, FILE)

# Why a value was refused (FieldError.reason), for codecs that answer with finer codes.
TYPE, TOO_LOW, TOO_HIGH, CHOICE, LENGTH, TOO_MANY, MISSING, VALUE = (
    "type", "too_low", "too_high", "choice", "length", "too_many", "missing", "value"
)  # fmt: skip

_TRUE, _FALSE = ("true",), ("false",)
# A query's integer and number as the references write them (ASCII digits: Python's int() and
# float() also take "1_000", "٣" and "infinity", which no client means; "+16" neither).
_INT_TEXT = re.compile(r"-?[0-9]+")
_NUMBER_TEXT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_NULLS = ("", "null")  # a nullable query parameter's null
_LISTED = 12  # an enum with more choices is named by its count in a refusal


class FieldError(KettleError):
    """A field the reference types or bounds otherwise; ``field`` names it."""

    def __init__(self, field: str, message: str, reason: str = VALUE) -> None:
        super().__init__(message)
        self.field = field
        self.reason = reason  # TYPE, TOO_LOW, ... (VALUE: any other)


@dataclass(frozen=True)
class FieldSpec:
    """One documented field. ``low``/``high`` bound an INT or NUMBER (inclusive), or the
    length of a STRING or STRINGS' items; ``choices`` are an ENUM's values (or, for STRINGS,
    each item's).

    ``url``: the reference (``https://...``, or a page of ``docs/`` for kettle's own
    protocol and extensions, e.g. ``docs/protocol.md#<section>``). ``literals``: query texts
    taken as they are besides the kind's (Deepgram's ``endpointing`` is milliseconds or
    ``false``). ``nullable``: JSON null (and, in a query,
    an empty value or ``null``) is taken and means "not set" (None). ``fold_case``: an ENUM's
    value is matched ignoring case and returned as its choice. ``integral_floats``: an INT
    takes a JSON float without a fraction (``16000.0``), as JSON has one number type; False
    refuses it.
    """

    name: str
    kind: str
    url: str
    required: bool = False
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    max_items: int | None = None  # STRINGS: at most this many
    literals: tuple[str, ...] = ()
    nullable: bool = False
    fold_case: bool = False
    integral_floats: bool = True

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"{self.name}: unknown kind {self.kind!r}")
        if self.kind == ENUM and not self.choices:
            raise ValueError(f"{self.name}: an enum needs choices")
        if self.choices and self.kind not in (ENUM, STRINGS):
            raise ValueError(f"{self.name}: only an enum or a list of strings has choices")
        if not self.url.startswith(("https://", "docs/")):
            raise ValueError(f"{self.name}: a row needs its reference's URL")

    def parse_query(self, raw: str) -> Any:
        """The typed value of a query parameter's text (one value of a repeated STRINGS)."""
        text = raw.strip()
        if text.lower() in self.literals:
            return text.lower()
        if self.nullable and text in _NULLS:
            return None
        if self.kind == BOOL:
            if text.lower() in _TRUE:
                return True
            if text.lower() in _FALSE:
                return False
            raise FieldError(self.name, f"{self.name} must be true or false, not {raw!r}", TYPE)
        if self.kind == INT:
            if not _INT_TEXT.fullmatch(text):
                raise FieldError(self.name, f"{self.name} must be an integer, not {raw!r}", TYPE)
            return self._in_range(int(text))
        if self.kind == NUMBER:
            if not _NUMBER_TEXT.fullmatch(text):
                raise FieldError(self.name, f"{self.name} must be a number, not {raw!r}", TYPE)
            value = float(text)
            if not math.isfinite(value):
                raise FieldError(
                    self.name, f"{self.name} must be a finite number, not {raw!r}", TYPE
                )
            return self._in_range(value)
        if self.kind == STRING:
            return self._text(raw)
        if self.kind == STRINGS:
            return self._item(raw)
        if self.kind == ENUM:
            return self._choice(text)
        raise FieldError(self.name, f"{self.name} cannot be given in the query string")

    def check_json(self, value: Any) -> Any:
        """A JSON value of this field, checked (returned as it is, or as a tuple for STRINGS;
        None for a nullable field's null)."""
        if value is None and self.nullable:
            return None
        if self.kind == BOOL:
            if not isinstance(value, bool):
                raise FieldError(
                    self.name, f"{self.name} must be a boolean, not {_shown(value)}", TYPE
                )
            return value
        if self.kind == INT:
            if isinstance(value, bool) or not isinstance(value, int):
                if self.integral_floats and isinstance(value, float) and value.is_integer():
                    return self._in_range(int(value))  # JSON has one number type
                raise FieldError(
                    self.name, f"{self.name} must be an integer, not {_shown(value)}", TYPE
                )
            return self._in_range(value)
        if self.kind == NUMBER:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise FieldError(
                    self.name, f"{self.name} must be a number, not {_shown(value)}", TYPE
                )
            if not math.isfinite(value):
                raise FieldError(self.name, f"{self.name} must be a finite number", TYPE)
            return self._in_range(value)
        if self.kind == STRING:
            if not isinstance(value, str):
                raise FieldError(
                    self.name, f"{self.name} must be a string, not {_shown(value)}", TYPE
                )
            return self._text(value)
        if self.kind == ENUM:
            if not isinstance(value, str):
                raise FieldError(
                    self.name, f"{self.name} must be a string, not {_shown(value)}", TYPE
                )
            return self._choice(value)
        if self.kind == STRINGS:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise FieldError(
                    self.name, f"{self.name} must be a list of strings, not {_shown(value)}", TYPE
                )
            if self.max_items is not None and len(value) > self.max_items:
                raise FieldError(
                    self.name,
                    f"{self.name} holds {len(value)} items, at most {self.max_items}",
                    TOO_MANY,
                )
            return tuple(self._item(v) for v in value)
        if self.kind == FILE:
            raise FieldError(self.name, f"{self.name} must be a file", TYPE)
        if not isinstance(value, Mapping):
            raise FieldError(self.name, f"{self.name} must be an object, not {_shown(value)}", TYPE)
        return value

    def _in_range(self, value: Any) -> Any:
        if self.low is not None and value < self.low:
            raise FieldError(
                self.name, f"{self.name} must be within {self._bounds()}, not {value}", TOO_LOW
            )
        if self.high is not None and value > self.high:
            raise FieldError(
                self.name, f"{self.name} must be within {self._bounds()}, not {value}", TOO_HIGH
            )
        return value

    def _text(self, value: str) -> str:
        n = len(value)
        if (self.low is not None and n < self.low) or (self.high is not None and n > self.high):
            raise FieldError(
                self.name, f"{self.name} must be {self._bounds()} characters long, not {n}", LENGTH
            )
        return value

    def _item(self, value: str) -> str:
        """One string of a STRINGS: its length, and one of ``choices`` when there are any."""
        return self._choice(self._text(value)) if self.choices else self._text(value)

    def _choice(self, value: str) -> str:
        if value in self.choices:
            return value
        if self.fold_case:
            for choice in self.choices:
                if choice.casefold() == value.casefold():
                    return choice
        if len(self.choices) > _LISTED:
            named = f"the {len(self.choices)} values {', '.join(self.choices[:3])}, ..."
        else:
            named = ", ".join(self.choices)
        raise FieldError(
            self.name, f"{self.name} must be one of {named}, not {_shown(value)}", CHOICE
        )

    def _bounds(self) -> str:
        low = "" if self.low is None else f"{self.low:g}"
        high = "" if self.high is None else f"{self.high:g}"
        return f"{low}..{high}"


@dataclass(frozen=True)
class FieldTable:
    """One API surface's fields (a query string, or one message type's fields)."""

    surface: str  # e.g. "Deepgram /v1/listen query", "AssemblyAI UpdateConfiguration"
    fields: tuple[FieldSpec, ...]

    def __post_init__(self) -> None:
        names = [f.name for f in self.fields]
        if len(names) != len(set(names)):
            raise ValueError(f"{self.surface}: a field is listed twice")

    @property
    def names(self) -> frozenset[str]:
        return frozenset(f.name for f in self.fields)

    def __getitem__(self, name: str) -> FieldSpec:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)

    def check_json(self, obj: Mapping[str, Any], *, ignore: frozenset[str] = frozenset()) -> None:
        """Every field of ``obj`` this table names is checked, and every required one present
        (``ignore``: names the caller reads itself, e.g. ``type``)."""
        for f in self.fields:
            if f.name in ignore:
                continue
            if f.name not in obj:
                if f.required:
                    raise FieldError(f.name, f"{f.name} is required", MISSING)
                continue
            f.check_json(obj[f.name])

    def parse_query(self, values: Mapping[str, Sequence[str]]) -> dict[str, Any]:
        """A decoded query string's fields (name -> its values, in order), typed and checked:
        every field this table names that is present (a STRINGS field's values as a tuple, any
        other's one value, which may be repeated but not changed) and every required one.
        Names the table lacks are never looked at: the caller ignores them."""
        out: dict[str, Any] = {}
        for f in self.fields:
            if f.name not in values:
                if f.required:
                    raise FieldError(f.name, f"{f.name} is required")
                continue
            raw = values[f.name]
            if f.kind == STRINGS:
                if f.max_items is not None and len(raw) > f.max_items:
                    raise FieldError(
                        f.name, f"{f.name} is given {len(raw)} times, at most {f.max_items}"
                    )
                out[f.name] = tuple(f.parse_query(v) for v in raw)
            elif len(set(raw)) > 1:
                raise FieldError(f.name, f"{f.name} is given more than once with different values")
            else:
                out[f.name] = f.parse_query(raw[0])
        return out

    def parse_json(
        self, obj: Mapping[str, Any], *, ignore: frozenset[str] = frozenset()
    ) -> tuple[dict[str, Any], list[FieldError]]:
        """Every field of ``obj`` this table names, checked: the checked values of those that
        pass, and the error of each that does not (a required one missing among them), so a
        codec that refuses a message whole can name every reason."""
        values: dict[str, Any] = {}
        errors: list[FieldError] = []
        for f in self.fields:
            if f.name in ignore:
                continue
            if f.name not in obj:
                if f.required:
                    errors.append(FieldError(f.name, f"{f.name} is required"))
                continue
            try:
                values[f.name] = f.check_json(obj[f.name])
            except FieldError as exc:
                errors.append(exc)
        return values, errors

    def missing(self, present: Mapping[str, Any]) -> list[str]:
        """The required fields ``present`` lacks."""
        return [f.name for f in self.fields if f.required and f.name not in present]


class Recording(Mapping[str, Any]):
    """A read-only mapping that notes every key a parser looks at (tests compare the keys
    with the table: a field read but not in the table is a field read unchecked)."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data = dict(data)
        self.looked_at: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        self.looked_at.add(key)
        return self._data[key]

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.looked_at.add(key)
        return key in self._data

    def get(self, key: str, default: Any = None) -> Any:
        self.looked_at.add(key)
        return self._data.get(key, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
