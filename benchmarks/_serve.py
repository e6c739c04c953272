"""`kettle serve` as a subprocess for benchmarks: started on an ephemeral port, stopped.

The server prints ``kettle serving on http://HOST:PORT`` once it listens; `start_kettle`
waits for that line, so a benchmark starts measuring only when the server takes clients.
"""

from __future__ import annotations

import contextlib
import re
import select
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import IO, Any

SERVING = re.compile(r"kettle serving on (http://\S+)\n")


def start_kettle(
    serve_args: Sequence[str],
    *,
    python: str = sys.executable,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    stderr: IO[str] | None = None,
    timeout_s: float = 600.0,
) -> tuple[subprocess.Popen[str], str]:
    """``python -m kettle.streaming.cli.main serve --port 0 SERVE_ARGS``; returns the process and
    its base URL (http://HOST:PORT) once it serves. ``env`` replaces the environment and
    ``stderr`` takes the server's log (both: as the caller's, when None); a server that has
    not started within ``timeout_s`` is killed."""
    cmd = [python, "-m", "kettle.streaming.cli.main", "serve", "--port", "0", *serve_args]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        cwd=cwd,
        env=None if env is None else dict(env),
    )
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
    line = proc.stdout.readline() if ready else ""
    match = SERVING.fullmatch(line)
    if not match:
        proc.kill()
        proc.wait(30)
        raise SystemExit(f"server did not start: {line!r}")
    return proc, match.group(1)


def stop_server(proc: subprocess.Popen[Any]) -> None:
    """SIGTERM (a server drains), then kill it if it has not ended within 30 s: kettle or a
    peer's server a benchmark started."""
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()


@contextlib.contextmanager
def kettle_serving(
    serve_args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    stderr: IO[str] | None = None,
    python: str = sys.executable,
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`start_kettle` for the block, `stop_server` after it, whatever happens in it."""
    proc, base = start_kettle(serve_args, env=env, stderr=stderr, python=python)
    try:
        yield proc, base
    finally:
        stop_server(proc)


def ws_url(base: str) -> str:
    """kettle's own WebSocket endpoint on the server at ``base``."""
    return base.replace("http", "ws", 1) + "/v1/stream"
