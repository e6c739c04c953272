"""The Wyoming listener's address: ``--wyoming tcp://HOST:PORT``. No I/O, no imports of the
``wyoming`` library (the server's settings check it without loading the protocol)."""

from __future__ import annotations

from urllib.parse import urlsplit

DEFAULT_PORT = 10300  # the port Home Assistant users know from wyoming-faster-whisper
USAGE = "--wyoming takes tcp://HOST:PORT, e.g. tcp://0.0.0.0:10300"


def parse_uri(uri: str) -> tuple[str, int]:
    """(host, port) of ``tcp://HOST:PORT`` (IPv6 in brackets); ValueError with the usage."""
    try:
        parts = urlsplit(uri)
        host, port = parts.hostname, parts.port
    except ValueError:
        raise ValueError(f"{USAGE}; got {uri!r}") from None
    if parts.scheme != "tcp" or not host or port is None:
        raise ValueError(f"{USAGE}; got {uri!r}")
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        raise ValueError(f"{USAGE}; got {uri!r}")
    return host, port


__all__ = ["DEFAULT_PORT", "USAGE", "parse_uri"]
