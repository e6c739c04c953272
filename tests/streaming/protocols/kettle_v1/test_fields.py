"""kettle v1 against its field tables (protocols/kettle_v1/fields.py, from docs/protocol.md):
the parsers read exactly the tables' fields, every violation a row allows gets the protocol's
error (HTTP 400 at the handshake, counted as kettle_sessions_rejected{reason="bad_query"}; a
non-fatal `error` with `bad_message` for a message, counted as
kettle_errors{code="bad_message"}, the settings as they were and the session going on), and
every valid edge value is taken."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import pytest
from kettle.streaming.protocols.base import CodecContext, Finalize, ModelInfo, Send, Stop
from kettle.streaming.protocols.fields import FieldSpec, Recording
from kettle.streaming.protocols.handshake import Prepared
from kettle.streaming.protocols.kettle_v1 import fields
from kettle.streaming.protocols.kettle_v1 import live as kettle_v1
from kettle.streaming.protocols.kettle_v1 import wire as proto
from kettle.streaming.protocols.kettle_v1.live import KettleV1Codec
from kettle.streaming.server.gate import Refusal

from tests.streaming.protocols.conftest import (
    AllowGate,
    cited_sections,
    json_edges,
    json_violations,
    protocol_anchors,
    query_edge_params,
    query_edges,
    query_violation_params,
)

ROUTE = kettle_v1.ROUTE
MODEL = ModelInfo("base", True, speakers=True)
# The StreamSettings attribute each settings field lands in.
SETTING = {"sample_rate": "requested_sample_rate"}


def codec() -> KettleV1Codec:
    return KettleV1Codec(CodecContext("sid", MODEL), proto.StreamSettings())


def normalized(spec: FieldSpec, value: Any) -> Any:
    """What a valid value becomes in the settings (a language in lowercase)."""
    return value.lower() if spec.name == "language" and isinstance(value, str) else value


# -- the tables are what the parsers read ---------------------------------------------------


def test_the_query_parser_reads_exactly_the_query_table() -> None:
    pairs = Recording({spec.name: [query_edges(spec)[-1]] for spec in fields.QUERY.fields})
    proto.query_params(pairs)
    assert pairs.looked_at == fields.QUERY.names
    extra = Recording({"partials": ["false"], "x": ["1"]})  # config-only, unknown: not read
    proto.query_params(extra)
    assert not extra.looked_at & {"partials", "x"}


@pytest.mark.parametrize("table", list(fields.MESSAGES.values()), ids=lambda t: t.surface)
def test_each_message_parser_reads_exactly_its_table(table: Any) -> None:
    obj = Recording({spec.name: json_edges(spec)[-1] for spec in table.fields} | {"future": 1})
    proto.parse_message_object(obj)
    assert obj.looked_at == table.names


def test_every_row_cites_a_section_of_the_protocol() -> None:
    sections = {fields.CONNECTING, fields.CLIENT_TO_SERVER}
    for table in fields.TABLES:
        assert {spec.url for spec in table.fields} <= sections, table.surface
    assert cited_sections(sections) <= protocol_anchors()


# -- the handshake: HTTP 400, counted ------------------------------------------------------


QUERY_VIOLATIONS = query_violation_params(fields.QUERY)
QUERY_EDGES = query_edge_params(fields.QUERY)


@pytest.mark.parametrize(("name", "raw"), QUERY_VIOLATIONS)
def test_a_query_violation_is_refused_with_400(handshakes: Any, name: str, raw: str) -> None:
    h = handshakes()
    refusal = h.check(ROUTE, urlencode({name: raw}))
    assert isinstance(refusal, Refusal), refusal
    assert (refusal.status, refusal.reason) == (400, "bad_query")
    assert name in refusal.message
    assert ROUTE.refusal is None  # plain text, as docs/protocol.md's other refusals
    assert h.rejected() == 1


@pytest.mark.parametrize(("name", "raw"), QUERY_EDGES)
def test_a_valid_query_edge_is_accepted(handshakes: Any, name: str, raw: str) -> None:
    h = handshakes()
    decision = h.check(ROUTE, urlencode({name: raw}))
    assert isinstance(decision, Prepared), decision
    assert h.rejected() == 0
    spec = fields.QUERY[name]
    if name == "token":
        assert proto.parse_query(urlencode({name: raw})).token == spec.parse_query(raw)
        return
    c = decision.make_codec(CodecContext("sid", h.model))
    assert isinstance(c, KettleV1Codec)
    expected = normalized(spec, spec.parse_query(raw))
    assert getattr(c.settings, SETTING.get(name, name)) == expected  # nothing lost
    assert c.on_text('{"type": "finalize"}', AllowGate()) == [Finalize()]


def test_a_parameter_given_twice_is_refused(handshakes: Any) -> None:
    h = handshakes()
    refusal = h.check(ROUTE, "channels=1&channels=1")
    assert isinstance(refusal, Refusal) and "channels: given more than once" in refusal.message


# -- client messages: a non-fatal bad_message, counted ---------------------------------------


MESSAGE_VIOLATIONS = [
    pytest.param(kind, spec.name, value, id=f"{kind}.{spec.name}-{why}")
    for kind, table in fields.MESSAGES.items()
    for spec in table.fields
    for why, value in json_violations(spec)
]
MESSAGE_EDGES = [
    pytest.param(kind, spec.name, value, id=f"{kind}.{spec.name}={json.dumps(value)[:20]}")
    for kind, table in fields.MESSAGES.items()
    for spec in table.fields
    for value in json_edges(spec)
]
REQUIRED = [
    pytest.param(kind, spec.name, id=f"{kind}.{spec.name}")
    for kind, table in fields.MESSAGES.items()
    for spec in table.fields
    if spec.required
]


def bad_message(actions: list[Any]) -> str:
    (action,) = actions
    assert isinstance(action, Send) and action.error_code == "bad_message"  # kettle_errors
    assert not action.message.closing and not action.message.fatal
    body = json.loads(action.message.text)
    assert set(body) == {"type", "code", "message"}
    assert (body["type"], body["code"]) == ("error", "bad_message")
    message: str = body["message"]
    return message


@pytest.mark.parametrize(("kind", "name", "value"), MESSAGE_VIOLATIONS)
def test_a_message_violation_is_bad_message_and_the_session_goes_on(
    allow: AllowGate, kind: str, name: str, value: Any
) -> None:
    c = codec()
    # A valid field beside the bad one does not apply either: the config is refused whole.
    text = json.dumps({"type": kind, "encoding": "mulaw", name: value})
    assert name in bad_message(c.on_text(text, allow))
    assert c.settings == proto.StreamSettings()
    assert c.on_text('{"type": "config", "channels": 2}', allow) == []  # a correction applies
    assert c.settings.channels == 2
    assert c.on_text('{"type": "finalize"}', allow) == [Finalize()]


@pytest.mark.parametrize(("kind", "name"), REQUIRED)
def test_a_message_without_a_required_field_is_bad_message(
    allow: AllowGate, kind: str, name: str
) -> None:
    obj = {"type": kind, "partials": False}
    del obj[name]
    c = codec()
    assert "'type'" in bad_message(c.on_text(json.dumps(obj), allow))
    assert c.settings == proto.StreamSettings()


@pytest.mark.parametrize(("kind", "name", "value"), MESSAGE_EDGES)
def test_a_valid_message_edge_is_accepted(
    allow: AllowGate, kind: str, name: str, value: Any
) -> None:
    c = codec()
    actions = c.on_text(json.dumps({"type": kind, name: value}), allow)
    expected = {"finalize": [Finalize()], "stop": [Stop()]}.get(kind, [])
    assert actions == expected
    if kind == "config" and name != "type":
        spec = fields.CONFIG[name]
        assert getattr(c.settings, SETTING.get(name, name)) == normalized(spec, value)
    if kind != "stop":
        assert c.on_text('{"type": "finalize"}', allow) == [Finalize()]  # the session goes on


def test_an_integral_float_is_not_an_integer_here(allow: AllowGate) -> None:
    # docs/protocol.md#config: "an integer"; kettle has always refused 16000.0
    # (test_kettle_v1_wire).
    c = codec()
    assert "sample_rate must be an integer" in bad_message(
        c.on_text('{"type": "config", "sample_rate": 16000.0}', allow)
    )
