"""The WebSocket server against docs/protocol.md, with the fake model (the point here is the
server).

A real server on 127.0.0.1:0; raw WebSocket clients so every message and close code is seen.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from kettle.streaming.client.client import ClientOptions, stream_audio, to_s16le
from kettle.streaming.server.server import KettleServer, ServerConfig
from kettle.transcribe.errors import ConfigError
from kettle.transcribe.model.fake import FakeDecoder, scripted_audio
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.streaming.conftest import StartServer

# Three utterances of voice-like audio, with silences long enough to end each one.
AUDIO = scripted_audio(
    [("silence", 0.3), ("voice", 1.5), ("silence", 1.0), ("voice", 2.0), ("silence", 1.0),
     ("voice", 1.0), ("silence", 0.8)]
)  # fmt: skip
PCM = to_s16le(AUDIO)
TIMEOUT = 30


@pytest.fixture
def make_server(start_server: StartServer) -> Callable[..., Awaitable[KettleServer]]:
    def start(
        decoder: Any = None, clock: Callable[[], float] | None = None, **overrides: Any
    ) -> Awaitable[KettleServer]:
        kw = {} if clock is None else {"clock": clock}
        config = ServerConfig(port=0, **overrides)
        return start_server(config, lambda: decoder or FakeDecoder(), **kw)

    return start


@pytest.fixture
async def server(make_server: Callable[..., Any]) -> KettleServer:
    return await make_server()


async def open_ws(server: KettleServer, query: str = "", **kwargs: Any) -> ClientConnection:
    url = server.ws_url + (f"?{query}" if query else "")
    return await connect(url, max_size=None, **kwargs)


async def read_all(ws: ClientConnection) -> tuple[list[dict[str, Any]], int | None]:
    """Every server message until the server closes, and the close code."""
    messages: list[dict[str, Any]] = []

    async def reader() -> None:
        try:
            async for raw in ws:
                assert isinstance(raw, str), "the server sends text only"
                messages.append(json.loads(raw))
        except ConnectionClosed:
            pass

    await asyncio.wait_for(reader(), TIMEOUT)
    return messages, ws.close_code


async def send_chunks(ws: ClientConnection, data: bytes, size: int = 3200) -> None:
    for i in range(0, len(data), size):
        await ws.send(data[i : i + size])


def kinds(messages: list[dict[str, Any]]) -> list[str]:
    return [m["type"] for m in messages]


def errors(messages: list[dict[str, Any]]) -> list[str]:
    return [m["code"] for m in messages if m["type"] == "error"]


def check_finals(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Finals numbered 0..n-1 in order, done last with their count; returns the finals."""
    finals = [m for m in messages if m["type"] == "final"]
    assert [f["utterance"] for f in finals] == list(range(len(finals)))
    assert messages[-1]["type"] == "done"
    assert messages[-1]["utterances"] == len(finals)
    for f in finals:
        assert 0 <= f["start"] < f["end"]
    return finals


def http_get(server: KettleServer, path: str, headers: dict[str, str] | None = None) -> Any:
    request = urllib.request.Request(server.url + path, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


async def get(server: KettleServer, path: str, **kw: Any) -> Any:
    return await asyncio.to_thread(http_get, server, path, **kw)


# -- the happy path ---------------------------------------------------------------------------


async def test_ready_finals_done_close_1000(server: KettleServer) -> None:
    ws = await open_ws(server)
    await ws.send(json.dumps({"type": "config", "word_timestamps": True}))
    await send_chunks(ws, PCM)
    await ws.send('{"type": "stop"}')
    messages, code = await read_all(ws)
    assert code == 1000
    ready = messages[0]
    assert ready["type"] == "ready" and ready["protocol"] == 1
    assert ready["model"] == "fake" and ready["sample_rate"] == 16000
    assert ready["multilingual"] is False and ready["session_id"]
    finals = check_finals(messages)
    assert len(finals) == 3
    assert all(f["text"] and f["language"] == "en" for f in finals)
    for f in finals:
        assert f["words"] and all(f["start"] <= w["start"] <= w["end"] for w in f["words"])
    done = messages[-1]
    assert done["audio_seconds"] == round(len(AUDIO) / 16000, 3)
    assert "reason" not in done
    assert errors(messages) == []
    metrics = server.metrics
    assert metrics.value("kettle_sessions_total") == 1
    assert metrics.value("kettle_final_lag_seconds_count") == 3
    assert metrics.value("kettle_audio_seconds_total") == pytest.approx(len(AUDIO) / 16000)
    assert metrics.value("kettle_batch_size_count") >= 1


async def test_partials_in_real_time_precede_their_final(server: KettleServer) -> None:
    result = await stream_audio(
        AUDIO[: 16000 * 3], ClientOptions(url=server.ws_url, realtime=True, chunk_ms=100)
    )
    assert result.close_code == 1000 and result.done is not None
    assert result.partials, "real-time audio gets partials"
    seen_final: set[int] = set()
    for message, _ in result.received:
        if message["type"] == "partial":
            assert message["utterance"] not in seen_final
            assert message["text"].startswith(message["stable"])
        elif message["type"] == "final":
            seen_final.add(message["utterance"])
    assert server.metrics.value("kettle_partial_lag_seconds_count") >= 1


async def test_partials_false_sends_none(server: KettleServer) -> None:
    result = await stream_audio(
        AUDIO[: 16000 * 3],
        ClientOptions(url=server.ws_url, realtime=True, chunk_ms=100, partials=False),
    )
    assert result.partials == [] and len(result.finals) == 1


async def test_stop_without_audio(server: KettleServer) -> None:
    ws = await open_ws(server)
    await ws.send('{"type": "finalize"}')  # no open utterance: nothing happens
    await ws.send('{"type": "stop"}')
    await ws.send('{"type": "bogus"}')  # after stop: ignored
    messages, code = await read_all(ws)
    assert kinds(messages) == ["ready", "done"]
    assert messages[1] == {"type": "done", "audio_seconds": 0.0, "utterances": 0}
    assert code == 1000


async def test_messages_before_ready_are_processed_in_order(server: KettleServer) -> None:
    ws = await open_ws(server, "encoding=pcm_f32le&sample_rate=8000")
    half = AUDIO[::2].astype("<f4").tobytes()  # 8 kHz f32
    await ws.send(half[:7])  # mid-sample
    await ws.send(half[7:])
    await ws.send('{"type": "stop"}')
    messages, code = await read_all(ws)
    assert code == 1000
    assert messages[0]["sample_rate"] == 8000
    assert len(check_finals(messages)) == 3
    assert messages[-1]["audio_seconds"] == round(len(AUDIO[::2]) / 8000, 3)


# -- config and query precedence ----------------------------------------------------------------


async def test_config_wins_over_query_and_explicit_rate_sticks(server: KettleServer) -> None:
    # Query: mulaw at 16 kHz (explicit). Config: s16le, no rate -> still 16 kHz, s16le.
    ws = await open_ws(server, "encoding=mulaw&sample_rate=16000&channels=2")
    await ws.send(json.dumps({"type": "config", "encoding": "pcm_s16le", "channels": 1}))
    await send_chunks(ws, PCM)
    await ws.send('{"type": "stop"}')
    messages, code = await read_all(ws)
    assert code == 1000 and errors(messages) == []
    assert len(check_finals(messages)) == 3
    assert messages[-1]["audio_seconds"] == round(len(AUDIO) / 16000, 3)


async def test_mulaw_defaults_to_8k(server: KettleServer) -> None:
    ws = await open_ws(server, "encoding=mulaw")
    assert json.loads(await ws.recv())["sample_rate"] == 8000
    await ws.send(bytes(8000))  # one second of u-law
    await ws.send('{"type": "stop"}')
    messages, _ = await read_all(ws)
    assert messages[-1]["audio_seconds"] == 1.0


async def test_invalid_config_refused_whole_then_corrected(server: KettleServer) -> None:
    ws = await open_ws(server)
    # encoding is valid but channels is not: nothing applies, the session stays s16le mono.
    await ws.send(json.dumps({"type": "config", "encoding": "pcm_f32le", "channels": 7}))
    # binary after a refused config uses the settings as they were
    await send_chunks(ws, PCM[: 16000 * 2 * 3])
    await ws.send(json.dumps({"type": "config", "channels": 2}))  # after audio: refused
    await ws.send('{"type": "stop"}')
    messages, code = await read_all(ws)
    assert code == 1000
    assert errors(messages) == ["bad_message", "bad_message"]
    first, second = (m for m in messages if m["type"] == "error")
    assert "channels" in first["message"]
    assert "before the first audio" in second["message"]
    assert messages[-1]["audio_seconds"] == 3.0  # decoded as s16le mono 16 kHz
    assert len(check_finals(messages)) == 1


async def test_config_corrected_before_audio_applies(server: KettleServer) -> None:
    ws = await open_ws(server)
    await ws.send(json.dumps({"type": "config", "sample_rate": 100}))
    await ws.send(json.dumps({"type": "config", "sample_rate": 8000, "encoding": "pcm_f32le"}))
    await ws.send(AUDIO[::2].astype("<f4").tobytes())
    await ws.send('{"type": "stop"}')
    messages, _ = await read_all(ws)
    assert errors(messages) == ["bad_message"]
    assert messages[-1]["audio_seconds"] == round(len(AUDIO[::2]) / 8000, 3)


async def test_english_only_model_refuses_language(server: KettleServer) -> None:
    status, _, body = await get(server, "/v1/stream?language=de")
    assert status == 400 and b"English-only" in body
    ws = await open_ws(server, "language=en")
    await ws.send(json.dumps({"type": "config", "language": "fr"}))
    await ws.send('{"type": "stop"}')
    messages, _ = await read_all(ws)
    assert errors(messages) == ["bad_message"]


# -- bad input --------------------------------------------------------------------------------


async def test_bad_messages_never_end_the_session(make_server: Callable[..., Any]) -> None:
    server = await make_server(max_frame_bytes=64_000)
    ws = await open_ws(server)
    bad = [
        "not json",
        "[1, 2, 3]",
        '"a string"',
        "{}",
        '{"type": "dance"}',
        '{"type": "config", "sample_rate": "fast"}',
    ]
    for text in bad:
        await ws.send(text)
    await ws.send(bytes(64_001))  # over the frame limit: dropped
    await ws.send(b"\x00\x01\x02" * 1000)  # garbage is still audio (s16le noise-free bytes)
    await send_chunks(ws, PCM)
    await ws.send('{"type": "keepalive"}')
    await ws.send('{"type": "stop"}')
    messages, code = await read_all(ws)
    assert code == 1000
    assert errors(messages) == ["bad_message"] * len(bad) + ["bad_audio"]
    assert all(m.get("fatal") is None for m in messages if m["type"] == "error")
    assert len(check_finals(messages)) == 3
    # the dropped oversize frame is not counted as audio
    assert messages[-1]["audio_seconds"] == round((3000 + len(PCM)) / 2 / 16000, 3)
    assert server.metrics.value("kettle_errors_total", {"code": "bad_message"}) == len(bad)
    assert server.metrics.value("kettle_errors_total", {"code": "bad_audio"}) == 1


async def test_leftover_partial_frame_at_stop_is_bad_audio(server: KettleServer) -> None:
    ws = await open_ws(server, "encoding=pcm_f32le&channels=2")
    stereo = np.repeat(AUDIO[: 16000 * 3], 2).astype("<f4").tobytes()
    await ws.send(stereo + b"\x01\x02\x03")
    await ws.send('{"type": "stop"}')
    messages, code = await read_all(ws)
    assert code == 1000
    assert kinds(messages)[1] == "error" and errors(messages) == ["bad_audio"]
    assert "3 byte" in messages[1]["message"]
    assert len(check_finals(messages)) == 1
    assert messages[-1]["audio_seconds"] == 3.0


async def test_message_over_16_mib_closes_1009(server: KettleServer) -> None:
    ws = await open_ws(server)
    await ws.recv()
    # The server may refuse the frame from its header, before the payload has all arrived.
    with contextlib.suppress(ConnectionClosed):
        await ws.send(bytes((16 << 20) + 1))
    _, code = await read_all(ws)
    assert code == 1009
    # the server lives on
    result = await stream_audio(AUDIO, ClientOptions(url=server.ws_url))
    assert len(result.finals) == 3


async def test_internal_error_is_fatal_1011_and_server_survives(
    server: KettleServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kettle.streaming.server.ingress as ingress_module

    class Broken:
        def __init__(self, *args: Any) -> None:
            raise RuntimeError("simulated bug")

    monkeypatch.setattr(ingress_module, "PcmStreamDecoder", Broken)
    ws = await open_ws(server)
    await ws.send(PCM[:3200])
    messages, code = await read_all(ws)
    assert code == 1011
    assert messages[-1] == {
        "type": "error",
        "code": "internal",
        "message": "internal server error",
        "fatal": True,
    }
    monkeypatch.undo()
    result = await stream_audio(AUDIO, ClientOptions(url=server.ws_url))
    assert len(result.finals) == 3
    assert server.sessions_active == 0


async def test_rate_limit_applies_to_text_only(make_server: Callable[..., Any]) -> None:
    server = await make_server(max_messages_per_second=1.0)  # burst 2
    ws = await open_ws(server)
    for _ in range(6):
        await ws.send('{"type": "keepalive"}')
    await send_chunks(ws, PCM, size=640)  # ~700 audio messages: never limited
    await ws.send('{"type": "stop"}')  # always honoured
    messages, code = await read_all(ws)
    assert code == 1000
    assert errors(messages) == ["rate_limited"]  # once per run of dropped messages
    assert len(check_finals(messages)) == 3


@pytest.mark.slow  # paced in real time: seconds of wall time
async def test_abrupt_disconnects_leak_nothing(server: KettleServer) -> None:
    survivors = asyncio.create_task(
        stream_audio(AUDIO, ClientOptions(url=server.ws_url, realtime=True, chunk_ms=250))
    )
    for _ in range(5):
        ws = await open_ws(server)
        await send_chunks(ws, PCM[: len(PCM) // 3])  # mid-utterance
        ws.transport.abort()  # no close frame, no stop
    ws = await open_ws(server)
    await send_chunks(ws, PCM[: len(PCM) // 2])
    await ws.close()  # a clean close without stop
    result = await survivors
    assert len(result.finals) == 3 and result.close_code == 1000
    await asyncio.wait_for(server.wait_idle(), TIMEOUT)
    assert server.sessions_active == 0
    assert server.metrics.value("kettle_sessions_active") == 0
    assert server.engine is not None and server.engine.streams_open == 0


async def test_slow_reader_gets_every_final(make_server: Callable[..., Any]) -> None:
    server = await make_server(audio_rate=1000.0)  # about reading, not admission
    slow = await open_ws(server, max_queue=1)  # the client stops reading from the socket
    await slow.send(json.dumps({"type": "config", "word_timestamps": True}))
    long_pcm = PCM * 8
    await send_chunks(slow, long_pcm)
    await slow.send('{"type": "stop"}')
    # Meanwhile another session is served normally.
    other = await stream_audio(AUDIO, ClientOptions(url=server.ws_url))
    assert len(other.finals) == 3
    await asyncio.sleep(0.5)  # let the slow reader's messages pile up unread
    messages, code = await read_all(slow)
    assert code == 1000
    assert len(check_finals(messages)) == 24


class ManualClock:
    """The server's clock in a test: time moves only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_idle_timeout_acts_as_stop(make_server: Callable[..., Any]) -> None:
    clock = ManualClock()
    server = await make_server(idle_timeout_s=0.5, clock=clock)
    ws = await open_ws(server)
    await send_chunks(ws, PCM[: 16000 * 2 * 2])  # 2 s, ends in voice
    await (await ws.ping())  # the pong comes once the server has read everything before it
    clock.now += 0.6  # however long the sending took in wall time, only now is it idle
    messages, code = await read_all(ws)
    assert code == 1000
    assert messages[-1]["type"] == "done" and messages[-1]["reason"] == "idle"
    assert len(check_finals(messages)) == 1


async def test_keepalive_resets_idle_timer(make_server: Callable[..., Any]) -> None:
    clock = ManualClock()
    server = await make_server(idle_timeout_s=0.6, clock=clock)
    ws = await open_ws(server)
    for _ in range(6):  # 1.2 s in all, never 0.6 s without a message
        clock.now += 0.2
        await ws.send('{"type": "keepalive"}')
        await (await ws.ping())  # the pong comes once the server has read the keepalive
    # Let the reader wake on its 0.6 s wait and check its deadline on the frozen clock (were
    # the keepalives not counted, it would stop for idle now). A slow machine only makes the
    # check later, never wrong.
    await asyncio.sleep(0.8)
    await ws.send('{"type": "stop"}')
    messages, _ = await read_all(ws)
    assert messages[-1] == {"type": "done", "audio_seconds": 0.0, "utterances": 0}


async def test_max_session_length(make_server: Callable[..., Any]) -> None:
    server = await make_server(max_session_s=0.5)
    ws = await open_ws(server)
    await send_chunks(ws, PCM[: 16000 * 2 * 2])
    while True:  # keep talking: only the session length can end it
        try:
            await ws.send('{"type": "keepalive"}')
            await asyncio.sleep(0.1)
        except ConnectionClosed:
            break
        if server.sessions_active == 0:
            break
    messages, code = await read_all(ws)
    assert code == 1000
    assert messages[-1]["reason"] == "max_duration"


# -- handshake: auth, query, limits ---------------------------------------------------------


async def test_auth(make_server: Callable[..., Any]) -> None:
    server = await make_server(api_keys=("k-one", "k-two"))
    for query, headers in [
        ("", None),
        ("token=wrong", None),
        ("", {"Authorization": "Basic k-one"}),
    ]:
        with pytest.raises(InvalidStatus) as info:
            await open_ws(server, query, additional_headers=headers)
        assert info.value.response.status_code == 401
    # 401 comes before query validation
    with pytest.raises(InvalidStatus) as info:
        await open_ws(server, "sample_rate=nope")
    assert info.value.response.status_code == 401
    assert server.metrics.value("kettle_sessions_total") == 0
    assert server.metrics.value("kettle_sessions_rejected_total", {"reason": "unauthorized"}) == 4
    for query, headers in [
        ("token=k-two", None),
        ("", {"Authorization": "bearer k-one"}),
        ("", {"Authorization": "BEARER k-two"}),
    ]:
        ws = await open_ws(server, query, additional_headers=headers)
        assert json.loads(await ws.recv())["type"] == "ready"
        await ws.close()
    with pytest.raises(InvalidStatus) as info:
        await open_ws(server, "token=k-one&sample_rate=nope")
    assert info.value.response.status_code == 400


@pytest.mark.parametrize(
    "query", ["sample_rate=96000", "encoding=opus", "channels=3", "language=xx", "sample_rate=%ff"]
)
async def test_bad_query_is_400(server: KettleServer, query: str) -> None:
    with pytest.raises(InvalidStatus) as info:
        await open_ws(server, query)
    assert info.value.response.status_code == 400
    assert server.sessions_active == 0


async def test_session_limit_503_with_retry_after(make_server: Callable[..., Any]) -> None:
    server = await make_server(max_sessions=2, retry_after_s=3)
    first = await open_ws(server)
    second = await open_ws(server)
    assert (await get(server, "/readyz"))[0] == 503
    with pytest.raises(InvalidStatus) as info:
        await open_ws(server)
    assert info.value.response.status_code == 503
    assert info.value.response.headers["Retry-After"] == "3"
    assert server.metrics.value("kettle_sessions_rejected_total", {"reason": "session_limit"}) == 1
    await first.close()
    await second.send('{"type": "stop"}')
    await read_all(second)
    await asyncio.wait_for(server.wait_idle(), TIMEOUT)
    third = await open_ws(server)
    assert json.loads(await third.recv())["type"] == "ready"
    await third.close()


# -- shutdown -----------------------------------------------------------------------------------


async def test_shutdown_sends_finals_then_1001(make_server: Callable[..., Any]) -> None:
    server = await make_server()
    ws = await open_ws(server)
    await send_chunks(ws, PCM[: len(PCM) * 2 // 3])  # mid-utterance, no stop
    # A config after audio is refused: its error proves the server has read all the audio.
    await ws.send('{"type": "config"}')
    early = [json.loads(await ws.recv())]
    while early[-1]["type"] != "error":
        early.append(json.loads(await ws.recv()))
    shutdown = asyncio.create_task(server.shutdown(timeout=10))
    rest, code = await read_all(ws)
    messages = early + rest
    await shutdown
    assert code == 1001
    finals = check_finals(messages)
    assert len(finals) == 2
    assert messages[-1]["reason"] == "shutdown"
    with pytest.raises(OSError):
        await open_ws(server)


async def test_readyz_before_model_loaded() -> None:
    gate = asyncio.Event()
    loop = asyncio.get_running_loop()

    def slow_load() -> FakeDecoder:
        asyncio.run_coroutine_threadsafe(gate.wait(), loop).result(10)
        return FakeDecoder()

    server = KettleServer(ServerConfig(port=0), slow_load)
    await server.listen()
    loading = asyncio.create_task(server.load())
    try:
        assert (await get(server, "/healthz"))[0] == 200
        assert (await get(server, "/readyz"))[0] == 503
        with pytest.raises(InvalidStatus) as info:
            await open_ws(server)
        assert info.value.response.status_code == 503
        assert "Retry-After" in info.value.response.headers
        gate.set()
        await loading
        assert (await get(server, "/readyz"))[0] == 200
    finally:
        gate.set()
        await server.shutdown(timeout=2)


# -- HTTP routes ------------------------------------------------------------------------------


async def test_http_routes(make_server: Callable[..., Any], tmp_path: Path) -> None:
    (tmp_path / "index.html").write_text("<!doctype html><title>kettle</title>")
    (tmp_path / "app.js").write_text("console.log(1)")
    (tmp_path / "secret.py").write_text("x = 1")
    (tmp_path.parent / "outside.html").write_text("no")
    server = await make_server(web_root=tmp_path)
    status, headers, body = await get(server, "/healthz")
    assert status == 200
    status, headers, body = await get(server, "/readyz")
    assert status == 200
    status, headers, body = await get(server, "/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    assert b"kettle_sessions_active 0.0" in body
    assert b"kettle_engine_streams_open 0.0" in body
    assert b"kettle_encoder_cache_bytes 0.0" in body  # the fake model keeps no encodings
    status, headers, body = await get(server, "/")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert b"<title>kettle</title>" in body
    status, headers, body = await get(server, "/app.js?v=2")
    assert status == 200 and headers["Content-Type"].startswith("text/javascript")
    for path in ["/secret.py", "/nope.html", "/../outside.html", "/%2e%2e/outside.html",
                 "/.hidden.js", "/a/../../outside.html"]:  # fmt: skip
        assert (await get(server, path))[0] == 404, path
    status, headers, _ = await get(server, "/v1/stream")
    assert status in (400, 426)


async def test_default_web_root_serves_the_package_folder(server: KettleServer) -> None:
    import kettle.web

    index = Path(kettle.web.__file__).parent / "index.html"
    status, _, body = await get(server, "/")
    if index.is_file():
        assert status == 200 and body == index.read_bytes()
    else:
        assert status == 404


# -- many sessions --------------------------------------------------------------------------


@pytest.mark.slow  # paced in real time: seconds of wall time
async def test_twenty_concurrent_sessions_all_get_their_finals(
    make_server: Callable[..., Any],
) -> None:
    server = await make_server(FakeDecoder(batch_delay_s=0.01), max_sessions=20)
    results = await asyncio.gather(
        *(
            stream_audio(AUDIO, ClientOptions(url=server.ws_url, realtime=(i % 2 == 0)))
            for i in range(20)
        )
    )
    for result in results:
        assert result.close_code == 1000 and result.done is not None
        assert [f["utterance"] for f in result.finals] == [0, 1, 2]
        assert result.done["utterances"] == 3
    texts = {tuple(f["text"] for f in r.finals) for r in results}
    assert len(texts) == 1  # the same audio gives the same finals in every session
    assert server.metrics.value("kettle_sessions_total") == 20
    assert server.metrics.value("kettle_batch_size_sum") >= 60


def test_server_config_validation() -> None:
    with pytest.raises(ConfigError, match="max_sessions"):
        ServerConfig(max_sessions=0)
    with pytest.raises(ConfigError, match="TLS"):
        ServerConfig(tls_cert="a.pem")
    with pytest.raises(ConfigError, match="API keys"):
        ServerConfig(api_keys=("has space",))
    with pytest.raises(ConfigError, match="upload_budget_bytes"):
        ServerConfig(max_upload_bytes=1000, upload_budget_bytes=999)
    with pytest.raises(ConfigError, match="minimum rate"):
        ServerConfig(upload_min_bytes_per_s=-1)
    assert "secret" not in repr(ServerConfig(api_keys=("secret",)))


class _StalledSocket:
    """A connection whose peer sends audio at 10x real time but reads nothing until `gate`."""

    def __init__(self, incoming: list[str | bytes]) -> None:
        self.incoming = incoming
        self.gate = asyncio.Event()
        self.sent: list[dict[str, Any]] = []
        self.close_code: int | None = None

    async def receive(self) -> str | bytes | None:
        if self.incoming:
            item = self.incoming.pop(0)
            if isinstance(item, bytes):
                await asyncio.sleep(0.01)  # 100 ms of audio per 10 ms
            return item
        await asyncio.Event().wait()  # the peer says nothing more
        raise AssertionError("unreachable")

    async def send(self, text: str) -> None:
        await self.gate.wait()
        self.sent.append(json.loads(text))

    async def close(self, code: int = 1000, reason: str = "") -> None:
        self.close_code = code


async def test_stalled_reader_never_blocks_the_engine_and_gets_every_final() -> None:
    from kettle.streaming.engine.engine import Engine
    from kettle.streaming.protocols.base import CodecContext, ModelInfo
    from kettle.streaming.protocols.kettle_v1.live import KettleV1Codec
    from kettle.streaming.protocols.kettle_v1.wire import StreamSettings
    from kettle.streaming.protocols.limits import Limits
    from kettle.streaming.server.runner import ConnectionRunner

    chunks: list[str | bytes] = [PCM[i : i + 3200] for i in range(0, len(PCM), 3200)]
    ws = _StalledSocket([*chunks, '{"type": "stop"}'])
    async with Engine(FakeDecoder()) as engine:
        codec = KettleV1Codec(CodecContext("s1", ModelInfo("fake", False)), StreamSettings())
        runner = ConnectionRunner(ws, codec, engine, connection_id="s1", limits=Limits())
        running = asyncio.create_task(runner.run())
        # The engine finishes the whole stream although nothing was sent yet.
        while not (runner.outbox and "done" in list(runner.outbox)[-1].text):
            await asyncio.sleep(0.02)
        assert ws.sent == [] and engine.streams_open == 0
        assert runner.outbox.dropped_partials > 0
        ws.gate.set()
        await asyncio.wait_for(running, TIMEOUT)
    assert ws.close_code == 1000
    sent = ws.sent
    assert sent[0]["type"] == "ready"
    assert len(check_finals(sent)) == 3
    # at most one partial per utterance survived the wait, none after its final
    partials = [m for m in sent if m["type"] == "partial"]
    assert len(partials) <= 1


async def test_tls(make_server: Callable[..., Any], tmp_path: Path) -> None:
    import shutil
    import ssl
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    server = await make_server(tls_cert=str(cert), tls_key=str(key))
    assert server.url.startswith("https://") and server.ws_url.startswith("wss://")
    context = ssl.create_default_context(cafile=str(cert))
    async with connect(server.ws_url, ssl=context) as ws:
        assert json.loads(await ws.recv())["type"] == "ready"
        await ws.send('{"type": "stop"}')
        messages, code = await read_all(ws)
    assert code == 1000 and messages[-1]["type"] == "done"


async def test_failed_handshake_after_admission_frees_its_slot(
    make_server: Callable[..., Any],
) -> None:
    server = await make_server(max_sessions=1)
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    # An upgrade request without Sec-WebSocket-Key passes admission, then fails the handshake.
    writer.write(
        b"GET /v1/stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
    )
    await writer.drain()
    status = await asyncio.wait_for(reader.readline(), TIMEOUT)
    assert status.startswith(b"HTTP/1.1 400")
    writer.close()
    await asyncio.wait_for(server.wait_idle(), TIMEOUT)
    assert server.sessions_active == 0
    ws = await open_ws(server)  # the only slot is free again
    assert json.loads(await ws.recv())["type"] == "ready"
    await ws.close()


async def test_second_model_for_finals(make_server: Callable[..., Any]) -> None:
    partials, finals = FakeDecoder(name="fast"), FakeDecoder(name="accurate")
    server = await make_server((partials, finals))
    result = await stream_audio(AUDIO, ClientOptions(url=server.ws_url))
    assert result.ready is not None
    assert (result.ready["model"], result.ready["final_model"]) == ("fast", "accurate")
    assert len(result.finals) == 3
    assert finals.stats.requests >= 3


async def test_finals_that_never_come_end_the_session_with_1011(
    make_server: Callable[..., Any],
) -> None:
    server = await make_server(FakeDecoder(batch_delay_s=3.0), finish_timeout_s=0.3)
    ws = await open_ws(server)
    await send_chunks(ws, PCM[: 16000 * 2 * 2])
    await ws.send('{"type": "stop"}')
    messages, code = await read_all(ws)
    assert code == 1011
    assert messages[-1]["code"] == "internal" and messages[-1]["fatal"] is True
    await asyncio.wait_for(server.wait_idle(), TIMEOUT)


# -- /v1/info and keys in subprotocols ---------------------------------------------------------


async def test_info_says_whether_speakers_can_be_labelled(
    make_server: Callable[..., Any], start_server: Any
) -> None:
    from kettle.streaming.engine.speakers import SpeakerService
    from kettle.transcribe.speakers.fake import PitchSpeakerEncoder

    off = await make_server(diarize="off")
    assert json.loads((await get(off, "/v1/info"))[2])["speakers"] is False
    on = await start_server(
        ServerConfig(port=0), FakeDecoder, speakers=SpeakerService(PitchSpeakerEncoder())
    )
    assert json.loads((await get(on, "/v1/info"))[2])["speakers"] is True


async def test_info_describes_model_limits_and_protocols(make_server: Callable[..., Any]) -> None:
    server = await make_server(api_keys=("k-one",), max_sessions=3)
    status, headers, body = await get(server, "/v1/info")
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    info = json.loads(body)
    assert info["model"] == "fake" and info["multilingual"] is False
    assert info["languages"] == ["en"] and info["ready"] is True
    assert isinstance(info["speakers"], bool)  # whether "diarize" can be asked for
    assert info["auth"] == {"required": True}
    assert info["limits"]["max_sessions"] == 3
    assert info["limits"]["max_frame_bytes"] == 1 << 20
    assert info["protocols"]["kettle"]["path"] == "/v1/stream"
    assert info["protocols"]["kettle"]["versions"] == [1]
    assert info["limits"]["max_upload_bytes"] == 1 << 30 and info["limits"]["max_uploads"] == 4
    assert info["limits"]["upload_body_timeout_s"] == 1800.0
    assert info["limits"]["upload_body_grace_s"] == 10.0
    assert info["limits"]["upload_min_bytes_per_s"] == 16384
    assert info["limits"]["upload_budget_bytes"] == 4 << 30  # max_uploads maximal bodies
    openai_api, deepgram_api = info["rest"]["openai"], info["rest"]["deepgram"]
    assert openai_api["endpoints"]["transcriptions"] == {
        "method": "POST",
        "path": "/v1/audio/transcriptions",
    }
    assert deepgram_api["endpoints"]["listen"] == {"method": "POST", "path": "/v1/listen"}
    assert b"k-one" not in body
    # a presented key is checked: a wrong one is refused, a right one answered
    status, _, _ = await get(server, "/v1/info", headers={"Authorization": "Bearer nope"})
    assert status == 401
    status, _, _ = await get(server, "/v1/info", headers={"Authorization": "Bearer k-one"})
    assert status == 200
    assert server.metrics.value("kettle_sessions_total") == 0  # no session was opened


async def test_info_lists_the_rest_endpoints_it_serves(make_server: Callable[..., Any]) -> None:
    server = await make_server(api_keys=("k-one",), max_upload_bytes=1000, max_uploads=2)
    info = json.loads((await get(server, "/v1/info"))[2])
    assert (info["limits"]["max_upload_bytes"], info["limits"]["max_uploads"]) == (1000, 2)
    endpoints = [e for api in info["rest"].values() for e in api["endpoints"].values()]
    assert len(endpoints) == 5
    async with httpx.AsyncClient(base_url=server.url, timeout=TIMEOUT) as client:
        for endpoint in endpoints:
            path = endpoint["path"].replace("{model_id}", "whisper-1")
            answer = await client.request(endpoint["method"], path)
            assert answer.status_code == 401, endpoint  # served, and behind the key
        assert (await client.post("/v1/audio/nothing")).status_code in (404, 405)


async def test_info_while_the_model_loads() -> None:
    gate = asyncio.Event()
    loop = asyncio.get_running_loop()

    def slow_load() -> FakeDecoder:
        asyncio.run_coroutine_threadsafe(gate.wait(), loop).result(10)
        return FakeDecoder(name="late")

    server = KettleServer(ServerConfig(port=0), slow_load)
    await server.listen()
    loading = asyncio.create_task(server.load())
    try:
        info = json.loads((await get(server, "/v1/info"))[2])
        assert info["model"] is None and info["ready"] is False
        gate.set()
        await loading
        info = json.loads((await get(server, "/v1/info"))[2])
        assert info["model"] == "late" and info["ready"] is True
    finally:
        gate.set()
        await server.shutdown(timeout=2)


async def test_key_in_a_subprotocol(make_server: Callable[..., Any]) -> None:
    server = await make_server(api_keys=("k-one",))
    ws = await open_ws(server, subprotocols=["kettle.v1", "kettle-key.k-one"])
    assert ws.subprotocol == "kettle.v1"  # the key is never echoed
    assert json.loads(await ws.recv())["type"] == "ready"
    await ws.close()
    with pytest.raises(InvalidStatus) as info:
        await open_ws(server, subprotocols=["kettle.v1", "kettle-key.wrong"])
    assert info.value.response.status_code == 401
    assert info.value.response.headers["WWW-Authenticate"] == "Bearer"
    # a plain GET on the stream path answers as the handshake would: 401, then 426
    assert (await get(server, "/v1/stream"))[0] == 401
    status, headers, _ = await get(server, "/v1/stream", headers={"Authorization": "Bearer k-one"})
    assert status == 426 and headers["Upgrade"] == "websocket"


async def test_no_subprotocol_offered_none_echoed(server: KettleServer) -> None:
    ws = await open_ws(server)
    assert ws.subprotocol is None
    await ws.close()


# -- hardening: audio admission, origins, metrics key, page headers, loop lag ------------------


async def test_fast_client_is_slowed_down_and_loses_nothing(
    make_server: Callable[..., Any],
) -> None:
    rate, burst_s = 10.0, 1.0
    server = await make_server(audio_rate=rate, audio_burst_s=burst_s)
    long_pcm = PCM * 4  # ~30 s of audio, sent as fast as the socket takes it
    audio_s = len(long_pcm) / 2 / 16000
    started = time.monotonic()
    ws = await open_ws(server)
    await send_chunks(ws, long_pcm)
    await ws.send('{"type": "stop"}')
    messages, code = await read_all(ws)
    took_s = time.monotonic() - started
    assert code == 1000
    assert errors(messages) == []  # merely fast: no error
    assert len(check_finals(messages)) == 12  # and nothing lost
    assert messages[-1]["audio_seconds"] == round(audio_s, 3)
    # Reads paused: the server made the client wait (TCP pushed back on it) ...
    assert server.metrics.value("kettle_admission_paused_seconds_total") > 0
    # ... so the audio went in no faster than the admitted rate. A lower bound only: a loaded
    # machine makes the exchange longer, never shorter (how much of it was a pause depends on
    # how fast the starved client could send, so the pause total itself is not asserted).
    assert took_s >= 0.95 * (audio_s - burst_s) / rate


async def test_session_length_counts_audio_time(make_server: Callable[..., Any]) -> None:
    clock = ManualClock()  # frozen: only audio time can reach the limit
    server = await make_server(max_session_s=3.0, clock=clock)
    ws = await open_ws(server)
    await send_chunks(ws, PCM)  # 7.6 s of audio in no time at all
    messages, code = await read_all(ws)
    assert code == 1000
    done = messages[-1]
    assert done["type"] == "done" and done["reason"] == "max_duration"
    assert 3.0 <= done["audio_seconds"] < 3.2  # stopped at the message that reached 3 s
    check_finals(messages)


async def test_backlog_over_the_cap_gets_an_error_its_finals_and_a_close(
    make_server: Callable[..., Any],
) -> None:
    import threading

    gate = threading.Event()  # the model answers nothing until the test opens the gate
    decoder = FakeDecoder(fail=lambda _requests: not gate.wait(TIMEOUT))
    server = await make_server(decoder, max_backlog_s=2.0)
    ws = await open_ws(server)
    await send_chunks(ws, PCM)
    await ws.send('{"type": "stop"}')
    messages: list[dict[str, Any]] = []
    while not errors(messages):
        messages.append(json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT)))
    gate.set()
    rest, code = await read_all(ws)
    messages += rest
    assert errors(messages) == ["audio_backlog"]
    assert "not yet transcribed" in messages[-len(rest) - 1]["message"]
    assert code == 1008
    done = messages[-1]
    assert done["type"] == "done" and done["reason"] == "audio_backlog"
    assert 2.0 < done["audio_seconds"] < len(AUDIO) / 16000
    assert len(check_finals(messages)) >= 1  # what it held was transcribed, not dropped
    assert server.metrics.value("kettle_backlog_closes_total") == 1


async def test_origin_check_at_the_handshake(make_server: Callable[..., Any]) -> None:
    server = await make_server(allowed_origins=("https://app.example",))
    with pytest.raises(InvalidStatus) as info:
        await open_ws(server, origin="https://evil.example")
    assert info.value.response.status_code == 403
    assert server.metrics.value("kettle_sessions_rejected_total", {"reason": "origin"}) == 1
    for origin in [None, server.url, "http://localhost:3000", "https://app.example"]:
        ws = await open_ws(server, origin=origin)
        assert json.loads(await ws.recv())["type"] == "ready", origin
        await ws.close()


async def test_metrics_may_require_the_key(make_server: Callable[..., Any]) -> None:
    server = await make_server(api_keys=("k-one",), metrics_require_key=True)
    assert (await get(server, "/metrics"))[0] == 401
    assert (await get(server, "/metrics?token=wrong"))[0] == 401
    assert (await get(server, "/metrics?token=k-one"))[0] == 200
    status, _, body = await get(server, "/metrics", headers={"Authorization": "Bearer k-one"})
    assert status == 200 and b"kettle_sessions_active" in body
    assert (await get(server, "/healthz"))[0] == 200  # probes stay open
    open_server = await make_server(api_keys=("k-one",))  # by default /metrics is open
    assert (await get(open_server, "/metrics"))[0] == 200


async def test_page_has_csp_and_nosniff(server: KettleServer) -> None:
    status, headers, _ = await get(server, "/")
    assert status == 200
    csp = headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert headers["X-Content-Type-Options"] == "nosniff"


async def test_event_loop_lag_is_exported(server: KettleServer) -> None:
    async def observed() -> None:
        while server.metrics.value("kettle_event_loop_lag_seconds_count") < 3:
            await asyncio.sleep(0.05)

    await asyncio.wait_for(observed(), TIMEOUT)
    _, _, body = await get(server, "/metrics")
    assert b'kettle_event_loop_lag_seconds_bucket{le="0.02"}' in body


@pytest.mark.parametrize(
    ("path", "shape"),
    [
        ("/v2/nothing", "err_code"),
        ("/v3/nothing", "error"),
        ("/v1/realtime/nothing", "error"),
        ("/nowhere", None),
    ],
)
async def test_unknown_websocket_path_is_404_in_its_apis_shape(
    server: KettleServer, path: str, shape: str | None
) -> None:
    with pytest.raises(InvalidStatus) as info:
        await connect(server.url.replace("http", "ws") + path)
    response = info.value.response
    assert response.status_code == 404
    if shape is None:
        assert b"no WebSocket endpoint at /nowhere" in response.body
    else:
        body = json.loads(response.body)
        assert shape in body and "/v1/stream" in json.dumps(body)
