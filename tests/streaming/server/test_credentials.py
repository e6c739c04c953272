"""API keys from a file, the environment and the command line."""

from __future__ import annotations

from pathlib import Path

import pytest
from kettle.streaming.server.credentials import ARGV_WARNING, load_api_keys, parse_key_file
from kettle.transcribe.errors import ConfigError


def test_key_file_skips_blanks_and_comments() -> None:
    assert parse_key_file("# ops keys\n\n  k1  \nk2\n#k3\n") == ["k1", "k2"]


def test_all_sources_merge_once_and_argv_warns(tmp_path: Path) -> None:
    key_file = tmp_path / "keys"
    key_file.write_text("from-file\nshared\n")
    loaded = load_api_keys(["argv", "shared"], str(key_file), {"KETTLE_API_KEYS": "env1, env2,"})
    assert loaded.keys == ("from-file", "shared", "env1", "env2", "argv")
    assert loaded.warnings == (ARGV_WARNING,)
    quiet = load_api_keys([], str(key_file), {})
    assert quiet.keys == ("from-file", "shared") and quiet.warnings == ()
    assert load_api_keys([], None, {}).keys == ()


def test_bad_sources_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_api_keys([], str(tmp_path / "missing"), {})
    (tmp_path / "empty").write_text("# nothing\n")
    with pytest.raises(ConfigError, match="holds no key"):
        load_api_keys([], str(tmp_path / "empty"), {})
    with pytest.raises(ConfigError, match="whitespace") as info:
        load_api_keys(["two words"], None, {})
    assert "two words" not in str(info.value)  # never echo a key
