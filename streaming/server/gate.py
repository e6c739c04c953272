"""The connection gate: which handshakes get a session slot, and what a refused one answers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kettle.streaming.protocols.base import ModelInfo
from kettle.streaming.protocols.handshake import (
    HandshakeRefused,
    HandshakeRequest,
    Prepared,
    ProtocolRoute,
)
from kettle.streaming.protocols.limits import Limits
from kettle.streaming.server.access import Authenticator, SessionSlots
from kettle.streaming.server.hosts import HostPolicy
from kettle.streaming.server.metrics import ServerMetrics
from kettle.streaming.server.origins import OriginPolicy


@dataclass(frozen=True)
class Refusal:
    """A refused handshake: the HTTP status, a message for the client, extra headers."""

    status: int
    message: str
    reason: str  # the label of kettle_sessions_rejected_total
    headers: Mapping[str, str] = field(default_factory=dict)


_BEARER_CHALLENGE = {"WWW-Authenticate": "Bearer"}


class ConnectionGate:
    """Who may open a session: the key (401), parameters (400), origin (403), upgrade (426),
    then capacity (503 + Retry-After); it holds the session slots (`Limits.max_sessions`) and
    counts every refusal."""

    def __init__(
        self,
        *,
        authenticator: Authenticator,
        origins: OriginPolicy,
        hosts: HostPolicy,
        metrics: ServerMetrics,
        limits: Limits,
        retry_after_s: int,
        draining: Callable[[], bool],
        model_info: Callable[[], ModelInfo | None],
    ) -> None:
        self.authenticator = authenticator
        self.origins = origins
        self.hosts = hosts
        self.metrics = metrics
        self._retry_after_s = retry_after_s
        self._draining = draining
        self._model_info = model_info  # None while the model loads
        self._slots = SessionSlots(limits.max_sessions)
        self._idle = asyncio.Event()  # set while no session holds a slot
        self._idle.set()

    @property
    def active(self) -> int:
        """Sessions holding a slot."""
        return self._slots.active

    @property
    def full(self) -> bool:
        return self._slots.full

    @property
    def idle(self) -> bool:
        return self._idle.is_set()

    async def wait_idle(self) -> None:
        """Return once no session holds a slot."""
        await self._idle.wait()

    def check(self, route: ProtocolRoute, request: HandshakeRequest) -> Refusal | Prepared:
        """The checks that need no capacity: the key (401) first, then parameters (400)."""
        if not self.authenticator.allows_any(route.credentials(request)):
            return self._reject(
                Refusal(401, "a valid API key is required", "unauthorized", _BEARER_CHALLENGE)
            )
        try:
            return route.prepare(request, self._model_info())
        except HandshakeRefused as exc:
            return self._reject(Refusal(exc.status, exc.message, exc.reason))

    def admit(self, route: ProtocolRoute, request: HandshakeRequest) -> Refusal | Prepared:
        """A WebSocket handshake: check(), then capacity (503 + Retry-After). An admitted
        handshake holds its session slots (one per engine stream: `Prepared.slots`); the caller
        releases them with `release_slot(slots)` once the connection has closed, whatever
        happened in between."""
        decision = self.check(route, request)
        if isinstance(decision, Refusal):
            return decision
        origin, host = request.header("origin"), request.header("host")
        # Same origin only as a host this server answers to (the guard has refused others
        # already): a rebinding page names its own host in both headers.
        if not self.origins.allows(origin, host if host and self.hosts.allows(host) else None):
            # A page from another site, driving a visitor's browser: refused before capacity.
            return self._reject(Refusal(403, f"pages from {origin} may not connect here", "origin"))
        if not request.upgrade:
            return self._reject(
                Refusal(
                    426,
                    f"{route.path} takes WebSocket connections",
                    "not_websocket",
                    {"Upgrade": "websocket"},
                )
            )
        return self.reserve(decision.slots) or decision

    def reserve(self, slots: int = 1) -> Refusal | None:
        """Capacity only (503 + Retry-After; 400 past what ever runs at once): the last check
        of a handshake, and all a listener without one (Wyoming) asks. None: the slots are
        held, until `release_slot(slots)`."""
        retry = {"Retry-After": str(self._retry_after_s)}
        if self._draining():
            return self._reject(Refusal(503, "server is shutting down", "shutting_down", retry))
        if self._model_info() is None:
            return self._reject(Refusal(503, "model is loading", "loading", retry))
        if slots > self._slots.limit:
            # More streams than the server ever runs at once: no retry would help.
            message = f"{slots} streams asked, at most {self._slots.limit} run at once"
            return self._reject(Refusal(400, message, "session_limit"))
        if not self._slots.try_acquire(slots):
            return self._reject(Refusal(503, "too many sessions", "session_limit", retry))
        self.metrics.sessions_active.set(self._slots.active)
        self._idle.clear()
        return None

    def host_refused(self, kind: str) -> None:
        """Count a request the host guard refused (kind: "http" or "websocket")."""
        self.metrics.hosts_refused.labels(kind=kind).inc()
        if kind == "websocket":
            self.metrics.sessions_rejected.labels(reason="host").inc()

    def release_slot(self, count: int = 1) -> None:
        self._slots.release(count)
        self.metrics.sessions_active.set(self._slots.active)
        if self._slots.active == 0:
            self._idle.set()

    def _reject(self, refusal: Refusal) -> Refusal:
        self.metrics.sessions_rejected.labels(reason=refusal.reason).inc()
        return refusal
