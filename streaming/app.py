"""The ASGI app: every route of the server on one port, built from small route modules.

Route order matters only for the static assets, whose catch-all comes last. To add routes,
append a provider to `ROUTE_PROVIDERS` (plain HTTP, REST) or a `ProtocolRoute` to
`websocket_protocols()` (a WebSocket protocol with its own codec); see
`kettle.streaming.protocols` for the whole recipe.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kettle.streaming import deepgram_http, http_routes, openai_routes
from kettle.streaming.handshake import ProtocolRoute
from kettle.streaming.host_guard import HostGuard
from kettle.streaming.protocols import deepgram, kettle_v1, openai_realtime
from kettle.streaming.ws_endpoint import WebSocketEndpoint, handshake_request, render_refusal
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, WebSocketRoute

if TYPE_CHECKING:
    from kettle.streaming.server import KettleServer

RouteProvider = Callable[["KettleServer"], list[BaseRoute]]


def websocket_protocols() -> list[ProtocolRoute]:
    """Every WebSocket protocol the server speaks, one path each."""
    return [kettle_v1.ROUTE, deepgram.ROUTE, openai_realtime.ROUTE]


def rest_apis() -> dict[str, Mapping[str, Any]]:
    """Every REST API the server speaks besides its plain GETs, by name: what GET /v1/info
    says of each (its endpoints, the body it takes)."""
    return {"openai": openai_routes.INFO, "deepgram": deepgram_http.INFO}


def websocket_routes(server: KettleServer) -> list[BaseRoute]:
    routes: list[BaseRoute] = []
    for protocol in websocket_protocols():
        routes.append(WebSocketRoute(protocol.path, WebSocketEndpoint(server, protocol)))
        routes.append(Route(protocol.path, _plain_get(server, protocol), methods=["GET"]))
    return routes


def _plain_get(server: KettleServer, protocol: ProtocolRoute) -> Callable[[Request], object]:
    """A GET without Upgrade on a WebSocket path: the handshake's checks, then 426. Lets a
    client (the page, curl) learn why a handshake would be refused: 401, 400 or 426."""

    async def endpoint(request: Request) -> Response:
        decision = server.admit(protocol, handshake_request(request.scope, upgrade=False))
        from kettle.streaming.server import Refusal

        assert isinstance(decision, Refusal)  # a plain GET is never admitted
        status, headers, body = render_refusal(protocol, decision)
        return Response(body, status, dict(headers))

    return endpoint


# Plain HTTP routes, in order; the assets' catch-all stays last.
ROUTE_PROVIDERS: tuple[RouteProvider, ...] = (
    http_routes.routes,
    deepgram_http.routes,
    openai_routes.routes,
    websocket_routes,
    http_routes.asset_routes,
)


def build_app(server: KettleServer) -> Starlette:
    routes: list[BaseRoute] = []
    for provider in ROUTE_PROVIDERS:
        routes.extend(provider(server))
    # The host guard (DNS rebinding) runs before every route, HTTP and WebSocket alike.
    guard = Middleware(HostGuard, policy=server.hosts, on_refused=server.host_refused)
    return Starlette(routes=routes, middleware=[guard])
