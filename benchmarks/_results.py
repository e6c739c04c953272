"""Shared plumbing for benchmark scripts: machine description and RESULTS.md sections.

Each benchmark owns one section of benchmarks/RESULTS.md between markers, so scripts can be
re-run independently without clobbering each other's figures.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
HEADER = "# kettle benchmark results\n\nEach section is written by the script it names.\n"


def machine_info() -> dict[str, object]:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    info: dict[str, object] = {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    try:
        import ctranslate2

        info["ctranslate2"] = ctranslate2.__version__
        info["cuda_devices"] = ctranslate2.get_cuda_device_count()
    except Exception:  # pragma: no cover - benchmarks report what they can
        pass
    with contextlib.suppress(OSError):
        info["git"] = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip()
    return info


def markdown_table(rows: list[dict[str, object]], columns: list[str]) -> str:
    head = "| " + " | ".join(columns) + " |\n|" + "---|" * len(columns) + "\n"
    body = "".join(
        "| " + " | ".join(_fmt(row.get(col, "")) for col in columns) + " |\n" for row in rows
    )
    return head + body


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value)


def write_section(name: str, body: str) -> None:
    """Replace (or append) the section named `name` in RESULTS.md."""
    command = "python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]])
    machine = json.dumps(machine_info())
    section = (
        f"<!-- {name}:start -->\n## {name}\n\nCommand: `{command}`\n\nMachine: `{machine}`\n\n"
        f"{body.strip()}\n<!-- {name}:end -->\n"
    )
    text = RESULTS.read_text(encoding="utf-8") if RESULTS.exists() else HEADER
    marker = re.escape(name)
    pattern = re.compile(rf"<!-- {marker}:start -->.*?<!-- {marker}:end -->\n?", re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _m: section, text)
    else:
        text = text.rstrip() + "\n\n" + section
    RESULTS.write_text(text, encoding="utf-8")
