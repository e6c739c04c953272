"""The WebSocket handshake, per route: who may connect, with what settings, and which
subprotocol is echoed. No I/O: the app hands in the request, gets a decision back.

Every WebSocket protocol kettle serves is one `ProtocolRoute`: a path, how its clients present a
key (`credentials`), and how its handshake parameters become a codec (`prepare`). The order of
checks is the same for all (docs/protocol.md#connecting): the server's host guard first (400),
then the key (401), then the protocol's parameters (400), then, for a real upgrade, capacity
(503 with Retry-After). Checks that concern every protocol alike (Origin, per-key limits,
audio budgets) belong in `ConnectionGate.admit`, which runs them in that order for every
route. A route also says which of the server's limits is its idle timeout (`idle_timeout`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import parse_qs

from kettle.streaming.protocols.base import Codec, CodecContext, ModelInfo
from kettle.streaming.protocols.limits import Limits


def bearer_token(authorization: str | None) -> str | None:
    """The credentials of an `Authorization: Bearer KEY` header (scheme case-insensitive)."""
    if not authorization:
        return None
    scheme, _, credentials = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    credentials = credentials.strip()
    return credentials or None


@dataclass(frozen=True)
class HandshakeRequest:
    """What a handshake (or a plain GET on the same path) carries; header names lowercase."""

    path: str
    query: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    subprotocols: tuple[str, ...] = ()
    upgrade: bool = True  # a WebSocket upgrade, not a plain GET

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    def query_value(self, name: str) -> str | None:
        """The first value of a query parameter, read leniently (even from a bad query)."""
        values = parse_qs(self.query, keep_blank_values=True, errors="replace").get(name)
        return values[0] if values else None


class HandshakeRefused(Exception):
    """The protocol refuses the handshake with this HTTP status (400: bad parameters)."""

    def __init__(self, status: int, message: str, reason: str = "bad_query") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.reason = reason  # the label of kettle_sessions_rejected_total


@dataclass(frozen=True)
class Prepared:
    """A protocol's yes: the codec to run and the subprotocol to echo (None: none offered).
    `slots`: the session slots the connection holds, one per engine stream it drives."""

    make_codec: Callable[[CodecContext], Codec]
    subprotocol: str | None = None
    slots: int = 1


def server_idle_timeout(limits: Limits) -> float:
    """The idle timeout of a protocol that has none of its own: the server's."""
    return limits.idle_timeout_s


@dataclass(frozen=True)
class ProtocolRoute:
    """One WebSocket protocol on one path.

    - `credentials(request)`: every key the client presents, by any means this protocol
      allows (header, subprotocol, query); None entries for absent ones. All are checked, in
      constant time, so the answer does not tell which one was given.
    - `prepare(request, model)`: parse the protocol's parameters; `model` is None while the
      model loads. Raises HandshakeRefused for bad ones.
    - `refusal(status, message, headers)`: the HTTP body and content type a refusal uses
      (plain text unless the protocol's clients expect JSON).
    - `info`: what `GET /v1/info` says about this protocol.
    - `idle_timeout(limits)`: how long this protocol's connections may send nothing before
      they stop (default: the server's `idle_timeout_s`).
    """

    path: str
    name: str
    credentials: Callable[[HandshakeRequest], Sequence[str | None]]
    prepare: Callable[[HandshakeRequest, ModelInfo | None], Prepared]
    info: Mapping[str, Any] = field(default_factory=dict)
    refusal: Callable[[int, str], tuple[bytes, str]] | None = None
    idle_timeout: Callable[[Limits], float] = server_idle_timeout

    def connection_limits(self, limits: Limits) -> Limits:
        """The server's limits as this protocol's connections run under them."""
        return replace(limits, idle_timeout_s=self.idle_timeout(limits))


def plain_refusal(status: int, message: str) -> tuple[bytes, str]:
    return (message.rstrip("\n") + "\n").encode(), "text/plain; charset=utf-8"


def bearer_credentials(request: HandshakeRequest) -> str | None:
    """`Authorization: Bearer KEY` (scheme case-insensitive)."""
    return bearer_token(request.header("authorization"))


def subprotocol_credentials(request: HandshakeRequest, prefix: str) -> str | None:
    """A key carried as the subprotocol `<prefix><KEY>` (browsers cannot set headers)."""
    for offered in request.subprotocols:
        if offered.startswith(prefix) and len(offered) > len(prefix):
            return offered[len(prefix) :]
    return None


def choose_subprotocol(request: HandshakeRequest, supported: Sequence[str]) -> str | None:
    """The first offered subprotocol this protocol names (never one that carries a key).

    A browser fails a connection whose answer lacks a subprotocol it offered, so a protocol
    that lets keys travel as subprotocols must echo one of its plain names.
    """
    for offered in request.subprotocols:
        if offered in supported:
            return offered
    return None


__all__ = [
    "HandshakeRefused",
    "HandshakeRequest",
    "Prepared",
    "ProtocolRoute",
    "bearer_credentials",
    "choose_subprotocol",
    "plain_refusal",
    "server_idle_timeout",
    "subprotocol_credentials",
]
