"""``--wyoming``: only tcp://HOST:PORT, every other form refused with the usage."""

from __future__ import annotations

import pytest
from kettle.streaming.protocols.wyoming.address import USAGE, parse_uri
from kettle.streaming.server.config import ServerConfig
from kettle.transcribe.errors import ConfigError


@pytest.mark.parametrize(
    ("uri", "expected"),
    [("tcp://127.0.0.1:10300", ("127.0.0.1", 10300)), ("tcp://0.0.0.0:0", ("0.0.0.0", 0)),
     ("tcp://[::1]:10300", ("::1", 10300)), ("tcp://kettle.local:10300/", ("kettle.local", 10300))],
)  # fmt: skip
def test_tcp_addresses(uri: str, expected: tuple[str, int]) -> None:
    assert parse_uri(uri) == expected


@pytest.mark.parametrize(
    "uri",
    ["unix:///tmp/kettle.sock", "stdio://", "tcp://127.0.0.1", "tcp://:10300", "10300",
     "tcp://127.0.0.1:99999", "tcp://h:1/path", "tcp://h:1?x=1", "ws://h:1"],
)  # fmt: skip
def test_other_forms_are_refused_with_the_usage(uri: str) -> None:
    with pytest.raises(ValueError, match="tcp://HOST:PORT"):
        parse_uri(uri)
    with pytest.raises(ConfigError, match="tcp://HOST:PORT"):
        ServerConfig(wyoming=uri)


def test_zeroconf_needs_the_listener() -> None:
    with pytest.raises(ConfigError, match="--wyoming-zeroconf"):
        ServerConfig(wyoming_zeroconf="kettle")
    assert USAGE.startswith("--wyoming")
