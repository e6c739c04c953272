"""Fixtures and helpers shared by the codec tests: Deepgram's live and Flux codecs driven by
text messages (with what they sent decoded), a rate gate that lets everything through, the
connection gate that refuses (and counts) handshakes, and the cases a field table's rows give:
each row's violations and valid edge values, derived from its kind, bounds and choices."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kettle.streaming.protocols.base import (
    Action,
    CodecContext,
    FeedAudio,
    Limits,
    ModelInfo,
    Send,
)
from kettle.streaming.protocols.deepgram.flux import DeepgramFluxCodec
from kettle.streaming.protocols.deepgram.flux_wire import parse_flux_query
from kettle.streaming.protocols.deepgram.live import DeepgramLiveCodec
from kettle.streaming.protocols.deepgram.wire import parse_listen_query
from kettle.streaming.protocols.fields import (
    BOOL,
    ENUM,
    INT,
    NUMBER,
    STRING,
    STRINGS,
    FieldSpec,
    FieldTable,
)
from kettle.streaming.protocols.handshake import HandshakeRequest, Prepared, ProtocolRoute
from kettle.streaming.protocols.openai.models import MODEL_ALIASES
from kettle.streaming.protocols.openai.realtime import RealtimeCodec
from kettle.streaming.server.access import Authenticator
from kettle.streaming.server.gate import ConnectionGate, Refusal
from kettle.streaming.server.hosts import HostPolicy
from kettle.streaming.server.metrics import ServerMetrics
from kettle.streaming.server.origins import OriginPolicy

from tests.conftest import heading_anchors

SESSION = "0123456789abcdef0123456789abcdef"
MODEL = ModelInfo("tiny.en", False)


class AllowAll:
    """A rate gate that lets every message through."""

    def check(self) -> str:
        return "allow"


@dataclass
class Driven:
    """A codec, and every message it sent with the error code it was counted under."""

    codec: DeepgramLiveCodec | DeepgramFluxCodec
    sent: list[tuple[dict[str, Any], str | None]] = field(default_factory=list)

    def take(self, actions: list[Action]) -> list[Action]:
        for action in actions:
            if isinstance(action, Send) and action.message.text:
                self.sent.append((json.loads(action.message.text), action.error_code))
        return actions

    def text(self, obj: Any) -> list[Action]:
        raw = obj if isinstance(obj, str) else json.dumps(obj)
        return self.take(self.codec.on_text(raw, AllowAll()))


def _context() -> CodecContext:
    return CodecContext(SESSION, MODEL, Limits(1 << 20, 20.0))


@pytest.fixture
def live_codec() -> Any:
    """A factory: a Deepgram live codec on the query's settings (raw 16 kHz audio)."""

    def make(query: str = "encoding=linear16&sample_rate=16000") -> Driven:
        params = parse_listen_query(query, multilingual=False, model_name=MODEL.name)
        return Driven(DeepgramLiveCodec(_context(), params, created="2025-01-01T00:00:00.000Z"))

    return make


@pytest.fixture
def flux_codec() -> Any:
    """A factory: a Deepgram Flux codec on the query's settings (flux-general-en)."""

    def make(query: str = "model=flux-general-en") -> Driven:
        params = parse_flux_query(query, multilingual=False, model_name=MODEL.name)
        driven = Driven(DeepgramFluxCodec(_context(), params))
        driven.take(driven.codec.start())
        return driven

    return make


PROTOCOL_DOC = Path(__file__).resolve().parents[3] / "docs" / "protocol.md"


def protocol_anchors() -> set[str]:
    """The section anchors of docs/protocol.md (kettle v1's contract) as GitHub makes them."""
    return heading_anchors(PROTOCOL_DOC)


def cited_sections(urls: set[str]) -> set[str]:
    return {url.partition("#")[2] for url in urls if url.startswith("docs/protocol.md#")}


class AllowGate:
    """A rate gate with room for every message."""

    def check(self) -> str:
        return "allow"


@pytest.fixture
def allow() -> AllowGate:
    return AllowGate()


@dataclass
class Handshakes:
    """Handshakes through a ConnectionGate (no keys, any origin) with its own metrics."""

    model: ModelInfo
    metrics: ServerMetrics
    gate: ConnectionGate

    def check(self, route: ProtocolRoute, query: str) -> Refusal | Prepared:
        return self.gate.check(route, HandshakeRequest(route.path, query))

    def rejected(self, reason: str = "bad_query") -> float:
        return self.metrics.value("kettle_sessions_rejected_total", {"reason": reason})


@pytest.fixture
def handshakes() -> Callable[..., Handshakes]:
    """``handshakes(multilingual=True, speakers=True)``: a gate serving such a model."""

    def make(*, multilingual: bool = True, speakers: bool = True) -> Handshakes:
        model = ModelInfo("base", multilingual, speakers=speakers)
        metrics = ServerMetrics()
        gate = ConnectionGate(
            authenticator=Authenticator(),
            origins=OriginPolicy(),
            hosts=HostPolicy(),
            metrics=metrics,
            limits=Limits(max_sessions=4),
            retry_after_s=1,
            draining=lambda: False,
            model_info=lambda: model,
        )
        return Handshakes(model, metrics, gate)

    return make


# -- the cases a row gives ----------------------------------------------------------------


def json_violations(spec: FieldSpec) -> list[tuple[str, Any]]:
    """(what is wrong, a JSON value of the wrong type, out of range or not in the enum)."""
    wrong: list[tuple[str, Any]] = [] if spec.nullable else [("null", None)]
    low, high = spec.low, spec.high
    if spec.kind == BOOL:
        wrong += [("string", "true"), ("number", 1)]
    elif spec.kind in (INT, NUMBER):
        wrong += [("string", "1"), ("boolean", True), ("list", [1])]
        if spec.kind == INT:
            wrong.append(("fraction", (low or 0) + 0.5))
            if not spec.integral_floats:
                wrong.append(("a float", float(low or 1)))
        step = 1 if spec.kind == INT else 0.01
        if low is not None:
            wrong.append(("under", low - step))
        if high is not None:
            wrong.append(("over", high + step))
    elif spec.kind == STRING:
        wrong += [("number", 5), ("list", ["x"])]
        if low:
            wrong.append(("too short", "x" * (int(low) - 1)))
        if high is not None:
            wrong.append(("too long", "x" * (int(high) + 1)))
    elif spec.kind == ENUM:
        wrong += [("number", 5), ("not a choice", "no-such-" + spec.choices[0])]
    elif spec.kind == STRINGS:
        wrong += [("a string", "x"), ("a number in it", ["x", 1]), ("object", {"x": 1})]
        if high is not None:
            wrong.append(("an item too long", ["x" * (int(high) + 1)]))
        if spec.max_items is not None:
            wrong.append(("too many", [f"t{i}" for i in range(spec.max_items + 1)]))
    return wrong


def json_edges(spec: FieldSpec) -> list[Any]:
    """Valid JSON values at the edges of a row."""
    edges: list[Any] = [None] if spec.nullable else []
    if spec.kind == BOOL:
        edges += [True, False]
    elif spec.kind in (INT, NUMBER):
        edges += [b for b in (spec.low, spec.high) if b is not None] or [1]
        if spec.kind == INT:
            edges = [int(e) if isinstance(e, float) else e for e in edges]
    elif spec.kind == STRING:
        edges += ["x" * int(spec.low or 0), "x" * int(spec.high or 40)]
    elif spec.kind == ENUM:
        edges += list(dict.fromkeys([spec.choices[0], spec.choices[-1]]))
        if spec.fold_case:
            edges.append(spec.choices[-1].upper())
    elif spec.kind == STRINGS:
        edges += [[], ["x" * int(spec.high or 40)]]
        if spec.max_items is not None:
            edges.append([f"t{i}" for i in range(spec.max_items)])
    return edges


def query_violations(spec: FieldSpec) -> list[tuple[str, str]]:
    """(what is wrong, a query value that is)."""
    wrong: list[tuple[str, str]] = []
    low, high = spec.low, spec.high
    if spec.kind == BOOL:
        wrong += [("not a boolean", "yes"), ("a number", "1"), ("empty", "")]
    elif spec.kind in (INT, NUMBER):
        wrong += [("not a number", "abc"), ("empty", "")]
        if spec.kind == INT:
            base = int(low or 0)
            wrong += [("fraction", f"{base}.5"), ("underscored", f"1_{base}")]
        else:
            wrong += [("nan", "nan"), ("infinite", "inf")]
        step = 1 if spec.kind == INT else 0.01
        if low is not None:
            wrong.append(("under", f"{low - step:g}"))
        if high is not None:
            wrong.append(("over", f"{high + step:g}"))
    elif spec.kind == STRING:
        if low:
            wrong.append(("too short", "x" * (int(low) - 1)))
        if high is not None:
            wrong.append(("too long", "x" * (int(high) + 1)))
    elif spec.kind == ENUM:
        wrong.append(("not a choice", "no-such-" + spec.choices[0]))
    elif spec.kind == STRINGS:
        wrong += [("not JSON", "[broken"), ("a number in it", '["x", 1]')]
        if high is not None:
            wrong.append(("an item too long", "x" * (int(high) + 1)))
        if spec.max_items is not None:
            many = ",".join(f'"t{i}"' for i in range(spec.max_items + 1))
            wrong.append(("too many", f"[{many}]"))
    return wrong


def query_edges(spec: FieldSpec) -> list[str]:
    """Valid query values at the edges of a row."""
    edges: list[str] = ["", "null"] if spec.nullable else []
    if spec.kind == BOOL:
        edges += ["true", "false", "True"]
    elif spec.kind in (INT, NUMBER):
        edges += [f"{b:g}" for b in (spec.low, spec.high) if b is not None] or ["1"]
    elif spec.kind == STRING:
        edges += ["x" * int(spec.low or 0), "x" * int(spec.high or 40)]
    elif spec.kind == ENUM:
        edges += list(dict.fromkeys([spec.choices[0], spec.choices[-1]]))
        if spec.fold_case:
            edges.append(spec.choices[-1].upper())
    elif spec.kind == STRINGS:
        edges += ["[]", '["x"]', "plain term"]
        if spec.max_items is not None:
            edges.append("[" + ",".join(f'"t{i}"' for i in range(spec.max_items)) + "]")
    return edges


class RealtimeDriver:
    """A RealtimeCodec fed client events: ``out`` holds the events it sent, ``error_codes``
    the codes its Sends carry for ``kettle_errors{code}``, ``fed`` the audio bytes passed on."""

    def __init__(self, multilingual: bool = False) -> None:
        model = ModelInfo("tiny.en", multilingual, aliases=MODEL_ALIASES)
        self.codec = RealtimeCodec(CodecContext("sess1", model))
        self.out: list[dict[str, Any]] = []
        self.error_codes: list[str] = []
        self.fed = 0
        self.apply(self.codec.start())

    def apply(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, Send):
                self.out.append(json.loads(action.message.text))
                if action.error_code is not None:
                    self.error_codes.append(action.error_code)
            elif isinstance(action, FeedAudio):
                self.fed += len(action.data)

    def send(self, event: Any) -> list[dict[str, Any]]:
        """Send one event (as JSON text); the events the codec answered with."""
        before = len(self.out)
        self.apply(self.codec.on_text(json.dumps(event), AllowAll()))
        return self.out[before:]

    def send_object(self, event: Any) -> list[dict[str, Any]]:
        """Send one event as a parsed object (a fields.Recording, say)."""
        before = len(self.out)
        self.apply(self.codec.on_event_object(event, AllowAll()))
        return self.out[before:]


@pytest.fixture
def realtime() -> Callable[..., RealtimeDriver]:
    """Make a RealtimeDriver (``multilingual``: the served model's)."""
    return RealtimeDriver


def query_violation_params(table: FieldTable) -> list[Any]:
    """pytest params (name, raw) of every row's refused query texts, each with its reason."""
    return [
        pytest.param(spec.name, raw, id=f"{spec.name}-{why}")
        for spec in table.fields
        for why, raw in query_violations(spec)
    ]


def query_edge_params(
    table: FieldTable, edges: Callable[[FieldSpec], list[str]] = query_edges
) -> list[Any]:
    """pytest params (name, raw) of every row's accepted edge texts."""
    return [
        pytest.param(spec.name, raw, id=f"{spec.name}={raw[:20]}")
        for spec in table.fields
        for raw in edges(spec)
    ]
