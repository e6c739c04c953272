"""`kettle serve`'s options: the engine's cadence and cost cache, the server's settings."""

from __future__ import annotations

from pathlib import Path

import pytest
from kettle.streaming.cli.main import build_parser
from kettle.streaming.cli.serve import _engine_config, _server_config
from kettle.streaming.engine.engine import EngineConfig


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


def test_serve_releases_free_memory_once_a_minute_unless_told_not_to() -> None:
    assert engine_config().release_memory_s == 60.0
    assert engine_config("--release-memory-s", "5").release_memory_s == 5.0
    assert engine_config("--release-memory-s", "0").release_memory_s is None


def test_openai_aliases_are_a_comma_separated_list() -> None:
    from kettle.streaming.protocols.openai.rest import MODEL_ALIASES

    parse = build_parser().parse_args
    assert parse(["serve"]).openai_aliases == MODEL_ALIASES
    assert parse(["serve", "--openai-aliases", "whisper-1, house-stt"]).openai_aliases == (
        "whisper-1",
        "house-stt",
    )
    assert parse(["serve", "--openai-aliases", ""]).openai_aliases == ()


def test_the_deepgram_audio_timeout_flag_reaches_the_server_config() -> None:
    parse = build_parser().parse_args
    assert _server_config(parse(["serve"]), ()).deepgram_audio_timeout_s == 10.0  # Deepgram's
    config = _server_config(parse(["serve", "--deepgram-audio-timeout", "2.5"]), ())
    assert config.deepgram_audio_timeout_s == 2.5 and config.idle_timeout_s == 60.0


def test_upload_pace_and_budget_flags() -> None:
    parse = build_parser().parse_args
    config = _server_config(parse(["serve"]), ())
    assert (config.upload_body_timeout_s, config.upload_body_grace_s) == (1800.0, 10.0)
    assert config.upload_min_bytes_per_s == 16 << 10 and config.upload_budget_bytes is None
    flags = ["--upload-body-timeout", "60", "--upload-body-grace", "2", "--upload-min-rate", "0"]
    config = _server_config(parse(["serve", *flags, "--upload-budget-mb", "2048"]), ())
    assert (config.upload_body_timeout_s, config.upload_body_grace_s) == (60.0, 2.0)
    assert config.upload_min_bytes_per_s == 0 and config.upload_budget_bytes == 2048 << 20
    assert config.upload_pace().cutoff(0) == (60.0, "deadline")  # 0: any rate
