"""`kettle models`: the known models, whether each is installed, and how to get the rest."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from kettle.transcribe.model.models import DEFAULT_MODEL, ModelInfo, list_models


def register_models(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "models",
        help="list the known models and whether each is installed",
        description=(
            "List the packaged models (tiny.en, the default; base, multilingual), plus any local "
            "CTranslate2 folders or Hugging Face ids given, with whether each is installed."
        ),
    )
    parser.add_argument(
        "extra",
        nargs="*",
        metavar="MODEL",
        help="also describe these local CTranslate2 folders or Hugging Face ids",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(func=run_models)


def run_models(args: argparse.Namespace) -> int:
    infos = list_models(args.extra)
    text = io.StringIO()
    if args.json:
        print_json(infos, text)
    else:
        print_table(infos, text)
    try:
        sys.stdout.write(text.getvalue())
        sys.stdout.flush()
    except BrokenPipeError:  # `kettle models | head`: the reader left, nothing to report
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _as_dict(info: ModelInfo) -> dict[str, Any]:
    return {
        "name": info.name,
        "description": info.description,
        "installed": info.installed,
        "default": info.name == DEFAULT_MODEL,
        "multilingual": info.multilingual,
        "source": info.source,
        "path": str(info.path) if info.path else None,
        "hint": info.hint or None,
    }


def print_json(infos: Sequence[ModelInfo], out: TextIO) -> None:
    json.dump([_as_dict(i) for i in infos], out, indent=2)
    out.write("\n")


def _where(info: ModelInfo) -> str:
    if info.path is not None:
        return f"{info.source}: {info.path}"
    if info.installed and info.source == "package":
        return f"{info.source}: joined into the cache on first use"
    return info.source


def print_table(infos: Sequence[ModelInfo], out: TextIO) -> None:
    header = ("NAME", "INSTALLED", "MULTILINGUAL", "SOURCE / PATH")
    rows = [
        (
            info.name + (" (default)" if info.name == DEFAULT_MODEL else ""),
            "yes" if info.installed else "no",
            "yes" if info.multilingual else "no",
            _where(info),
        )
        for info in infos
    ]
    widths = [max(len(r[c]) for r in (header, *rows)) for c in range(3)]
    for row in (header, *rows):
        cells = [row[c].ljust(widths[c]) for c in range(3)]
        out.write("  ".join([*cells, row[3]]).rstrip() + "\n")
    missing = [i for i in infos if not i.installed and i.hint]
    if missing:
        out.write("\n")
        for info in missing:
            out.write(f"{info.name}: {info.hint}\n")
