"""Which `Host` names this server answers to: the DNS-rebinding guard. No I/O.

A web page on evil.example can make its own name resolve to 127.0.0.1 (DNS rebinding). Its
requests then reach a local kettle with `Origin` and `Host` both naming evil.example, which
the origin check alone would take for the server's own page. A browser always sends the name
it resolved as `Host`, so answering only to names we know closes that hole. Allowed:

- the loopback names (`localhost`, `*.localhost`, which browsers resolve to loopback
  themselves) and any IP literal (an address resolves to nothing else, so it cannot be
  rebound);
- the name the server was bound to, the machine's own name, and the hosts of
  `--allowed-origins`;
- the names given with `--allowed-hosts` (`*.example.com` for a domain's subdomains), or `*`
  for any (behind a proxy that checks `Host` itself).

A request without `Host` (an HTTP/1.0 health check, HAProxy's `option httpchk`) comes from no
browser and is allowed.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kettle.transcribe.errors import ConfigError

LOOPBACK_NAMES = ("localhost", "*.localhost")

# host[:port] or [ipv6][:port]; a name is letters, digits, '-', '_' and dots.
_HOST_HEADER = re.compile(
    r"(?:\[(?P<ipv6>[0-9A-Fa-f:.]+(?:%[\w.~-]+)?)\]|(?P<name>[\w.-]+))(?::(?P<port>\d{1,5}))?"
)
_NAME = re.compile(r"[\w-]+(?:\.[\w-]+)*\.?")


def host_of(header: str) -> str | None:
    """The host a `Host` header names, lowercased, without port, brackets or trailing dot;
    None when the header is malformed."""
    match = _HOST_HEADER.fullmatch(header.strip())
    if match is None:
        return None
    if match["ipv6"] is not None:
        address = match["ipv6"].split("%", 1)[0]
        return address.lower() if _is_ip(address) else None
    name = match["name"].lower()
    return name[:-1] if name.endswith(".") and len(name) > 1 else name


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _pattern(text: str) -> str:
    """A host or `*.domain` pattern, normalised; ConfigError when it is neither."""
    item = text.strip().lower()
    if item.startswith("[") and item.endswith("]"):
        item = item[1:-1]
    if _is_ip(item):
        return item
    wildcard = item.startswith("*.")
    name = item[2:] if wildcard else item
    if not _NAME.fullmatch(name):
        raise ConfigError(
            f"allowed host {text.strip()!r} is not a host name, an address or *.domain "
            "(no scheme, no port)"
        )
    name = name.rstrip(".")
    return f"*.{name}" if wildcard else name


@dataclass(frozen=True)
class HostPolicy:
    """`names`: exact hosts; `domains`: suffixes (`.example.com`) from `*.example.com`."""

    names: frozenset[str] = frozenset({"localhost"})
    domains: frozenset[str] = frozenset({".localhost"})
    any_host: bool = False

    @classmethod
    def build(cls, allowed: Sequence[str], extra_names: Iterable[str | None] = ()) -> HostPolicy:
        """From `--allowed-hosts` items (comma-separated allowed), plus the loopback names and
        `extra_names` (the bound host, the machine's name, the allowed origins' hosts;
        addresses and None among them are skipped, as every address is allowed anyway)."""
        names: set[str] = set()
        domains: set[str] = set()
        any_host = False
        items = [t for text in allowed for t in text.split(",") if t.strip()]
        for item in items:
            if item.strip() == "*":
                any_host = True
                continue
            _add(_pattern(item), names, domains)
        for pattern in LOOPBACK_NAMES:
            _add(pattern, names, domains)
        for extra in extra_names:
            if extra and extra.strip() and not _is_ip(extra.strip().strip("[]")):
                try:
                    _add(_pattern(extra), names, domains)
                except ConfigError:
                    continue  # an odd machine name must not stop the server
        return cls(frozenset(names), frozenset(domains), any_host)

    def allows(self, host_header: str | None) -> bool:
        """May a request that named `host_header` be answered?"""
        if host_header is None or self.any_host:
            return True
        host = host_of(host_header)
        if host is None:
            return False
        if _is_ip(host) or host in self.names:
            return True
        return any(host.endswith(domain) for domain in self.domains)

    def describe(self) -> str:
        """The allowed names, for a log line."""
        if self.any_host:
            return "any host"
        shown = sorted(self.names) + sorted("*" + d for d in self.domains)
        return ", ".join(shown) + ", any IP address"


def _add(pattern: str, names: set[str], domains: set[str]) -> None:
    if pattern.startswith("*."):
        domains.add(pattern[1:])
    else:
        names.add(pattern)
