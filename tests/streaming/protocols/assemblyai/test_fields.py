"""AssemblyAI v3 against its field tables (assemblyai_fields): the parsers read exactly the
tables' fields, every violation a row allows gets AssemblyAI's documented error (HTTP 400 with
``{"error": ...}`` at the handshake, counted as kettle_sessions_rejected{reason="bad_query"};
Error 3006 and a 3006 close after it, counted as kettle_errors{code="bad_message"}), and every
valid edge value is taken with the session going on."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import pytest
from kettle.streaming.core.events import Done
from kettle.streaming.protocols.assemblyai import fields
from kettle.streaming.protocols.assemblyai import live as assemblyai
from kettle.streaming.protocols.assemblyai.live import AssemblyAICodec
from kettle.streaming.protocols.assemblyai.wire import (
    parse_client_message,
    parse_query,
    stream_params,
)
from kettle.streaming.protocols.base import (
    AudioReceived,
    CodecContext,
    Finalize,
    Limits,
    ModelInfo,
    Reconfigure,
    Send,
    Stop,
)
from kettle.streaming.protocols.fields import FieldSpec, Recording
from kettle.streaming.protocols.handshake import Prepared
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

ROUTE = assemblyai.ROUTE
AUDIO = b"\x00\x00" * 1600  # 100 ms at 16 kHz
# Rows whose valid values the row alone does not give: names kettle checks further.
QUERY_EDGES: dict[str, list[str]] = {
    "speech_model": [
        "universal-streaming-english",
        "universal-streaming-multilingual",
        "whisper-rt",
        "u3-rt-pro",
        "universal-3-6-pro",
    ],
    "language_code": ["", "es", "en-US", "multi"],
    "language_codes": ["[]", '["es"]', '["en", "es"]', "es"],
}
# The StreamParams attribute each directly applied parameter lands in.
APPLIED = {
    "sample_rate": "sample_rate",
    "encoding": "encoding",
    "format_turns": "format_turns",
    "language_detection": "language_detection",
    "speaker_labels": "speaker_labels",
    "max_speakers": "max_speakers",
    "kettle_revisions": "revisions",
}


def edges_of(spec: FieldSpec) -> list[str]:
    return QUERY_EDGES.get(spec.name) or query_edges(spec)


def codec() -> AssemblyAICodec:
    context = CodecContext("sid", ModelInfo("base", True, speakers=True), Limits())
    params = parse_query("speech_model=universal-streaming-english", multilingual=True)
    return AssemblyAICodec(context, params)


def message(kind: str, **extra: Any) -> str:
    return json.dumps({"type": kind, **extra})


# -- the tables are what the parsers read ---------------------------------------------------


def test_the_query_parser_reads_exactly_the_query_table() -> None:
    pairs = Recording({spec.name: [edges_of(spec)[-1]] for spec in fields.QUERY.fields})
    stream_params(pairs, multilingual=True, speakers=True)
    assert pairs.looked_at == fields.QUERY.names
    # A parameter no row names is not looked at (ignored, as AssemblyAI's unknown ones are).
    extra = Recording({"formatted_finals": ["true"], "sample_rate": ["16000"]})
    stream_params(extra, multilingual=True)
    assert "formatted_finals" not in extra.looked_at


@pytest.mark.parametrize("table", list(fields.MESSAGES.values()), ids=lambda t: t.surface)
def test_each_message_parser_reads_exactly_its_table(table: Any) -> None:
    obj = Recording({spec.name: json_edges(spec)[-1] for spec in table.fields} | {"other": 1})
    parse_client_message(obj)
    assert obj.looked_at == table.names


def test_every_row_cites_the_reference() -> None:
    for table in fields.TABLES:
        assert table.fields
        for spec in table.fields:
            assert spec.url.startswith(CITED), spec
    assert cited_sections({s.url for t in fields.TABLES for s in t.fields}) <= protocol_anchors()


CITED = ("https://www.assemblyai.com/docs/", "https://github.com/AssemblyAI/", "docs/protocol.md#")


# -- the handshake: HTTP 400 in AssemblyAI's shape, counted --------------------------------


QUERY_VIOLATIONS = query_violation_params(fields.QUERY)
QUERY_EDGE_CASES = query_edge_params(fields.QUERY, edges_of)


@pytest.mark.parametrize(("name", "raw"), QUERY_VIOLATIONS)
def test_a_query_violation_is_refused_with_400(handshakes: Any, name: str, raw: str) -> None:
    h = handshakes()
    refusal = h.check(ROUTE, urlencode({name: raw}))
    assert isinstance(refusal, Refusal), refusal
    assert (refusal.status, refusal.reason) == (400, "bad_query")
    assert name in refusal.message
    assert ROUTE.refusal is not None
    body, kind = ROUTE.refusal(refusal.status, refusal.message)
    assert kind == "application/json" and json.loads(body) == {"error": refusal.message}
    assert h.rejected() == 1


@pytest.mark.parametrize(("name", "raw"), QUERY_EDGE_CASES)
def test_a_valid_query_edge_is_accepted(handshakes: Any, name: str, raw: str) -> None:
    h = handshakes()
    decision = h.check(ROUTE, urlencode({name: raw}))
    assert isinstance(decision, Prepared), decision
    assert h.rejected() == 0
    c = decision.make_codec(CodecContext("sid", h.model))
    assert isinstance(c, AssemblyAICodec)
    if name in APPLIED:  # nothing lost: the value is the stream's setting
        spec = fields.QUERY[name]
        expected = spec.parse_query(raw)
        if name == "encoding":
            expected = expected.lower()
        assert getattr(c.params, APPLIED[name]) == expected
    assert c.on_binary(AUDIO)  # the session goes on


@pytest.mark.parametrize(
    ("query", "fragment"),
    [
        ("speech_model=nova-3", "speech_model"),  # not a streaming model's name
        ("language_code=klingon", "klingon"),  # a language kettle's models do not know
        ("language_codes=%5B%22tlh%22%5D", "tlh"),
        ("speaker_labels=true", "speaker model"),  # on a server without a speaker model
    ],
)
def test_what_kettle_checks_beyond_the_rows_is_400_too(
    handshakes: Any, query: str, fragment: str
) -> None:
    h = handshakes(speakers=False)
    refusal = h.check(ROUTE, query)
    assert isinstance(refusal, Refusal) and refusal.status == 400
    assert fragment in refusal.message and h.rejected() == 1


def test_the_same_value_twice_is_one_and_different_values_are_refused(handshakes: Any) -> None:
    h = handshakes()
    assert isinstance(h.check(ROUTE, "sample_rate=8000&sample_rate=8000"), Prepared)
    refusal = h.check(ROUTE, "format_turns=true&format_turns=false")
    assert isinstance(refusal, Refusal) and refusal.status == 400
    assert "format_turns" in refusal.message and h.rejected() == 1


def test_keyterms_as_json_list_or_repeated() -> None:
    query = urlencode([("keyterms_prompt", '["a", "b"]'), ("keyterms_prompt", "c")])
    assert parse_query(query, multilingual=True).keyterms == ("a", "b", "c")
    assert parse_query(
        "keyterms_prompt=%5B%22%5Bbracketed%5D%22%5D", multilingual=True
    ).keyterms == ("[bracketed]",)


# -- client messages: Error 3006 and a 3006 close, counted ---------------------------------


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


def closed_with_3006(c: AssemblyAICodec, actions: list[Any]) -> str:
    """The codec's answer to a message that ends the session: the stream stops (its turns
    still come), then at Done the Error, counted, and the close with 3006."""
    assert actions == [Stop(assemblyai.CLIENT_ERROR)]
    (action,) = c.on_event(Done(0, 0, assemblyai.CLIENT_ERROR), AudioReceived())
    assert isinstance(action, Send) and action.error_code == "bad_message"  # kettle_errors
    assert action.message.closing and action.message.close_code == 3006
    body = json.loads(action.message.text)
    assert set(body) == {"type", "error_code", "error"}
    assert (body["type"], body["error_code"]) == ("Error", 3006)
    error: str = body["error"]
    assert error.startswith("Invalid Message")
    return error


@pytest.mark.parametrize(("kind", "name", "value"), MESSAGE_VIOLATIONS)
def test_a_message_violation_closes_with_3006(
    allow: AllowGate, kind: str, name: str, value: Any
) -> None:
    c = codec()
    c.on_binary(AUDIO)
    error = closed_with_3006(c, c.on_text(json.dumps({"type": kind, name: value}), allow))
    assert name.lower() in error.lower()
    assert c.on_text(message("ForceEndpoint"), allow) == []  # closed: nothing more is read
    assert c.on_binary(AUDIO) == []


@pytest.mark.parametrize(("kind", "name"), REQUIRED)
def test_a_message_without_a_required_field_closes_with_3006(
    allow: AllowGate, kind: str, name: str
) -> None:
    obj = {"type": kind, "keyterms_prompt": ["x"]}
    del obj[name]
    c = codec()
    closed_with_3006(c, c.on_text(json.dumps(obj), allow))


@pytest.mark.parametrize(("kind", "name", "value"), MESSAGE_EDGES)
def test_a_valid_message_edge_is_accepted(
    allow: AllowGate, kind: str, name: str, value: Any
) -> None:
    c = codec()
    c.on_binary(AUDIO)
    actions = c.on_text(json.dumps({"type": kind, name: value}), allow)
    assert not any(isinstance(a, Send) for a in actions)
    if kind == "Terminate":
        assert actions == [Stop()]  # the API ends the session here
        return
    assert c.on_text(message("ForceEndpoint"), allow) == [Finalize()]  # the session goes on


def test_keyterms_prompt_as_a_string_is_refused(allow: AllowGate) -> None:
    # The report of issue 38: the API types it as a list of strings; a string was taken as
    # one term.
    c = codec()
    error = closed_with_3006(
        c, c.on_text(message("UpdateConfiguration", keyterms_prompt="kettle"), allow)
    )
    assert "keyterms_prompt must be a list of strings" in error
    assert c.params.keyterms == ()


def test_a_refused_update_changes_nothing(allow: AllowGate) -> None:
    c = codec()
    before = c.params
    update = message("UpdateConfiguration", max_turn_silence=900, min_turn_silence="400")
    error = closed_with_3006(c, c.on_text(update, allow))
    assert "min_turn_silence must be an integer" in error
    assert c.params == before


def test_update_nulls_are_not_given_and_values_apply(allow: AllowGate) -> None:
    c = codec()
    nulls = {spec.name: None for spec in fields.UPDATE_CONFIGURATION.fields if spec.nullable}
    assert c.on_text(message("UpdateConfiguration", **nulls), allow) == []
    update = message(
        "UpdateConfiguration",
        keyterms_prompt=["Kettle"],
        min_turn_silence=300,
        max_turn_silence=1300,
        end_of_turn_confidence_threshold=0,
        format_turns=True,
        vad_threshold=0.5,
        prompt="ignored",
    )
    assert c.on_text(update, allow) == [Reconfigure(keyterms=("Kettle",), endpoint_silence_ms=300)]
    assert c.params.format_turns and c.params.keyterms == ("Kettle",)
    # The older name of min_turn_silence still counts; the newer wins when both come.
    both = message(
        "UpdateConfiguration", min_turn_silence=500, min_end_of_turn_silence_when_confident=700
    )
    assert c.on_text(both, allow) == [Reconfigure(endpoint_silence_ms=500)]
