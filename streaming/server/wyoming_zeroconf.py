"""``--wyoming-zeroconf NAME``: announce the Wyoming listener over mDNS (``_wyoming._tcp``), so
Home Assistant discovers kettle, as ``wyoming-faster-whisper --zeroconf`` does (with the
``wyoming`` library's `HomeAssistantZeroconf`). Off by default; it needs the ``zeroconf``
package (``pip install 'kettle[zeroconf]'``), which the library imports only for this.

A listener bound to every address (0.0.0.0, ::) is announced at the machine's LAN address
(the library finds it), never at the wildcard, which no client could reach.
"""

from __future__ import annotations

import importlib.util
import logging
from typing import Any

from kettle.streaming.protocols.wyoming.address import parse_uri
from kettle.transcribe.errors import ConfigError

logger = logging.getLogger(__name__)

SERVICE_TYPE = "_wyoming._tcp.local."
MISSING = "--wyoming-zeroconf needs the zeroconf package: pip install 'kettle[zeroconf]'"
WILDCARDS = ("0.0.0.0", "::", "")


def check_available() -> None:
    """ConfigError when the zeroconf package is not installed."""
    if importlib.util.find_spec("zeroconf") is None:
        raise ConfigError(MISSING)


class Announcement:
    """A registered service; `close()` withdraws it (a goodbye packet) and stops mDNS."""

    def __init__(self, announcer: Any) -> None:
        self._announcer = announcer

    @property
    def name(self) -> str:
        return str(self._announcer.name)

    @property
    def host(self) -> str:
        return str(self._announcer.host)

    async def close(self) -> None:
        # The library keeps its AsyncZeroconf to itself; closing it unregisters the service.
        await self._announcer._aiozc.async_close()


async def announce(name: str, uri: str, port: int) -> Announcement:
    """Register ``NAME._wyoming._tcp.local.`` at the listener's address and ``port``."""
    check_available()
    from wyoming.zeroconf import HomeAssistantZeroconf

    host, _ = parse_uri(uri)
    announcer = HomeAssistantZeroconf(
        port=port, name=name, host=None if host in WILDCARDS else host
    )
    await announcer.register_server()
    logger.info("announced as %s.%s at %s:%d", name, SERVICE_TYPE, announcer.host, port)
    return Announcement(announcer)


__all__ = ["MISSING", "SERVICE_TYPE", "Announcement", "announce", "check_available"]
