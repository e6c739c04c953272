"""Which web pages may open a WebSocket to this server: the `Origin` check. No I/O.

Browsers send `Origin` with every WebSocket handshake and let any page connect anywhere, so
without this check any web site a visitor opens could drive a keyless local server from the
visitor's browser. Allowed by default: the server's own origin (its page) and pages served
from localhost. `--allowed-origins` adds origins (`scheme://host[:port]`), or `*` for any.
A handshake without `Origin` comes from a program, not a browser page, and is allowed (API
keys are what guard against programs). The server's own origin is judged against `Host`
only when the host guard (hosts.py) serves that host: a DNS-rebinding page names its own
host in both headers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from kettle.transcribe.errors import ConfigError

_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


def _origin_parts(origin: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of `scheme://host[:port]`, lowercased; None when malformed."""
    try:
        url = urlsplit(origin.strip())
        port = url.port
    except ValueError:
        return None
    scheme = url.scheme.lower()
    host = (url.hostname or "").lower()
    if scheme not in _DEFAULT_PORTS or not host or url.path not in ("", "/"):
        return None
    if url.query or url.fragment or url.username or url.password:
        return None
    return scheme, host, port if port is not None else _DEFAULT_PORTS[scheme]


def _host_parts(host_header: str, default_port: int) -> tuple[str, int] | None:
    try:
        url = urlsplit("//" + host_header.strip())
        port = url.port
    except ValueError:
        return None
    host = (url.hostname or "").lower()
    return (host, port if port is not None else default_port) if host else None


@dataclass(frozen=True)
class OriginPolicy:
    """`allowed`: extra origins as (scheme, host, port); `any_origin`: `*` was given."""

    allowed: frozenset[tuple[str, str, int]] = frozenset()
    any_origin: bool = False
    allow_localhost: bool = True

    @classmethod
    def parse(cls, origins: Sequence[str]) -> OriginPolicy:
        allowed = set()
        any_origin = False
        for text in origins:
            for item in (t.strip() for t in text.split(",")):
                if not item:
                    continue
                if item == "*":
                    any_origin = True
                    continue
                parts = _origin_parts(item)
                if parts is None:
                    raise ConfigError(f"allowed origin {item!r} is not scheme://host[:port] (or *)")
                allowed.add(parts)
        return cls(frozenset(allowed), any_origin)

    @property
    def hosts(self) -> frozenset[str]:
        """The hosts of the listed origins (this server may be reached by those names)."""
        return frozenset(host for _, host, _ in self.allowed)

    def allows(self, origin: str | None, host_header: str | None) -> bool:
        """May a page from `origin` connect, the request having named `host_header`?"""
        if origin is None:
            return True  # not a browser page
        if self.any_origin:
            return True
        parts = _origin_parts(origin)
        if parts is None:  # "null" (sandboxed frames, file://) and anything malformed
            return False
        scheme, host, port = parts
        if parts in self.allowed:
            return True
        if self.allow_localhost and host in _LOCAL_HOSTS:
            return True
        # Same origin: the page came from this server, as the client addressed it.
        if host_header is not None:
            target = _host_parts(host_header, _DEFAULT_PORTS[scheme])
            if target == (host, port):
                return True
        return False
