"""The allowed-hosts policy (DNS-rebinding guard): which Host headers are served."""

from __future__ import annotations

import pytest
from kettle.streaming.server.hosts import HostPolicy, host_of
from kettle.transcribe.errors import ConfigError


@pytest.mark.parametrize(
    ("header", "host"),
    [
        ("Example.ORG:8765", "example.org"),
        ("example.org.", "example.org"),
        ("127.0.0.1:80", "127.0.0.1"),
        ("[::1]:8765", "::1"),
        ("[fe80::1%eth0]", "fe80::1"),
        (" localhost ", "localhost"),
        ("a b", None),
        ("evil.example@127.0.0.1", None),
        ("host:port", None),
        ("[not-v6]:1", None),
        ("example.org/path", None),
        ("", None),
    ],
)
def test_host_of_a_header(header: str, host: str | None) -> None:
    assert host_of(header) == host


def test_default_serves_loopback_names_and_addresses_only() -> None:
    policy = HostPolicy.build([])
    for header in ["localhost:8765", "LOCALHOST", "app.localhost:3000", "127.0.0.1:8765",
                   "[::1]:8765", "10.1.2.3", "[2001:db8::1]:443", None]:  # fmt: skip
        assert policy.allows(header), header
    # A rebinding page's own name, however it resembles a local one:
    for header in ["evil.example:8765", "localhost.evil.example", "evillocalhost", "bad host"]:
        assert not policy.allows(header), header


def test_bound_name_machine_name_and_origin_hosts_are_served() -> None:
    policy = HostPolicy.build([], ["kettle.lan", "0.0.0.0", None, "box", "app.example.com"])
    for header in ["kettle.lan:8765", "BOX", "app.example.com"]:
        assert policy.allows(header), header
    assert not policy.allows("other.lan")


def test_listed_hosts_and_domains() -> None:
    policy = HostPolicy.build(["kettle.example.com, *.internal.example", "[::1]"])
    assert policy.allows("kettle.example.com:443")
    assert policy.allows("a.internal.example") and policy.allows("b.a.internal.example:1")
    assert not policy.allows("internal.example")  # *.domain: subdomains only
    assert not policy.allows("example.com")
    assert "kettle.example.com" in policy.describe()


def test_star_serves_any_host() -> None:
    policy = HostPolicy.build(["*"])
    assert policy.allows("evil.example:8765")
    assert policy.describe() == "any host"


@pytest.mark.parametrize("bad", ["http://x.example", "x.example:8765", "a*.example", "*.", "a/b"])
def test_malformed_allowed_host_is_a_config_error(bad: str) -> None:
    with pytest.raises(ConfigError, match="allowed host"):
        HostPolicy.build([bad])


def test_odd_machine_name_is_skipped_not_fatal() -> None:
    policy = HostPolicy.build([], ["weird name!"])
    assert policy.allows("localhost") and not policy.allows("weird")
