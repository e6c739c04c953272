"""Fixtures shared by the server tests: in-process KettleServers on loopback.

``start_server`` starts one as it is told; ``make_server`` starts one on port 0 with this
module's ``server_settings`` over the model ``load_model`` loads, and ``server`` is one such
with nothing changed. A module overrides ``server_settings`` (its API key) or ``load_model``
(another fake, the real tiny.en) once instead of writing its own factory.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

import pytest
from kettle.streaming.engine.engine import EngineConfig
from kettle.streaming.server.server import KettleServer, ServerConfig
from kettle.transcribe.model.fake import FakeDecoder


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


class MakeServer(Protocol):
    def __call__(
        self,
        decoder: Any = None,
        *,
        engine: EngineConfig | None = None,
        clock: Callable[[], float] | None = None,
        speakers: Any = None,
        **settings: Any,
    ) -> Awaitable[KettleServer]: ...


@pytest.fixture
def server_settings() -> dict[str, Any]:
    """ServerConfig fields every server of a test gets; a module overrides it (its API key)."""
    return {}


@pytest.fixture
def load_model() -> Callable[[], Any]:
    """How a server loads its model when the test gives none: a fresh fake each time."""
    return FakeDecoder


@pytest.fixture
def make_server(
    start_server: StartServer, server_settings: dict[str, Any], load_model: Callable[[], Any]
) -> MakeServer:
    """``make_server(decoder=None, *, engine, clock, speakers, **settings)``: a started server
    on port 0 over ``decoder`` (else ``load_model``), ``settings`` over ``server_settings``."""

    def start(
        decoder: Any = None,
        *,
        engine: EngineConfig | None = None,
        clock: Callable[[], float] | None = None,
        speakers: Any = None,
        **settings: Any,
    ) -> Awaitable[KettleServer]:
        config = ServerConfig(port=0, **{**server_settings, **settings})
        load = load_model if decoder is None else lambda: decoder
        kwargs: dict[str, Any] = {} if clock is None else {"clock": clock}  # else the server's
        return start_server(config, load, engine, speakers=speakers, **kwargs)

    return start


@pytest.fixture
async def server(make_server: MakeServer) -> KettleServer:
    return await make_server()
