"""The cost profile kept on disk: keyed, versioned, never trusted when it does not match."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from kettle.transcribe.model import cost_cache, cost_probe
from kettle.transcribe.model.adapter import ModelConfig, WhisperAdapter
from kettle.transcribe.model.cost_cache import CostKey
from kettle.transcribe.model.costs import CostProfile

PROFILE = CostProfile(((1, 0.3), (2, 0.61)), ((1, 0.004), (8, 0.011)), device="cpu")
KEY = CostKey("tiny.en|/m:1:2", "cpu", "int8", 2, "AMD EPYC x2 lib 4.8.5")


def test_a_stored_profile_comes_back_for_its_key_only(tmp_path: Path) -> None:
    assert cost_cache.load(tmp_path, KEY) is None
    cost_cache.store(tmp_path, KEY, PROFILE)
    assert cost_cache.load(tmp_path, KEY) == PROFILE
    changes = ({"threads": 4}, {"replicas": 2}, {"compute_type": "float32"}, {"machine": "o"})
    for change in changes:
        assert cost_cache.load(tmp_path, dataclasses.replace(KEY, **change)) is None
    assert [p.suffix for p in tmp_path.iterdir()] == [".json"]  # no temporary file left


def test_a_profile_stored_before_replicas_existed_still_serves_one_replica(
    tmp_path: Path,
) -> None:
    cost_cache.store(tmp_path, KEY, PROFILE)
    path = cost_cache.path_for(tmp_path, KEY)
    stored = json.loads(path.read_text(encoding="utf-8"))
    assert "replicas" not in stored["key"]  # as every file written before replicas reads
    assert cost_cache.load(tmp_path, KEY) == PROFILE


def test_a_profile_of_an_older_probe_is_ignored(tmp_path: Path) -> None:
    old = dataclasses.replace(KEY, version=cost_cache.VERSION - 1)
    cost_cache.store(tmp_path, old, PROFILE)
    # Even under the current key's file name, a file whose key differs is not used.
    cost_cache.path_for(tmp_path, old).rename(cost_cache.path_for(tmp_path, KEY))
    assert cost_cache.load(tmp_path, KEY) is None


@pytest.mark.parametrize("text", ["", "{", "[]", '{"key": 1}', '{"profile": {}}'])
def test_a_broken_file_is_ignored_not_fatal(tmp_path: Path, text: str) -> None:
    cost_cache.path_for(tmp_path, KEY).write_text(text)
    assert cost_cache.load(tmp_path, KEY) is None


def test_a_broken_profile_under_the_right_key_is_ignored(tmp_path: Path) -> None:
    data = {"key": dataclasses.asdict(KEY), "profile": {"encode_s": {"0": -1}, "step_s": {}}}
    cost_cache.path_for(tmp_path, KEY).write_text(json.dumps(data))
    assert cost_cache.load(tmp_path, KEY) is None


def test_an_unwritable_folder_only_logs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    cost_cache.store(blocker / "costs", KEY, PROFILE)  # a folder under a file cannot exist
    assert "could not store" in caplog.text


def test_the_profile_round_trips_through_its_dict() -> None:
    assert CostProfile.from_dict(json.loads(json.dumps(PROFILE.to_dict()))) == PROFILE


@pytest.mark.slow  # loads the real model three times
def test_the_adapter_measures_once_per_key_then_reads_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    def probe(*args: object) -> CostProfile:
        calls.append("probe")
        return PROFILE

    monkeypatch.setattr(cost_probe, "measure", probe)
    first = WhisperAdapter(ModelConfig(name="tiny.en", threads=2))
    assert first.measure_costs(tmp_path) == PROFILE and calls == ["probe"]
    assert cost_cache.load(tmp_path, first.cost_key()) == PROFILE
    # A restart: a new adapter of the same model, device, compute type and threads.
    second = WhisperAdapter(ModelConfig(name="tiny.en", threads=2))
    assert second.cost_key() == first.cost_key()
    assert second.measure_costs(tmp_path) == PROFILE and calls == ["probe"]
    assert second.measure_costs(tmp_path, refresh=True) == PROFILE and len(calls) == 2
    # Another thread count is another key: measured again.
    other = WhisperAdapter(ModelConfig(name="tiny.en", threads=1))
    assert other.cost_key() != first.cost_key()
    other.measure_costs(tmp_path)
    assert len(calls) == 3 and len(list(tmp_path.glob("*.json"))) == 2
