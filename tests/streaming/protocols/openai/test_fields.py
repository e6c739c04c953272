"""OpenAI's field tables (openai_fields.py) against the parsers: each table names exactly the
fields its parser reads (fields.Recording), and every row's violations get OpenAI's error
(REST: a 400 with OpenAI's error object; Realtime: an ``error`` event naming the param with
the client's event_id, the session going on) while its edge values are taken."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kettle.streaming.protocols import fields
from kettle.streaming.protocols.fields import FieldSpec, FieldTable, Recording
from kettle.streaming.protocols.handshake import HandshakeRefused, HandshakeRequest
from kettle.streaming.protocols.openai import fields as oa
from kettle.streaming.protocols.openai import rest
from kettle.streaming.protocols.openai.realtime_route import prepare, settings_from_query

CATALOG = rest.ModelCatalog(
    (rest.ModelEntry("tiny.en", multilingual=False), rest.ModelEntry("base", multilingual=True))
)
AUDIO = b"RIFF....WAVEfmt "
DATA_URL = "data:audio/wav;base64,UklGRg=="
CHUNK = base64.b64encode(bytes(4800)).decode()  # 100 ms of audio/pcm


def test_every_row_is_well_formed() -> None:
    for table in oa.TABLES:
        assert table.fields, table.surface
        for row in table.fields:
            assert row.url.startswith((oa.REFERENCE, oa.CONNECT_URL, "docs/")), row
            if row.url.startswith("docs/"):
                assert row.name == "kettle_revisions"  # kettle's one extension here


# -- each table is exactly what its parser reads --------------------------------------------


def _form_names(looked_at: set[str]) -> set[str]:
    """Form names as the table names them: ``include[]`` and ``chunking_strategy[type]`` are
    ``include`` and ``chunking_strategy``."""
    return {name.split("[", 1)[0] for name in looked_at}


FULL_FORM = {
    "model": ["base"],
    "language": ["de"],
    "languages[]": ["de", "fr"],
    "keywords[]": ["Kettle"],
    "prompt": ["Kettle."],
    "response_format": ["json"],
    "temperature": ["0.2"],
    "include[]": ["logprobs"],
    "stream": ["true"],
    "chunking_strategy[type]": ["server_vad"],
    "chunking_strategy[threshold]": ["0.5"],
    "chunking_strategy[prefix_padding_ms]": ["300"],
    "chunking_strategy[silence_duration_ms]": ["500"],
    "known_speaker_names[]": ["agent"],
    "known_speaker_references[]": [DATA_URL],
}


def test_the_transcription_form_reads_exactly_its_table() -> None:
    values = Recording(FULL_FORM)
    rest.parse_audio_values(values, AUDIO, task="transcribe", catalog=CATALOG)
    # The file is the upload's own part, handed over beside the text fields.
    assert _form_names(values.looked_at) | {"file"} == oa.TRANSCRIPTION_FORM.names
    prefix = "chunking_strategy["
    inner = {n[len(prefix) : -1] for n in values.looked_at if n.startswith(prefix)}
    assert inner == oa.CHUNKING_VAD.names
    # timestamp_granularities needs verbose_json (and no stream): read on a second form.
    verbose = Recording({"model": ["base"], "response_format": ["verbose_json"],
                         "timestamp_granularities[]": ["word"]})  # fmt: skip
    assert rest.parse_audio_values(verbose, AUDIO, task="transcribe", catalog=CATALOG).words
    assert "timestamp_granularities[]" in verbose.looked_at


def test_the_translation_form_reads_exactly_its_table() -> None:
    values = Recording({**FULL_FORM, "response_format": ["verbose_json"]})
    rest.parse_audio_values(values, AUDIO, task="translate", catalog=CATALOG)
    assert _form_names(values.looked_at) | {"file"} == oa.TRANSLATION_FORM.names


def test_the_realtime_query_reads_exactly_its_table() -> None:
    query = Recording({"intent": "transcription", "model": "gpt-realtime",
                       "kettle_revisions": "true", "other": "x"})  # fmt: skip
    assert settings_from_query(query).revisions
    assert query.looked_at == oa.REALTIME_QUERY.names


def _session_update(turn_detection: dict[str, Any]) -> tuple[Recording, dict[str, Recording]]:
    parts = {
        "format": Recording({"type": "audio/pcm", "rate": 24000}),
        "noise_reduction": Recording({"type": "near_field"}),
        "transcription": Recording(
            {
                "model": "whisper-1",
                "language": "en",
                "languages": ["en"],
                "keywords": ["Kettle"],
                "prompt": "Kettle.",
                "delay": "low",
            }
        ),
        "turn_detection": Recording(turn_detection),
    }
    parts["input"] = Recording({k: parts[k] for k in oa.AUDIO_INPUT.names})
    parts["output"] = Recording({"voice": None})
    parts["audio"] = Recording({"input": parts["input"], "output": parts["output"]})
    parts["session"] = Recording({"type": "transcription", "audio": parts["audio"],
                                  "include": [oa.LOGPROBS], "model": "tiny.en",
                                  "voice": None})  # fmt: skip
    event = Recording({"type": "session.update", "event_id": "e1", "session": parts["session"]})
    return event, parts


SERVER_VAD = {"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300,
              "silence_duration_ms": 500, "create_response": False, "interrupt_response": False,
              "idle_timeout_ms": None}  # fmt: skip
SEMANTIC_VAD = {"type": "semantic_vad", "eagerness": "low", "create_response": False,
                "interrupt_response": False}  # fmt: skip


@pytest.mark.parametrize(
    ("turn_detection", "table"), [(SERVER_VAD, oa.SERVER_VAD), (SEMANTIC_VAD, oa.SEMANTIC_VAD)]
)
def test_session_update_reads_exactly_its_tables(
    realtime: Callable[..., Any], turn_detection: dict[str, Any], table: FieldTable
) -> None:
    h = realtime()
    event, parts = _session_update(turn_detection)
    (updated,) = h.send_object(event)
    assert updated["type"] == "session.updated"
    assert event.looked_at == oa.SESSION_UPDATE_EVENT.names
    expected = {
        "session": oa.SESSION,
        "audio": oa.SESSION_AUDIO,
        "output": oa.SESSION_AUDIO_OUTPUT,
        "input": oa.AUDIO_INPUT,
        "format": oa.AUDIO_FORMAT,
        "noise_reduction": oa.NOISE_REDUCTION,
        "transcription": oa.TRANSCRIPTION,
        "turn_detection": table,
    }
    for name, part in parts.items():
        assert part.looked_at == expected[name].names, name


@pytest.mark.parametrize("table", [oa.APPEND_EVENT, oa.COMMIT_EVENT, oa.CLEAR_EVENT])
def test_buffer_events_read_exactly_their_tables(
    realtime: Callable[..., Any], table: FieldTable
) -> None:
    h = realtime()
    h.send({"type": "input_audio_buffer.append", "audio": CHUNK})
    kind = table["type"].choices[0]
    event = Recording({"type": kind, "event_id": "e1", "audio": CHUNK, "other": 1})
    h.send_object(event)
    assert event.looked_at == table.names


# -- every row's violations and edges: REST -------------------------------------------------

# Fields a row needs beside it to mean anything (a form's context).
FORM_CONTEXT: dict[str, dict[str, list[str]]] = {
    "timestamp_granularities": {"response_format": ["verbose_json"]},
    "known_speaker_names": {"known_speaker_references[]": [DATA_URL] * 4},
    "known_speaker_references": {"known_speaker_names[]": list("abcd")},
}
# A valid value of each row the generic edges do not cover.
FORM_SAMPLES = {"model": "base", "language": "de", "languages": "de", "keywords": "Kettle",
                "prompt": "Kettle."}  # fmt: skip


def _text_cases(row: FieldSpec) -> Iterator[tuple[str, Any, str | None]]:
    """(what, form text or list of texts, OpenAI's code; None: taken) for one row."""
    if row.kind == fields.BOOL:
        yield "wrong type", "maybe", "invalid_type"
        yield "edge", "true", None
        yield "edge", "false", None
    if row.kind in (fields.INT, fields.NUMBER):
        number = "integer" if row.kind == fields.INT else "decimal"
        step = 1 if row.kind == fields.INT else 0.001
        yield "wrong type", "1.5" if row.kind == fields.INT else "warm", "invalid_type"
        if row.low is not None:
            yield "below", f"{row.low - step:g}", f"{number}_below_min_value"
            yield "edge", f"{row.low:g}", None
        if row.high is not None:
            yield "above", f"{row.high + step:g}", f"{number}_above_max_value"
            yield "edge", f"{row.high:g}", None
    if row.kind == fields.ENUM:
        yield "not in the enum", "nope", "invalid_value"
        for choice in row.choices:
            yield "edge", choice, None
    if row.kind == fields.STRINGS:
        if row.choices:
            yield "not in the enum", ["nope"], "invalid_value"
            yield "edge", list(row.choices), None
        if row.max_items is not None:
            yield "too many", ["a"] * (row.max_items + 1), "array_above_max_length"
        if row.name == "known_speaker_names":
            yield "edge", list("abcd"), None  # as many as the references (its context)
        elif row.name == "known_speaker_references":
            yield "edge", [DATA_URL] * 4, None
        elif row.name in FORM_SAMPLES:
            yield "edge", [FORM_SAMPLES[row.name]], None
    if row.kind == fields.STRING and row.name in FORM_SAMPLES:
        yield "edge", FORM_SAMPLES[row.name], None
    if row.kind == fields.OBJECT:
        yield "not an object", "manual", "invalid_value"
        yield "edge", "auto", None


def _form_cases() -> Iterator[Any]:
    for task, table in (("transcribe", oa.TRANSCRIPTION_FORM), ("translate", oa.TRANSLATION_FORM)):
        for row in table.fields:
            for what, value, code in _text_cases(row):
                yield pytest.param(task, row, value, code, id=f"{task}-{row.name}-{what}-{value}")
            if row.required:
                yield pytest.param(task, row, None, "missing_required_parameter",
                                   id=f"{task}-{row.name}-missing")  # fmt: skip
    for row in oa.CHUNKING_VAD.fields:
        for what, value, code in _text_cases(row):
            yield pytest.param("chunking", row, value, code, id=f"chunking-{row.name}-{what}")
    yield pytest.param("chunking", oa.CHUNKING_VAD["type"], None, "missing_required_parameter",
                       id="chunking-type-missing")  # fmt: skip


@pytest.mark.parametrize(("task", "row", "value", "code"), _form_cases())
def test_form_rows(task: str, row: FieldSpec, value: Any, code: str | None) -> None:
    values: dict[str, list[str]] = {"model": ["base"]}
    param = row.name
    if task == "chunking":
        if value is None:  # type missing: another key only
            values["chunking_strategy[threshold]"] = ["0.5"]
        else:
            values["chunking_strategy[type]"] = ["server_vad"]
            values[f"chunking_strategy[{row.name}]"] = [value]
        param, task = f"chunking_strategy.{row.name}", "transcribe"
    else:
        values.update(FORM_CONTEXT.get(row.name, {}))
        if value is None:
            values.pop(row.name, None)
        elif row.kind == fields.STRINGS:
            values[row.name + "[]"] = value
        elif row.name != "file":
            values[row.name] = [value]
    file = None if row.name == "file" and value is None else AUDIO

    def parse() -> rest.AudioRequest:
        return rest.parse_audio_values(values, file, task=task, catalog=CATALOG)

    if code is None:
        parse()  # taken
        return
    with pytest.raises(rest.OpenAIError) as info:
        parse()
    err = info.value
    assert (err.status, err.param, err.code) == (400, param, code)
    assert err.body() == {"error": {"message": err.message, "type": "invalid_request_error",
                                    "param": param, "code": code}}  # fmt: skip
    assert err.message


# -- every row's violations and edges: Realtime ---------------------------------------------

PATHS: dict[str, tuple[FieldTable, str, dict[str, Any]]] = {
    # table, its param path, the object it sits in (besides the row's field)
    "session": (oa.SESSION, "session", {"type": "transcription"}),
    "audio": (oa.SESSION_AUDIO, "session.audio", {}),
    "output": (oa.SESSION_AUDIO_OUTPUT, "session.audio.output", {}),
    "input": (oa.AUDIO_INPUT, "session.audio.input", {}),
    "format": (oa.AUDIO_FORMAT, "session.audio.input.format", {"type": "audio/pcm"}),
    "noise_reduction": (oa.NOISE_REDUCTION, "session.audio.input.noise_reduction", {}),
    "transcription": (oa.TRANSCRIPTION, "session.audio.input.transcription", {}),
    "server_vad": (oa.SERVER_VAD, "session.audio.input.turn_detection", {"type": "server_vad"}),
    "semantic_vad": (oa.SEMANTIC_VAD, "session.audio.input.turn_detection",
                     {"type": "semantic_vad"}),
}  # fmt: skip
# A valid value of each row the generic edges do not cover (voice has none: it is refused).
JSON_SAMPLES: dict[str, Any] = {
    "session.model": "tiny.en",
    "session.audio.input.transcription.model": "gpt-4o-transcribe",
    "session.audio.input.transcription.language": "en",
    "session.audio.input.transcription.languages": ["en"],
    "session.audio.input.transcription.keywords": ["Kettle"],
    "session.audio.input.transcription.prompt": "",
}
NESTED = {"audio": {}, "input": {}, "format": {"type": "audio/pcm"}, "output": {},
          "transcription": {}, "turn_detection": {"type": "server_vad"}}  # fmt: skip


def _json_cases(row: FieldSpec, param: str) -> Iterator[tuple[str, Any, str | None]]:
    """(what, JSON value, OpenAI's code; None: taken) for one row."""
    if row.nullable:
        yield "edge", None, None
    elif not row.required:
        yield "null", None, "invalid_type"
    if row.kind == fields.BOOL:
        yield "wrong type", "yes", "invalid_type"
        yield "edge", True, None
        yield "edge", False, None
    if row.kind in (fields.INT, fields.NUMBER):
        number = "integer" if row.kind == fields.INT else "decimal"
        step = 1 if row.kind == fields.INT else 0.01
        yield "wrong type", "5", "invalid_type"
        if row.kind == fields.INT:
            yield "fraction", (row.low or 0) + 0.5, "invalid_type"
        if row.low is not None:
            yield "below", row.low - step, f"{number}_below_min_value"
            yield "edge", int(row.low) if row.kind == fields.INT else row.low, None
        if row.high is not None:
            yield "above", row.high + step, f"{number}_above_max_value"
            yield "edge", int(row.high) if row.kind == fields.INT else row.high, None
    if row.kind == fields.ENUM:
        yield "not in the enum", "nope", "invalid_value"
        yield "wrong type", 5, "invalid_type"
        for choice in row.choices:
            yield "edge", choice, None
    if row.kind == fields.STRING:
        yield "wrong type", 5, "invalid_type"
        if row.high is not None:
            yield "too long", "x" * (int(row.high) + 1), "string_above_max_length"
            yield "edge", "x" * int(row.high), None
    if row.kind == fields.STRINGS:
        yield "wrong type", "x", "invalid_type"
        yield "wrong item type", [5], "invalid_type"
        if row.choices:
            yield "not in the enum", ["nope"], "invalid_value"
            yield "edge", list(row.choices), None
            yield "edge", [], None
    if row.kind == fields.OBJECT:
        yield "wrong type", "x", "invalid_type"
        if row.name in NESTED:
            yield "edge", NESTED[row.name], None
    if param in JSON_SAMPLES:
        yield "edge", JSON_SAMPLES[param], None


def _session(where: str, obj: dict[str, Any]) -> dict[str, Any]:
    """The session object holding ``obj`` where ``where`` (a PATHS key) sits."""
    chain = {"session": [], "audio": ["audio"], "output": ["audio", "output"],
             "input": ["audio", "input"], "format": ["audio", "input", "format"],
             "noise_reduction": ["audio", "input", "noise_reduction"],
             "transcription": ["audio", "input", "transcription"],
             "server_vad": ["audio", "input", "turn_detection"],
             "semantic_vad": ["audio", "input", "turn_detection"]}[where]  # fmt: skip
    for key in reversed(chain):
        obj = {key: obj}
    return {"type": "transcription", **obj} if chain else obj


def _realtime_cases() -> Iterator[Any]:
    for where, (table, path, _) in PATHS.items():
        for row in table.fields:
            if where in ("server_vad", "semantic_vad") and row.name == "type":
                continue  # the discriminator: its cases follow
            param = f"{path}.{row.name}"
            for what, value, code in _json_cases(row, param):
                if where == "session" and row.name == "type" and code == "invalid_value":
                    continue  # another session type: test_other_session_types_are_refused
                yield pytest.param(where, row, value, code, param, id=f"{param}-{what}-{value!r}")
            if row.required:
                yield pytest.param(where, row, ..., "missing_required_parameter", param,
                                   id=f"{param}-missing")  # fmt: skip
    for name in ("type",):
        param = "session.audio.input.turn_detection.type"
        yield pytest.param("server_vad", oa.TURN_DETECTION_TYPE[name], "nope", "invalid_value",
                           param, id="turn_detection-type-not-in-enum")  # fmt: skip
        yield pytest.param("server_vad", oa.TURN_DETECTION_TYPE[name], ...,
                           "missing_required_parameter", param,
                           id="turn_detection-type-missing")  # fmt: skip


@pytest.mark.parametrize(("where", "row", "value", "code", "param"), _realtime_cases())
def test_session_rows(
    realtime: Callable[..., Any],
    where: str,
    row: FieldSpec,
    value: Any,
    code: str | None,
    param: str,
) -> None:
    h = realtime()
    _, _, base = PATHS[where]
    obj = dict(base)
    if value is ...:
        obj.pop(row.name, None)
    else:
        obj[row.name] = value
    session = obj if where == "session" else _session(where, obj)
    if value is ... and where == "session":
        session.pop("type", None)
    answer = h.send({"type": "session.update", "session": session, "event_id": "evt_1"})
    if code is None:
        assert [e["type"] for e in answer] == ["session.updated"], answer
        return
    (error,) = answer
    assert error["type"] == "error"
    assert error["error"] == {"type": "invalid_request_error", "code": code,
                              "message": error["error"]["message"], "param": param,
                              "event_id": "evt_1"}  # fmt: skip
    assert h.error_codes == [code]  # what kettle_errors{code} counts
    # The session goes on: nothing of the update applied, and a good one is taken.
    assert h.codec.settings == realtime().codec.settings
    assert h.send({"type": "session.update", "session": {"type": "transcription"}})[0]["type"] == (
        "session.updated"
    )


def test_other_session_types_are_refused(realtime: Callable[..., Any]) -> None:
    h = realtime()
    (error,) = h.send({"type": "session.update", "event_id": "e", "session": {"type": "realtime"}})
    assert (error["error"]["code"], error["error"]["param"]) == ("invalid_value", "session.type")
    (error,) = h.send({"type": "session.update", "event_id": "e"})
    assert (error["error"]["code"], error["error"]["param"], error["error"]["event_id"]) == (
        "missing_required_parameter",
        "session",
        "e",
    )


def _event_cases() -> Iterator[Any]:
    for table in (oa.SESSION_UPDATE_EVENT, oa.APPEND_EVENT, oa.COMMIT_EVENT, oa.CLEAR_EVENT):
        kind = table["type"].choices[0]
        for row in table.fields:
            if row.name in ("type", "session"):
                continue  # type: test_events_need_a_type; session: above
            for what, value, code in _json_cases(row, row.name):
                yield pytest.param(kind, row, value, code, id=f"{kind}-{row.name}-{what}")
            if row.required:
                yield pytest.param(kind, row, ..., "missing_required_parameter",
                                   id=f"{kind}-{row.name}-missing")  # fmt: skip
        yield pytest.param(kind, table["event_id"], "e" * oa.MAX_EVENT_ID, None,
                           id=f"{kind}-event_id-longest")  # fmt: skip


@pytest.mark.parametrize(("kind", "row", "value", "code"), _event_cases())
def test_event_rows(
    realtime: Callable[..., Any], kind: str, row: FieldSpec, value: Any, code: str | None
) -> None:
    h = realtime()
    h.send({"type": "input_audio_buffer.append", "audio": CHUNK})
    fed = h.fed
    event: dict[str, Any] = {"type": kind, "event_id": "evt_1"}
    if kind == "input_audio_buffer.append":
        event["audio"] = CHUNK
    if kind == "session.update":
        event["session"] = {"type": "transcription"}
    if value is ...:
        event.pop(row.name)
    else:
        event[row.name] = value
    answer = h.send(event)
    errors = [e for e in answer if e["type"] == "error"]
    if code is None:
        assert not [e for e in errors if e["error"]["param"] == row.name], errors
        if kind == "input_audio_buffer.append":
            assert h.fed == fed + len(bytes(4800))
        return
    (error,) = errors
    client_event = None if row.name == "event_id" else "evt_1"
    assert error["error"] == {"type": "invalid_request_error", "code": code,
                              "message": error["error"]["message"], "param": row.name,
                              "event_id": client_event}  # fmt: skip
    assert h.error_codes == [code]
    assert h.fed == fed  # a refused append passes no audio on ...
    h.send({"type": "input_audio_buffer.append", "audio": CHUNK})
    assert h.fed == fed + 4800  # ... and the session goes on


def test_events_need_a_type(realtime: Callable[..., Any]) -> None:
    h = realtime()
    for event in ({"event_id": "e"}, {"type": 5}, ["x"]):
        (error,) = h.send(event)
        assert (error["error"]["code"], error["error"]["param"]) == ("invalid_event", "type")
    (error,) = h.send({"type": "response.create", "event_id": "e"})
    assert (error["error"]["code"], error["error"]["event_id"]) == ("invalid_event", "e")


# -- the query ------------------------------------------------------------------------------


def _query_cases() -> Iterator[Any]:
    for row in oa.REALTIME_QUERY.fields:
        for what, value, code in _text_cases(row):
            yield pytest.param(row.name, value, code, id=f"{row.name}-{what}-{value}")
    yield pytest.param("model", "gpt-realtime", None, id="model-any")
    yield pytest.param("kettle_revisions", "TRUE", None, id="kettle_revisions-any-case")


@pytest.mark.parametrize(("name", "value", "code"), _query_cases())
def test_query_rows(name: str, value: str, code: str | None) -> None:
    query = f"{name}={value}" if name == "intent" else f"intent=transcription&{name}={value}"
    request = HandshakeRequest("/v1/realtime", query)
    if code is None:
        prepare(request, None)
        return
    with pytest.raises(HandshakeRefused) as info:
        prepare(request, None)
    assert (info.value.status, info.value.reason) == (400, "bad_query")  # sessions_rejected
    assert name in info.value.message
