"""What the routes use of the server, and nothing more: `Services`, handed to every route
provider (app.py) instead of the `KettleServer` that builds it.

The routes read the engine and the drain through `serving`, take sessions through the
`gate`, run them on `connections`, share the upload slots (`uploads`), check keys with the
`authenticator` and count on `metrics`; `config` is what /v1/info describes and the REST
APIs' Retry-After and model aliases; `web_root` holds the page.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kettle.streaming.protocols.base import ModelInfo
from kettle.streaming.server.access import Authenticator
from kettle.streaming.server.config import ServerConfig
from kettle.streaming.server.connections import Connections
from kettle.streaming.server.gate import ConnectionGate
from kettle.streaming.server.metrics import ServerMetrics
from kettle.streaming.server.serving import Serving
from kettle.streaming.server.uploads import Uploads

if TYPE_CHECKING:
    from kettle.streaming.engine.engine import Engine


@dataclass(frozen=True)
class Services:
    config: ServerConfig
    serving: Serving
    gate: ConnectionGate
    connections: Connections
    uploads: Uploads
    authenticator: Authenticator
    metrics: ServerMetrics
    web_root: Path

    @property
    def engine(self) -> Engine | None:
        """The engine, once the model is loaded."""
        return self.serving.engine

    @property
    def draining(self) -> bool:
        return self.serving.draining

    @property
    def model_info(self) -> ModelInfo | None:
        return self.serving.model_info

    @property
    def ready(self) -> bool:
        """Model loaded and not failing, not shutting down or draining, a session slot free,
        engine not overloaded: what a load balancer's health check asks (/readyz)."""
        engine = self.serving.engine
        return (
            engine is not None
            and engine.healthy
            and not self.serving.draining
            and not self.gate.full
            and not engine.overloaded
        )

    def unready_reason(self) -> str:
        engine = self.serving.engine
        if self.serving.draining:
            return "shutting down"
        if engine is None:
            return "loading model"
        if engine.model_failing:
            return "model failing"
        if not engine.healthy:
            return "engine stopped"
        if self.gate.full:
            return "at the session limit"
        return "overloaded"
