"""`kettle serve` replicas as real processes on loopback, for client and load-balancer tests."""

from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

_READY = re.compile(r"kettle serving on (http://127\.0\.0\.1:(\d+))\n")
START_TIMEOUT_S = 120.0  # a deadlock guard on a loaded machine, not a speed requirement


class Replica:
    """One `kettle serve --fake-model` process; ``restart`` brings it back on the same port."""

    def __init__(self, log_dir: Path, name: str, args: tuple[str, ...]) -> None:
        self.log_dir = log_dir
        self.name = name
        self.args = args
        self.port = 0
        self.proc: subprocess.Popen[str] | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/v1/stream"

    def start(self) -> Replica:
        self.starts += 1
        log = open(self.log_dir / f"{self.name}.{self.starts}.log", "w")  # noqa: SIM115
        cmd = [sys.executable, "-m", "kettle.streaming.cli", "serve", "--fake-model"]
        cmd += ["--port", str(self.port), *self.args]
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=log, text=True, env=dict(os.environ)
        )
        log.close()
        line = _first_line(self.proc, START_TIMEOUT_S)
        match = _READY.fullmatch(line)
        assert match, f"{self.name}: unexpected first line {line!r} (see {log.name})"
        self.port = int(match.group(2))
        return self

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(30)

    def terminate(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)

    def restart(self) -> Replica:
        if self.proc is not None and self.proc.poll() is None:
            self.kill()
        return self.start()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


def _first_line(proc: subprocess.Popen[str], timeout_s: float) -> str:
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if sel.select(timeout=0.5):
                return proc.stdout.readline()
            if proc.poll() is not None:
                return ""
    proc.kill()
    raise AssertionError(f"kettle serve printed nothing in {timeout_s} s")


@pytest.fixture
def serve_replica(tmp_path: Path) -> Iterator[Callable[..., Replica]]:
    """A factory: ``serve_replica("--max-sessions", "2")`` starts one and returns it."""
    started: list[Replica] = []

    def make(*args: str) -> Replica:
        replica = Replica(tmp_path, f"replica{len(started)}", args)
        started.append(replica)
        return replica.start()

    try:
        yield make
    finally:
        for replica in started:
            replica.stop()
