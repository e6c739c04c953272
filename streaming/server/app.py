"""The ASGI app: every route of the server on one port, built from small route modules.

Route order matters only for the static assets, whose catch-all comes last. To add routes,
append a provider to `ROUTE_PROVIDERS` (plain HTTP, REST) or a `ProtocolRoute` to
`catalog.websocket_protocols()` (a WebSocket protocol with its own codec); see
`kettle.streaming.protocols` for the whole recipe.
"""

from __future__ import annotations

from collections.abc import Callable

from kettle.streaming.protocols.handshake import ProtocolRoute
from kettle.streaming.server import deepgram_routes as deepgram_http
from kettle.streaming.server import http_routes, openai_routes
from kettle.streaming.server.catalog import websocket_protocols
from kettle.streaming.server.gate import ConnectionGate, Refusal
from kettle.streaming.server.host_guard import HostGuard
from kettle.streaming.server.services import Services
from kettle.streaming.server.unknown_path import UnknownWebSocketPath
from kettle.streaming.server.ws_endpoint import WebSocketEndpoint, handshake_request, render_refusal
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, WebSocketRoute

RouteProvider = Callable[[Services], list[BaseRoute]]


def websocket_routes(services: Services) -> list[BaseRoute]:
    routes: list[BaseRoute] = []
    protocols = websocket_protocols()
    gate = services.gate
    for protocol in protocols:
        endpoint = WebSocketEndpoint(gate, services.connections, protocol)
        routes.append(WebSocketRoute(protocol.path, endpoint))
        routes.append(Route(protocol.path, _plain_get(gate, protocol), methods=["GET"]))
    # Any other path: 404 in its API's shape, not the 403 of an unanswered handshake.
    served = [protocol.path for protocol in protocols]
    routes.append(WebSocketRoute("/{path:path}", UnknownWebSocketPath(served)))
    return routes


def _plain_get(gate: ConnectionGate, protocol: ProtocolRoute) -> Callable[[Request], object]:
    """A GET without Upgrade on a WebSocket path: the handshake's checks, then 426. Lets a
    client (the page, curl) learn why a handshake would be refused: 401, 400 or 426."""

    async def endpoint(request: Request) -> Response:
        decision = gate.admit(protocol, handshake_request(request.scope, upgrade=False))
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


def build_app(services: Services) -> Starlette:
    routes: list[BaseRoute] = []
    for provider in ROUTE_PROVIDERS:
        routes.extend(provider(services))
    # The host guard (DNS rebinding) runs before every route, HTTP and WebSocket alike.
    gate = services.gate
    guard = Middleware(HostGuard, policy=gate.hosts, on_refused=gate.host_refused)
    return Starlette(routes=routes, middleware=[guard])
