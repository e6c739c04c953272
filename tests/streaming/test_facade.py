"""The public facade: every name in kettle.streaming.__all__ resolves to its home module."""

from __future__ import annotations

import importlib

import kettle.streaming as facade
import pytest


@pytest.mark.parametrize("name", facade.__all__)
def test_facade_name_is_the_home_modules_object(name: str) -> None:
    home = importlib.import_module(f"kettle.streaming.{facade._HOMES[name]}")
    assert getattr(facade, name) is getattr(home, name)


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError):
        _ = facade.NoSuchThing
