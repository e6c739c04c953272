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
from datetime import UTC, datetime
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
REPO = Path(__file__).resolve().parents[1]
# The real-speech benchmarks read the full eval set (48 clips), which lives outside the
# repository; tests/data/speech is only the tests' 24-clip subset.
SHARED_EVAL = REPO.parent / "shared" / "eval"
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
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
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


def eval_dir(override: Path | None = None) -> Path:
    """The eval set a benchmark reads: `override`, else $KETTLE_EVAL_DIR, else ../shared/eval."""
    if override is not None:
        return override
    env = os.environ.get("KETTLE_EVAL_DIR")
    return Path(env) if env else SHARED_EVAL


def require_eval_set(path: Path) -> str:
    """Stops the benchmark with a clear message when the eval set is missing.

    Returns the line that says which data was used; it is printed to stderr here, and the
    benchmark puts it in its JSON and its RESULTS.md section.
    """
    manifest = path / "manifest.tsv"
    if not manifest.is_file():
        sys.exit(
            f"{Path(sys.argv[0]).name}: no eval set at {path} (no manifest.tsv).\n"
            "The real-speech benchmarks read the full 48-clip eval set, which is kept outside "
            "the repository at ../shared/eval. Put it there or set KETTLE_EVAL_DIR=/path/to/eval "
            "(KETTLE_EVAL_DIR=tests/data/speech runs on the tests' 24-clip subset instead; its "
            "figures are not comparable with RESULTS.md)."
        )
    with open(manifest, encoding="utf-8") as fh:
        clips = sum(1 for _ in fh) - 1
    shown = "../shared/eval" if path.resolve() == SHARED_EVAL.resolve() else str(path)
    line = f"Data: real speech from the eval set at {shown} ({clips} clips; outside the repository)"
    if path.resolve() == (REPO / "tests" / "data" / "speech").resolve():
        line = f"Data: the tests' speech subset at tests/data/speech ({clips} clips)"
    print(line, file=sys.stderr, flush=True)
    return line


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
