"""`kettle serve`'s engine options: cadence and the cost cache."""

from __future__ import annotations

from pathlib import Path

import pytest
from kettle.streaming.cli import build_parser
from kettle.streaming.cli_serve import _engine_config
from kettle.streaming.engine import EngineConfig


def engine_config(*flags: str) -> EngineConfig:
    return _engine_config(build_parser().parse_args(["serve", *flags]))


def test_defaults_pace_partials_by_cost_and_cache_the_costs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KETTLE_CACHE_DIR", str(tmp_path))
    config = engine_config()
    assert config.adaptive_cadence is True
    assert config.cost_cache == tmp_path / "costs"
    assert config.remeasure_costs is False


def test_fixed_cadence_and_cost_cache_flags() -> None:
    config = engine_config("--fixed-cadence", "--no-cost-cache", "--batch-size", "2")
    assert config.adaptive_cadence is False
    assert config.cost_cache is None
    assert config.scheduler.max_batch_size == 2
    assert engine_config("--remeasure-costs").remeasure_costs is True


@pytest.mark.parametrize(("flags", "capped"), [((), 1), (("--fake-model",), 0)])
def test_serve_caps_malloc_arenas_before_serving_a_real_model(
    monkeypatch: pytest.MonkeyPatch, flags: tuple[str, ...], capped: int
) -> None:
    from kettle.streaming import cli_serve, server

    calls: list[str] = []

    def fake_cap() -> bool:
        calls.append("cap")
        return True

    monkeypatch.setattr(cli_serve, "limit_malloc_arenas", fake_cap)

    async def fake_serve(*_args: object, **_kwargs: object) -> int:
        calls.append("serve")  # the model would load here, on the loop's threads
        return 0

    monkeypatch.setattr(server, "serve_until_signalled", fake_serve)
    args = build_parser().parse_args(["serve", "--port", "0", *flags])
    assert args.func(args) == 0
    assert calls == ["cap"] * capped + ["serve"]
