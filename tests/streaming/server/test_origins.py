"""The Origin check at the WebSocket handshake."""

from __future__ import annotations

import pytest
from kettle.streaming.server.origins import OriginPolicy
from kettle.transcribe.errors import ConfigError


def test_default_allows_same_origin_localhost_and_programs() -> None:
    policy = OriginPolicy()
    assert policy.allows(None, "example.org:8765")  # no Origin: not a browser page
    assert policy.allows("http://example.org:8765", "example.org:8765")  # the server's page
    assert policy.allows("https://Example.org", "example.org:443")  # default port either way
    assert policy.allows("http://localhost:3000", "example.org:8765")
    assert policy.allows("http://127.0.0.1:9", "10.0.0.2:8765")
    assert policy.allows("http://[::1]:8080", "10.0.0.2:8765")
    assert not policy.allows("https://evil.example", "127.0.0.1:8765")
    assert not policy.allows("http://example.org:8766", "example.org:8765")  # another port
    assert not policy.allows("null", "127.0.0.1:8765")  # sandboxed frame or file://
    assert not policy.allows("not a url", "127.0.0.1:8765")
    assert not policy.allows("https://evil.example", None)


def test_listed_origins_and_any() -> None:
    policy = OriginPolicy.parse(["https://app.example.com, http://tool.local:8080"])
    assert policy.allows("https://app.example.com", "kettle.internal:8765")
    assert policy.allows("https://APP.example.com:443", "kettle.internal:8765")
    assert policy.allows("http://tool.local:8080", "kettle.internal:8765")
    assert not policy.allows("http://app.example.com", "kettle.internal:8765")  # scheme counts
    assert not policy.allows("https://other.example.com", "kettle.internal:8765")
    assert OriginPolicy.parse(["*"]).allows("https://anything.example", "h:1")


@pytest.mark.parametrize("bad", ["app.example.com", "https://x/path", "ftp://x", "https://"])
def test_malformed_allowed_origin_is_a_config_error(bad: str) -> None:
    with pytest.raises(ConfigError):
        OriginPolicy.parse([bad])
