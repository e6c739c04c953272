"""Deepgram's field tables (deepgram_fields) against the parsers that use them: each table
names exactly what its parser reads, every row's violations get Deepgram's documented error
(before the upgrade a 400 in Deepgram's error body, after it the codec's error message), every
valid edge value is accepted, and refusals are counted while the server keeps serving."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from kettle.streaming.protocols.base import ModelInfo, Send, Stop
from kettle.streaming.protocols.deepgram import configure as deepgram_configure
from kettle.streaming.protocols.deepgram import flux_wire as deepgram_flux_wire
from kettle.streaming.protocols.deepgram.fields import (
    FLUX_CONFIGURE,
    FLUX_MESSAGE,
    FLUX_QUERY,
    FLUX_THRESHOLDS,
    LIVE_CONFIGURE,
    LIVE_MESSAGE,
    LIVE_QUERY,
    MESSAGE_TABLES,
    PRERECORDED_QUERY,
    QUERY_TABLES,
)
from kettle.streaming.protocols.deepgram.flux import ROUTE as FLUX_ROUTE
from kettle.streaming.protocols.deepgram.flux_wire import Thresholds, flux_params
from kettle.streaming.protocols.deepgram.live import ROUTE as LIVE_ROUTE
from kettle.streaming.protocols.deepgram.rest import prerecorded_params
from kettle.streaming.protocols.deepgram.wire import (
    ListenParamError,
    listen_params,
    message_type,
)
from kettle.streaming.protocols.fields import (
    BOOL,
    ENUM,
    INT,
    NUMBER,
    OBJECT,
    STRING,
    STRINGS,
    FieldSpec,
    FieldTable,
    Recording,
)
from kettle.streaming.protocols.handshake import HandshakeRefused, HandshakeRequest
from kettle.streaming.server.server import KettleServer, ServerConfig
from kettle.transcribe.model.fake import FakeDecoder
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from tests.streaming.conftest import StartServer

MULTI = ModelInfo("large-v3", True)
KEY = "fields-key"
Parser = Callable[..., Any]

# name -> (table, parser of decoded values, the query every case starts from)
QUERIES: dict[str, tuple[FieldTable, Parser, dict[str, str]]] = {
    "live": (LIVE_QUERY, listen_params, {"encoding": "linear16", "sample_rate": "16000"}),
    "prerecorded": (PRERECORDED_QUERY, prerecorded_params, {}),
    "flux": (FLUX_QUERY, flux_params, {"model": "flux-general-en"}),
}
# Documented values kettle refuses after the table (a feature or encoding it does not have).
KETTLE_REFUSES = {
    **{
        (surface, "encoding", e): "encoding must be one of"
        for surface in ("live", "prerecorded")
        for e in ("linear32", "amr-nb", "amr-wb", "opus", "speex", "g729")
    },
    **{("flux", "encoding", e): "not containers" for e in ("linear32", "opus", "ogg-opus")},
    ("flux", "profanity_filter", "true"): "not supported",
    ("flux", "redact", "numbers"): "not supported",
    ("flux", "redact", "aggressive_numbers"): "not supported",
    ("flux", "redact", "a"): "not supported",
    **{
        ("live", "redact", v): "cannot redact"
        for v in ("true", "pci", "numbers", "aggressive_numbers", "ssn")
    },
    ("prerecorded", "redact", "a"): "cannot redact",
}
# Other fields a valid edge needs beside it (eager_eot_threshold is at most eot_threshold;
# raw audio needs its rate).
CONTEXT = {
    ("flux", "eager_eot_threshold"): {"eot_threshold": "1.0"},
    ("flux", "encoding"): {"sample_rate": "16000"},
    ("prerecorded", "encoding"): {"sample_rate": "16000"},
}
STRING_VALUES = {"language": "en"}  # a STRING kettle checks further (a language it knows)


def _number(x: float) -> str:
    return f"{x:g}"


def query_bad(spec: FieldSpec) -> list[str]:
    """Query texts the row refuses: the wrong type, out of range, not in the enum."""
    if spec.kind == BOOL:
        return ["maybe", "1"]
    if spec.kind == INT:
        out = ["x", "1.5", "1_000"]
        if spec.low is not None:
            out.append(str(int(spec.low) - 1))
        if spec.high is not None:
            out.append(str(int(spec.high) + 1))
        return out
    if spec.kind == NUMBER:
        out = ["x", "nan", "inf"]
        if spec.low is not None:
            out.append(_number(spec.low - 0.01))
        if spec.high is not None:
            out.append(_number(spec.high + 0.01))
        return out
    if spec.choices:  # ENUM, or STRINGS of choices
        return ["bogus"]
    return []


def query_good(spec: FieldSpec) -> list[str]:
    """Query texts the row accepts at its edges: low, high, each enum value, each literal."""
    out = list(spec.literals)
    if spec.kind == BOOL:
        out += ["true", "false", "TRUE"]
    elif spec.kind == INT:
        out += [str(int(b)) for b in (spec.low, spec.high) if b is not None]
    elif spec.kind == NUMBER:
        out += [_number(b) for b in (spec.low, spec.high) if b is not None]
    elif spec.choices:
        out += list(spec.choices)
    elif spec.kind == STRINGS:
        out.append("a")
    elif spec.kind == STRING:
        out.append(STRING_VALUES.get(spec.name, "x"))
    return out


def query_cases(pick: Callable[[FieldSpec], list[str]]) -> Iterator[Any]:
    for surface, (table, _, _) in QUERIES.items():
        for spec in table.fields:
            for value in pick(spec):
                yield pytest.param(surface, spec, value, id=f"{surface}-{spec.name}={value}")


def decoded(surface: str, name: str, value: str) -> dict[str, list[str]]:
    _, _, base = QUERIES[surface]
    values = {**base, **CONTEXT.get((surface, name), {}), name: value}
    return {k: [v] for k, v in values.items()}


# -- every table names exactly what its parser reads -------------------------------------------


def every_query_value(table: FieldTable) -> dict[str, list[str]]:
    """One accepted value of every row (and an undocumented parameter besides)."""
    values: dict[str, list[str]] = {"not_documented": ["1"]}
    for spec in table.fields:
        values[spec.name] = [query_good(spec)[0]]
    values["encoding"] = ["linear16"] if table is not FLUX_QUERY else ["mulaw"]
    return values


@pytest.mark.parametrize("surface", list(QUERIES))
def test_each_query_table_is_exactly_what_its_parser_reads(surface: str) -> None:
    table, parse, _ = QUERIES[surface]
    values = Recording(every_query_value(table))
    # (A feature kettle refuses is refused once the table has checked it: redact on Flux.)
    with contextlib.suppress(ListenParamError):
        parse(values, multilingual=True, model_name="large-v3")
    assert values.looked_at == set(table.names)


def test_each_message_table_is_exactly_what_its_parser_reads() -> None:
    message = Recording({"type": "Configure", "other": 1})
    assert message_type(message, LIVE_MESSAGE) == "Configure"
    assert message.looked_at == set(LIVE_MESSAGE.names)
    message = Recording({"type": "ForceEndTurn", "other": 1})
    assert message_type(message, FLUX_MESSAGE) == "ForceEndTurn"
    assert message.looked_at == set(FLUX_MESSAGE.names)

    live = Recording({"type": "Configure", "keyterms": ["a"], "features": {"punctuate": True}})
    deepgram_configure.parse_configure(live)
    assert live.looked_at == set(LIVE_CONFIGURE.names)  # (type is LIVE_MESSAGE's)

    thresholds = Recording(
        {"eot_threshold": 0.8, "eager_eot_threshold": 0.4, "eot_timeout_ms": 900}
    )
    flux = Recording(
        {
            "type": "Configure",
            "thresholds": thresholds,
            "keyterms": ["a"],
            "language_hints": [],
            "numerals": True,
            "other": 1,
        }
    )
    change = deepgram_flux_wire.parse_configure(flux, Thresholds())
    assert change.thresholds == Thresholds(0.8, 0.4, 900)
    assert flux.looked_at == set(FLUX_CONFIGURE.names)
    assert thresholds.looked_at == set(FLUX_THRESHOLDS.names)


def test_every_row_cites_deepgrams_reference() -> None:
    for table in (*QUERY_TABLES, *MESSAGE_TABLES):
        assert table.fields
        for spec in table.fields:
            assert spec.url.startswith("https://developers.deepgram.com/"), spec.name
    assert [t.names for t in QUERY_TABLES] and FLUX_QUERY["model"].required


# -- query violations: HTTP 400 in Deepgram's error body, before the upgrade -------------------

ROUTES = {"live": ("/v1/listen", LIVE_ROUTE), "flux": ("/v2/listen", FLUX_ROUTE)}


def refused(surface: str, values: dict[str, list[str]]) -> str:
    """The 400's message: the handshake's (live, Flux; checked for Deepgram's body shape) or
    the prerecorded parser's (its route renders the same body: test_refusals_are_counted)."""
    if surface == "prerecorded":
        with pytest.raises(ListenParamError) as error:
            prerecorded_params(values, multilingual=True, model_name="large-v3")
        return str(error.value)
    path, route = ROUTES[surface]
    query = urlencode([(k, v) for k, vs in values.items() for v in vs])
    with pytest.raises(HandshakeRefused) as info:
        route.prepare(HandshakeRequest(path, query, {"authorization": "Token k"}), MULTI)
    assert info.value.status == 400 and info.value.reason == "bad_query"
    assert route.refusal is not None
    body, content_type = route.refusal(400, info.value.message)
    assert content_type == "application/json"
    assert json.loads(body) == {"err_code": "Bad Request", "err_msg": info.value.message}
    return info.value.message


@pytest.mark.parametrize(("surface", "spec", "value"), list(query_cases(query_bad)))
def test_a_query_violation_is_refused_naming_the_field(
    surface: str, spec: FieldSpec, value: str
) -> None:
    assert spec.name in refused(surface, decoded(surface, spec.name, value))


@pytest.mark.parametrize(
    ("surface", "spec"),
    [
        pytest.param(s, f, id=f"{s}-{f.name}")
        for s, (table, _, _) in QUERIES.items()
        for f in table.fields
        if f.required
    ],
)
def test_a_required_parameter_missing_is_refused(surface: str, spec: FieldSpec) -> None:
    _, _, base = QUERIES[surface]
    values = {k: [v] for k, v in base.items() if k != spec.name}
    assert refused(surface, values) == f"{spec.name} is required"


def test_a_single_parameter_given_twice_differently_is_refused() -> None:
    values = {"encoding": ["linear16"], "sample_rate": ["16000", "8000"]}
    assert "more than once" in refused("live", values)
    # A list may repeat (tag=a&tag=b), and a single one repeat its value.
    values = {"model": ["flux-general-en"], "tag": ["a", "b"], "numerals": ["true", "true"]}
    flux_params(values, multilingual=True, model_name="large-v3")


@pytest.mark.parametrize(("surface", "spec", "value"), list(query_cases(query_good)))
def test_a_valid_edge_value_is_accepted(surface: str, spec: FieldSpec, value: str) -> None:
    table, parse, _ = QUERIES[surface]
    values = decoded(surface, spec.name, value)
    reason = KETTLE_REFUSES.get((surface, spec.name, value.lower()))
    if reason is None:
        parse(values, multilingual=True, model_name="large-v3")
    else:  # documented, but not a feature kettle has: refused for that, after the table
        with pytest.raises(ListenParamError, match=reason):
            parse(values, multilingual=True, model_name="large-v3")
        table.parse_query(values)  # the table itself takes it


# -- message violations: the codec's error message, after the upgrade --------------------------


def json_bad(spec: FieldSpec) -> list[Any]:
    """JSON values the row refuses."""
    bad: dict[str, list[Any]] = {
        BOOL: ["true", 1],
        INT: ["600", 1.5, True],
        NUMBER: ["0.8", True],
        ENUM: [5, "Bogus"],
        STRINGS: ["x", [1]],
        OBJECT: [[1], "x"],
        STRING: [5],
    }
    out = list(bad[spec.kind])
    if spec.kind in (INT, NUMBER):
        step = 1 if spec.kind == INT else 0.01
        out += [spec.low - step] if spec.low is not None else []
        out += [spec.high + step] if spec.high is not None else []
    if not spec.nullable:
        out.append(None)
    return out


def json_good(spec: FieldSpec) -> list[Any]:
    """JSON values the row accepts: edges, each enum value, empty lists, null."""
    good: dict[str, list[Any]] = {
        BOOL: [True, False],
        INT: [spec.low, spec.high],
        NUMBER: [spec.low, spec.high],
        ENUM: list(spec.choices),
        STRINGS: [[], ["a"]],
        OBJECT: [{}],
        STRING: ["x"],
    }
    return [v for v in good[spec.kind] if v is not None] + ([None] if spec.nullable else [])


def message_of(table: FieldTable, name: str, value: Any) -> dict[str, Any]:
    if table in (LIVE_MESSAGE, FLUX_MESSAGE):
        return {name: value}
    if table is FLUX_THRESHOLDS:
        context = {"eot_threshold": 1.0} if name == "eager_eot_threshold" else {}
        return {"type": "Configure", "thresholds": {**context, name: value}}
    return {"type": "Configure", name: value}


def message_cases(pick: Callable[[FieldSpec], list[Any]]) -> Iterator[Any]:
    for table in MESSAGE_TABLES:
        for spec in table.fields:
            for value in pick(spec):
                shown = json.dumps(value)
                yield pytest.param(table, spec, value, id=f"{table.surface}-{spec.name}={shown}")


def refusal_of(driven: Any, table: FieldTable) -> tuple[dict[str, Any], str | None] | None:
    """The codec's refusal among what it sent (None: none), as Deepgram documents each:
    /v1/listen a SchemaError Error (the socket stays open), Flux a Warning for a message of
    no known type and a ConfigureFailure for a Configure it cannot apply."""
    for obj, code in driven.sent:
        if obj["type"] == "Error" and obj.get("variant") == "SchemaError":
            return obj, code
        if obj["type"] == "Warning" and obj["code"] == "UNKNOWN_MESSAGE_TYPE":
            return obj, code
        if obj["type"] == "ConfigureFailure":
            return obj, code
    return None


def drive(table: FieldTable, message: dict[str, Any], live_codec: Any, flux_codec: Any) -> Any:
    driven = (live_codec if table in (LIVE_MESSAGE, LIVE_CONFIGURE) else flux_codec)()
    actions = driven.text(message)
    return driven, actions


@pytest.mark.parametrize(("table", "spec", "value"), list(message_cases(json_bad)))
def test_a_message_violation_gets_deepgrams_error(
    table: FieldTable, spec: FieldSpec, value: Any, live_codec: Any, flux_codec: Any
) -> None:
    driven, actions = drive(table, message_of(table, spec.name, value), live_codec, flux_codec)
    found = refusal_of(driven, table)
    assert found is not None, driven.sent
    obj, code = found
    assert code == "bad_message"  # counted as kettle_errors{code="bad_message"}
    expected = {
        LIVE_MESSAGE: "Error",
        LIVE_CONFIGURE: "Error",
        FLUX_MESSAGE: "Warning",
        FLUX_CONFIGURE: "ConfigureFailure",
        FLUX_THRESHOLDS: "ConfigureFailure",
    }[table]
    assert obj["type"] == expected
    if table is not FLUX_MESSAGE:
        assert spec.name in obj["description"]
    # None of these ends the stream: Deepgram answers and reads on.
    assert not any(isinstance(a, Send) and a.message.closing for a in actions)
    assert not any(isinstance(a, Stop) for a in actions)


@pytest.mark.parametrize("table", [LIVE_MESSAGE, FLUX_MESSAGE], ids=lambda t: t.surface)
def test_a_message_without_its_type_gets_deepgrams_error(
    table: FieldTable, live_codec: Any, flux_codec: Any
) -> None:
    driven, _ = drive(table, {"keyterms": []}, live_codec, flux_codec)
    found = refusal_of(driven, table)
    assert found is not None and found[1] == "bad_message"


@pytest.mark.parametrize(("table", "spec", "value"), list(message_cases(json_good)))
def test_a_valid_message_value_is_accepted(
    table: FieldTable, spec: FieldSpec, value: Any, live_codec: Any, flux_codec: Any
) -> None:
    driven, actions = drive(table, message_of(table, spec.name, value), live_codec, flux_codec)
    if (table, spec.name) == (FLUX_CONFIGURE, "language_hints") and value:
        # Documented, but kettle's multilingual Flux takes no hints: refused after the table.
        found = refusal_of(driven, table)
        assert found is not None and "not supported" in found[0]["description"]
        return
    assert refusal_of(driven, table) is None, driven.sent
    if value == "CloseStream":
        assert actions == [Stop()]
    if table in (LIVE_CONFIGURE, FLUX_CONFIGURE, FLUX_THRESHOLDS):
        assert driven.sent[-1][0]["type"] == "ConfigureSuccess"


# -- counted, and the server serves on ---------------------------------------------------------


async def test_refusals_are_counted_and_the_server_keeps_serving(
    start_server: StartServer,
) -> None:
    server: KettleServer = await start_server(
        ServerConfig(port=0, api_keys=(KEY,)), lambda: FakeDecoder()
    )
    ws = server.url.replace("http", "ws", 1)
    headers = {"Authorization": f"Token {KEY}"}
    for path, query in (
        ("/v2/listen", "encoding=linear16&sample_rate=16000"),  # no model
        ("/v1/listen", "encoding=linear16&sample_rate=16000&diarize_model=v9"),
    ):
        with pytest.raises(InvalidStatus) as info:
            async with connect(f"{ws}{path}?{query}", additional_headers=headers):
                pass
        assert info.value.response.status_code == 400
        body = json.loads(info.value.response.body or b"{}")
        assert body["err_code"] == "Bad Request" and body["err_msg"]
    rejected = {"reason": "bad_query"}
    assert server.metrics.value("kettle_sessions_rejected_total", rejected) == 2

    async with httpx.AsyncClient(timeout=60) as client:
        answer = await client.post(
            f"{server.url}/v1/listen?diarize_model=v9", content=b"x", headers=headers
        )
    assert answer.status_code == 400
    body = answer.json()
    assert body["err_code"] == "Bad Request" and "diarize_model" in body["err_msg"]
    assert body["request_id"]
    assert server.metrics.value("kettle_errors_total", {"code": "bad_query"}) == 1

    # After the upgrade: the error message, counted; the stream goes on and ends cleanly.
    live = f"{ws}/v1/listen?encoding=linear16&sample_rate=16000"
    async with connect(live, additional_headers=headers) as socket:
        await socket.send(json.dumps({"type": "Configure", "keyterms": "Kettle"}))
        error = json.loads(await socket.recv())
        assert (error["type"], error["variant"]) == ("Error", "SchemaError")
        await socket.send(b"\0\0" * 1600)
        await socket.send(json.dumps({"type": "CloseStream"}))
        last = None
        async for text in socket:
            last = json.loads(text)
        assert last is not None and last["type"] == "Metadata"
    assert socket.close_code == 1000
    flux = f"{ws}/v2/listen?model=flux-general-en"
    async with connect(flux, additional_headers=headers) as socket:
        assert json.loads(await socket.recv())["type"] == "Connected"
        await socket.send(json.dumps({"type": "Configure", "thresholds": {"eot_threshold": 2}}))
        failure = json.loads(await socket.recv())
        assert failure["type"] == "ConfigureFailure" and "eot_threshold" in failure["description"]
        await socket.send(json.dumps({"type": "CloseStream"}))
        async for _ in socket:
            pass
    assert socket.close_code == 1000
    assert server.metrics.value("kettle_errors_total", {"code": "bad_message"}) == 2
    assert server.metrics.value("kettle_sessions_rejected_total", rejected) == 2
