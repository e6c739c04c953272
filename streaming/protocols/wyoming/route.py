"""The route record the Wyoming listener's connections run under. No I/O.

The route is not mounted on the HTTP port: it gives the connection runner the codec to make
and the limits to run under (the server's, idle timeout included: a client that sends
nothing for that long, or stalls inside an event, gets a ``timeout`` error and the close).
Wyoming has no credentials, so there is nothing to check: bind the listener to an address
only trusted hosts reach (docs/wyoming.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from kettle.streaming.protocols.base import ModelInfo
from kettle.streaming.protocols.handshake import HandshakeRequest, Prepared, ProtocolRoute
from kettle.streaming.protocols.wyoming.address import DEFAULT_PORT
from kettle.streaming.protocols.wyoming.codec import (
    MAX_CHANNELS,
    MAX_RATE,
    MIN_RATE,
    WIDTHS,
    WyomingCodec,
)


def _credentials(request: HandshakeRequest) -> Sequence[str | None]:
    return ()


def _prepare(request: HandshakeRequest, model: ModelInfo | None) -> Prepared:
    return Prepared(WyomingCodec)


INFO = {
    "transport": "tcp",
    "default_port": DEFAULT_PORT,
    "widths": sorted(WIDTHS),
    "sample_rates": [MIN_RATE, MAX_RATE],
    "channels": [1, MAX_CHANNELS],
}

ROUTE = ProtocolRoute(
    path="tcp://", name="wyoming", credentials=_credentials, prepare=_prepare, info=INFO
)

__all__ = ["INFO", "ROUTE"]
