"""The host guard on a real server: DNS rebinding refused over HTTP and WebSocket alike.

A rebinding page is simulated the way a browser would send it: the connection goes to
127.0.0.1, while `Host` (and `Origin`) name the attacker's domain.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from kettle.streaming.server.server import KettleServer, ServerConfig
from kettle.transcribe.errors import ConfigError
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidStatus

if TYPE_CHECKING:
    from tests.conftest import Replica

TIMEOUT = 30


async def ws_as(server: KettleServer, host: str, origin: str | None) -> ClientConnection:
    """A WebSocket to the server's socket whose URL (so Host) names `host`."""
    return await connect(
        f"ws://{host}:{server.port}/v1/stream",
        host="127.0.0.1",
        port=server.port,
        origin=origin,  # type: ignore[arg-type]
        proxy=None,
    )


async def http_get(server: KettleServer, path: str, host: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=server.url, timeout=TIMEOUT, trust_env=False) as c:
        return await c.get(path, headers={"Host": host})


async def ready(ws: ClientConnection) -> None:
    message = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
    assert message["type"] == "ready"
    await ws.close()


async def test_a_rebinding_page_gets_no_session(make_server: Callable[..., Any]) -> None:
    server = await make_server()
    evil = f"http://evil.example:{server.port}"
    with pytest.raises(InvalidStatus) as info:
        await ws_as(server, "evil.example", origin=evil)  # Origin and Host agree: "same origin"
    response = info.value.response
    assert response.status_code == 400
    assert b"--allowed-hosts" in response.body and b"evil.example" in response.body
    assert server.metrics.value("kettle_hosts_refused_total", {"kind": "websocket"}) == 1
    assert server.metrics.value("kettle_sessions_rejected_total", {"reason": "host"}) == 1
    assert server.sessions_active == 0
    # The server's own page, by the names it is served under, still connects.
    for host in ["127.0.0.1", "localhost"]:
        await ready(await ws_as(server, host, origin=f"http://{host}:{server.port}"))


async def test_a_rebinding_page_reads_nothing_over_http(make_server: Callable[..., Any]) -> None:
    server = await make_server()
    port = server.port
    for path in ["/", "/v1/info", "/metrics", "/readyz", "/v1/stream"]:
        response = await http_get(server, path, f"evil.example:{port}")
        assert response.status_code == 400, path
        assert "--allowed-hosts" in response.text
    assert server.metrics.value("kettle_hosts_refused_total", {"kind": "http"}) == 5
    for host in [f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "10.0.0.7"]:
        assert (await http_get(server, "/v1/info", host)).status_code == 200, host
    assert (await http_get(server, "/v1/info", "bad host")).status_code == 400


async def test_a_request_without_host_is_served(make_server: Callable[..., Any]) -> None:
    """HAProxy's `option httpchk GET /readyz` sends HTTP/1.0 with no Host."""
    server = await make_server()
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"GET /readyz HTTP/1.0\r\n\r\n")
    await writer.drain()
    reply = await asyncio.wait_for(reader.read(), TIMEOUT)
    writer.close()
    assert reply.startswith(b"HTTP/1.1 200") and reply.endswith(b"ready\n")


async def test_listed_hosts_are_served_and_their_pages_are_same_origin(
    make_server: Callable[..., Any],
) -> None:
    server = await make_server(
        allowed_hosts=("kettle.example", "*.corp.example"),
        allowed_origins=("https://app.example",),
    )
    port = server.port
    await ready(await ws_as(server, "kettle.example", origin=f"http://kettle.example:{port}"))
    await ready(await ws_as(server, "asr.corp.example", origin=f"http://asr.corp.example:{port}"))
    assert (await http_get(server, "/v1/info", "app.example")).status_code == 200
    # The origin check still applies to a served host: another site's page is refused.
    with pytest.raises(InvalidStatus) as info:
        await ws_as(server, "kettle.example", origin="http://evil.example")
    assert info.value.response.status_code == 403


async def test_star_serves_any_host(make_server: Callable[..., Any]) -> None:
    server = await make_server(allowed_hosts=("*",))
    assert (await http_get(server, "/v1/info", "anything.example")).status_code == 200


def test_malformed_allowed_host_is_refused_at_start() -> None:
    with pytest.raises(ConfigError, match=r"allowed host 'kettle\.example:8765'"):
        ServerConfig(allowed_hosts=("kettle.example:8765",))


@pytest.mark.slow
async def test_kettle_serve_takes_allowed_hosts(serve_replica: Callable[..., Replica]) -> None:
    replica = serve_replica("--allowed-hosts", "kettle.example,*.corp.example")
    async with httpx.AsyncClient(base_url=replica.url, timeout=TIMEOUT, trust_env=False) as c:
        for host, status in [
            ("kettle.example", 200),
            ("a.corp.example", 200),
            ("evil.example", 400),
        ]:
            assert (await c.get("/v1/info", headers={"Host": host})).status_code == status, host
