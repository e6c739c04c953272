"""Fixtures shared by the server tests: in-process KettleServers on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

import pytest
from kettle.streaming.engine.engine import EngineConfig
from kettle.streaming.server.server import KettleServer, ServerConfig


class StartServer(Protocol):
    def __call__(
        self,
        config: ServerConfig,
        load: Callable[[], Any],
        engine: EngineConfig | None = None,
        **kwargs: Any,
    ) -> Awaitable[KettleServer]: ...


@pytest.fixture
async def start_server() -> AsyncIterator[StartServer]:
    """Start a KettleServer (``KettleServer(config, load, engine, **kwargs)``, config on
    port 0); every server a test started is shut down after it."""
    servers: list[KettleServer] = []

    async def start(
        config: ServerConfig,
        load: Callable[[], Any],
        engine: EngineConfig | None = None,
        **kwargs: Any,
    ) -> KettleServer:
        server = KettleServer(config, load, engine, **kwargs)
        await server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.shutdown(timeout=10)
