"""protocols/fields.py: each kind's accepted and refused edges (query text and JSON), the
reasons refusals carry, tables, and the Recording mapping."""

from __future__ import annotations

import math
from typing import Any

import pytest
from kettle.streaming.protocols import fields
from kettle.streaming.protocols.fields import FieldError, FieldSpec, FieldTable, Recording

URL = "https://example.com/reference"


def spec(kind: str, **kw: Any) -> FieldSpec:
    return FieldSpec("f", kind, URL, **kw)


def refused(call: Any, value: Any) -> str:
    with pytest.raises(FieldError) as info:
        call(value)
    assert info.value.field == "f" and str(info.value).startswith("f ")
    return info.value.reason


@pytest.mark.parametrize(
    ("row", "text", "value"),
    [
        (spec(fields.BOOL), "true", True),
        (spec(fields.BOOL), " FALSE ", False),
        (spec(fields.INT, low=0, high=10), "0", 0),
        (spec(fields.INT, low=0, high=10), "10", 10),
        (spec(fields.NUMBER, low=0, high=1), "0", 0.0),
        (spec(fields.NUMBER, low=0, high=1), "1.0", 1.0),
        (spec(fields.STRING, high=3), "abc", "abc"),
        (spec(fields.ENUM, choices=("a", "b")), "b", "b"),
        (spec(fields.STRINGS, choices=("a",)), "a", "a"),  # one item of a repeated parameter
    ],
)
def test_query_text_accepted(row: FieldSpec, text: str, value: Any) -> None:
    got = row.parse_query(text)
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize(
    ("row", "text", "reason"),
    [
        (spec(fields.BOOL), "1", fields.TYPE),
        (spec(fields.BOOL), "yes", fields.TYPE),
        (spec(fields.INT, low=0, high=10), "1.5", fields.TYPE),
        (spec(fields.INT, low=0, high=10), "-1", fields.TOO_LOW),
        (spec(fields.INT, low=0, high=10), "11", fields.TOO_HIGH),
        (spec(fields.NUMBER, low=0, high=1), "x", fields.TYPE),
        (spec(fields.NUMBER, low=0, high=1), "nan", fields.TYPE),
        (spec(fields.NUMBER, low=0, high=1), "inf", fields.TYPE),
        (spec(fields.NUMBER, low=0, high=1), "-0.001", fields.TOO_LOW),
        (spec(fields.NUMBER, low=0, high=1), "1.001", fields.TOO_HIGH),
        (spec(fields.STRING, high=3), "abcd", fields.LENGTH),
        (spec(fields.STRING, low=2), "a", fields.LENGTH),
        (spec(fields.ENUM, choices=("a", "b")), "c", fields.CHOICE),
        (spec(fields.STRINGS, choices=("a",)), "b", fields.CHOICE),
        (spec(fields.OBJECT), "{}", fields.VALUE),
        (spec(fields.FILE), "x", fields.VALUE),
    ],
)
def test_query_text_refused(row: FieldSpec, text: str, reason: str) -> None:
    assert refused(row.parse_query, text) == reason


@pytest.mark.parametrize(
    ("row", "value", "expected"),
    [
        (spec(fields.BOOL), False, False),
        (spec(fields.INT, low=0, high=10), 10, 10),
        (spec(fields.INT, low=0, high=10), 3.0, 3),  # JSON has one number type
        (spec(fields.NUMBER, low=0, high=1), 0, 0),
        (spec(fields.NUMBER, low=0, high=1), 1.0, 1.0),
        (spec(fields.STRING, high=3), "", ""),
        (spec(fields.STRING, high=3), "abc", "abc"),
        (spec(fields.ENUM, choices=("a", "b")), "a", "a"),
        (spec(fields.STRINGS), [], ()),
        (spec(fields.STRINGS, choices=("a", "b"), max_items=2), ["a", "b"], ("a", "b")),
        (spec(fields.OBJECT), {"k": 1}, {"k": 1}),
        (spec(fields.OBJECT), Recording({}), {}),  # any mapping
        (spec(fields.NUMBER, nullable=True), None, None),
        (spec(fields.OBJECT, nullable=True), None, None),
    ],
)
def test_json_accepted(row: FieldSpec, value: Any, expected: Any) -> None:
    assert row.check_json(value) == expected


@pytest.mark.parametrize(
    ("row", "value", "reason"),
    [
        (spec(fields.BOOL), 1, fields.TYPE),
        (spec(fields.BOOL), "true", fields.TYPE),
        (spec(fields.BOOL), None, fields.TYPE),
        (spec(fields.INT), True, fields.TYPE),
        (spec(fields.INT), 1.5, fields.TYPE),
        (spec(fields.INT), "1", fields.TYPE),
        (spec(fields.INT, low=40), 39, fields.TOO_LOW),
        (spec(fields.INT, high=10), 11, fields.TOO_HIGH),
        (spec(fields.NUMBER), False, fields.TYPE),
        (spec(fields.NUMBER), "0.5", fields.TYPE),
        (spec(fields.NUMBER), math.inf, fields.TYPE),
        (spec(fields.NUMBER, low=0), -0.01, fields.TOO_LOW),
        (spec(fields.NUMBER, high=1), 1.01, fields.TOO_HIGH),
        (spec(fields.STRING), 5, fields.TYPE),
        (spec(fields.STRING, high=3), "abcd", fields.LENGTH),
        (spec(fields.ENUM, choices=("a",)), 1, fields.TYPE),
        (spec(fields.ENUM, choices=("a",)), "A", fields.CHOICE),
        (spec(fields.STRINGS), "a", fields.TYPE),
        (spec(fields.STRINGS), ["a", 1], fields.TYPE),
        (spec(fields.STRINGS, max_items=2), ["a"] * 3, fields.TOO_MANY),
        (spec(fields.STRINGS, choices=("a",)), ["a", "b"], fields.CHOICE),
        (spec(fields.STRINGS, high=2), ["abc"], fields.LENGTH),
        (spec(fields.OBJECT), [], fields.TYPE),
        (spec(fields.OBJECT), None, fields.TYPE),
        (spec(fields.FILE), b"x", fields.TYPE),
    ],
)
def test_json_refused(row: FieldSpec, value: Any, reason: str) -> None:
    assert refused(row.check_json, value) == reason


@pytest.mark.parametrize(
    "kw",
    [
        {"kind": "float"},
        {"kind": fields.ENUM},  # no choices
        {"kind": fields.INT, "choices": ("1",)},
        {"kind": fields.STRING, "url": "http://example.com"},
        {"kind": fields.STRING, "url": "platform.openai.com/docs"},
    ],
)
def test_malformed_rows_are_refused(kw: dict[str, Any]) -> None:
    args = {"kind": fields.STRING, "url": URL, **kw}
    with pytest.raises(ValueError):
        FieldSpec("f", args.pop("kind"), args.pop("url"), **args)


def test_a_kettle_extension_row_points_at_its_docs_page() -> None:
    assert FieldSpec("kettle_x", fields.BOOL, "docs/operating.md").url == "docs/operating.md"


def test_table() -> None:
    table = FieldTable(
        "surface",
        (
            FieldSpec("type", fields.ENUM, URL, required=True, choices=("t",)),
            FieldSpec("n", fields.INT, URL, low=0),
        ),
    )
    assert table.names == {"type", "n"} and table["n"].low == 0
    with pytest.raises(KeyError):
        table["m"]
    table.check_json({"type": "t", "n": 0, "other": "not checked"})
    with pytest.raises(FieldError) as info:
        table.check_json({"n": 1})
    assert (info.value.field, info.value.reason) == ("type", fields.MISSING)
    table.check_json({"n": 1}, ignore=frozenset({"type"}))
    with pytest.raises(FieldError) as info:
        table.check_json({"type": "t", "n": -1})
    assert (info.value.field, info.value.reason) == ("n", fields.TOO_LOW)
    assert table.missing({"n": 1}) == ["type"] and table.missing({"type": "t"}) == []
    with pytest.raises(ValueError):
        FieldTable("twice", (table["n"], table["n"]))


def test_recording_notes_every_key_looked_at() -> None:
    data = Recording({"a": 1, "b": 2, "c": 3})
    assert data["a"] == 1
    assert data.get("x") is None and data.get("y", 5) == 5
    assert "b" in data and 7 not in data  # (only string keys are field names)
    assert data.looked_at == {"a", "x", "y", "b"}
    # Iterating, or asking for the size, looks at no field's value.
    assert list(data) == ["a", "b", "c"] and len(data) == 3
    assert data.looked_at == {"a", "x", "y", "b"}
    with pytest.raises(KeyError):
        data["z"]
    assert "z" in data.looked_at
    # Reading a value through the Mapping API (items(), values()) looks at it too.
    dict(data.items())
    assert data.looked_at >= {"a", "b", "c"}
