"""Where API keys come from: a key file, the environment, the command line. No logging of keys.

A key file holds one key per line; blank lines and lines starting with `#` are skipped.
`KETTLE_API_KEYS` holds keys separated by commas. Both keep keys out of `ps`, which shows a
process's arguments to every user of the machine; `--api-key` still works, with a warning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kettle.transcribe.errors import ConfigError

ENV_KEYS = "KETTLE_API_KEYS"
ARGV_WARNING = (
    "--api-key puts the key in the process's arguments, which `ps` shows to every user of "
    f"this machine; prefer --api-key-file FILE or {ENV_KEYS}"
)


@dataclass(frozen=True)
class LoadedKeys:
    keys: tuple[str, ...]
    warnings: tuple[str, ...]


def parse_key_file(text: str) -> list[str]:
    keys = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keys.append(line)
    return keys


def load_api_keys(
    argv_keys: Sequence[str], key_file: str | None, environ: Mapping[str, str]
) -> LoadedKeys:
    """Every configured key once, in a stable order; ConfigError for an unreadable file."""
    keys: list[str] = []
    warnings: list[str] = []
    if key_file is not None:
        try:
            from_file = parse_key_file(Path(key_file).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read the API key file {key_file}: {exc}") from None
        if not from_file:
            raise ConfigError(f"the API key file {key_file} holds no key")
        keys += from_file
    keys += [k.strip() for k in environ.get(ENV_KEYS, "").split(",") if k.strip()]
    if argv_keys:
        warnings.append(ARGV_WARNING)
        keys += argv_keys
    bad = [k for k in keys if not k or any(c.isspace() for c in k)]
    if bad:
        raise ConfigError("API keys must be non-empty and contain no whitespace")
    return LoadedKeys(tuple(dict.fromkeys(keys)), tuple(warnings))
