"""``--wyoming-zeroconf``: the announcement, with a faked AsyncZeroconf (no multicast)."""

from __future__ import annotations

import sys
import types
from typing import Any, ClassVar

import pytest
from kettle.streaming.server import wyoming_zeroconf
from kettle.transcribe.errors import ConfigError


class FakeZeroconf:
    instances: ClassVar[list[FakeZeroconf]] = []

    def __init__(self) -> None:
        self.registered: list[Any] = []
        self.closed = False
        FakeZeroconf.instances.append(self)

    async def async_register_service(self, info: Any) -> None:
        self.registered.append(info)

    async def async_close(self) -> None:
        self.closed = True


class FakeServiceInfo:
    def __init__(self, type_: str, name: str, *, addresses: list[bytes], port: int) -> None:
        self.type, self.name, self.addresses, self.port = type_, name, addresses, port


@pytest.fixture
def fake_zeroconf(monkeypatch: pytest.MonkeyPatch) -> type[FakeZeroconf]:
    """zeroconf.asyncio as the wyoming library imports it, faked; wyoming.zeroconf reloaded."""
    package = types.ModuleType("zeroconf")
    package.__path__ = []
    asyncio_module = types.ModuleType("zeroconf.asyncio")
    asyncio_module.AsyncZeroconf = FakeZeroconf  # type: ignore[attr-defined]
    asyncio_module.AsyncServiceInfo = FakeServiceInfo  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "zeroconf", package)
    monkeypatch.setitem(sys.modules, "zeroconf.asyncio", asyncio_module)
    monkeypatch.delitem(sys.modules, "wyoming.zeroconf", raising=False)
    monkeypatch.setattr(wyoming_zeroconf, "check_available", lambda: None)
    FakeZeroconf.instances = []
    return FakeZeroconf


async def test_the_listener_is_announced_as_wyoming_and_withdrawn(
    fake_zeroconf: type[FakeZeroconf],
) -> None:
    announced = await wyoming_zeroconf.announce("kitchen", "tcp://127.0.0.1:10300", 10300)
    (zc,) = fake_zeroconf.instances
    (info,) = zc.registered
    assert info.type == "_wyoming._tcp.local." and info.name == "kitchen._wyoming._tcp.local."
    assert info.port == 10300 and info.addresses == [bytes([127, 0, 0, 1])]
    await announced.close()
    assert zc.closed


async def test_a_server_with_the_flag_announces_its_real_port(
    fake_zeroconf: type[FakeZeroconf], make_server: Any
) -> None:
    server = await make_server(wyoming="tcp://127.0.0.1:0", wyoming_zeroconf="kettle")
    (zc,) = fake_zeroconf.instances
    assert server.wyoming is not None and zc.registered[0].port == server.wyoming.port
    await server.shutdown(timeout=5)
    assert zc.closed


def test_without_the_package_the_flag_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(wyoming_zeroconf.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigError, match=r"pip install 'kettle\[zeroconf\]'"):
        wyoming_zeroconf.check_available()
