"""What the server speaks: its WebSocket protocols and REST APIs, listed once for the app's
routes and for GET /v1/info."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kettle.streaming.protocols.assemblyai import live as assemblyai
from kettle.streaming.protocols.deepgram import flux as deepgram_flux
from kettle.streaming.protocols.deepgram import live as deepgram
from kettle.streaming.protocols.handshake import ProtocolRoute
from kettle.streaming.protocols.kettle_v1 import live as kettle_v1
from kettle.streaming.protocols.openai import realtime_route as openai_realtime_route
from kettle.streaming.server import deepgram_routes, openai_routes


def websocket_protocols() -> list[ProtocolRoute]:
    """Every WebSocket protocol the server speaks, one path each."""
    return [
        kettle_v1.ROUTE,
        deepgram.ROUTE,
        deepgram_flux.ROUTE,
        openai_realtime_route.ROUTE,
        assemblyai.ROUTE,
    ]


def rest_apis() -> dict[str, Mapping[str, Any]]:
    """Every REST API the server speaks besides its plain GETs, by name: what GET /v1/info
    says of each (its endpoints, the body it takes)."""
    return {"openai": openai_routes.INFO, "deepgram": deepgram_routes.INFO}
