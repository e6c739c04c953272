"""deploy/haproxy.cfg in front of 3 `kettle serve --fake-model` replicas on loopback.

The config under test is the shipped one: only its `server` lines are replaced by the test's
replicas, and the bind address and session limit come through its environment variables.
Timeouts here are deadlock guards; nothing asserts how fast anything happened.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from kettle.streaming.client.client import ClientOptions, stream_audio
from kettle.transcribe.model.fake import scripted_audio
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidStatus

if TYPE_CHECKING:
    from tests.conftest import Replica

# slow: three replica processes and an HAProxy per test, and real failovers.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("haproxy") is None,
        reason="haproxy is not installed (apt-get install haproxy)",
    ),
]

CONFIG = Path(__file__).resolve().parents[2] / "deploy" / "haproxy.cfg"
GUARD_S = 60.0  # deadlock guard for polls
MAX_SESSIONS = 2
DRAIN_S = 0.2  # far shorter than a test stream: a drained session is cut and resumes
# The replica goes at the first final, in the long pause after the first utterance: a drain
# that ends there cuts no utterance in two, so the finals match an uninterrupted run's.
PIECES = [("voice", 1.5), ("silence", 3.0), ("voice", 1.5), ("silence", 1.0), ("voice", 1.5)]
AUDIO = scripted_audio([*PIECES, ("silence", 0.8)])


class Balancer:
    """haproxy -f (the shipped config with these servers), in the foreground."""

    def __init__(self, workdir: Path, replicas: list[Replica], max_sessions: int) -> None:
        self.port = _free_port()
        lines = CONFIG.read_text().splitlines()
        kept = [ln for ln in lines if not ln.strip().startswith("server ")]
        kept += [f"    server r{i} 127.0.0.1:{r.port}" for i, r in enumerate(replicas)]
        self.config = workdir / "haproxy.cfg"
        self.config.write_text("\n".join(kept) + "\n")
        env = dict(
            os.environ,
            KETTLE_LB_BIND=f"127.0.0.1:{self.port}",
            KETTLE_MAX_SESSIONS=str(max_sessions),
        )
        self.log = workdir / "haproxy.log"
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(
                ["haproxy", "-db", "-f", str(self.config)], stdout=log, stderr=log, env=env
            )
        _wait_listening(self.port, self.proc)

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/v1/stream"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + GUARD_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, "haproxy exited"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError("haproxy did not listen")


@pytest.fixture
def cluster(
    serve_replica: Callable[..., Replica], tmp_path: Path
) -> Iterator[tuple[list[Replica], Balancer]]:
    args = ("--max-sessions", str(MAX_SESSIONS), "--drain-timeout", str(DRAIN_S))
    replicas = [serve_replica(*args) for _ in range(3)]
    balancer = Balancer(tmp_path, replicas, MAX_SESSIONS)
    try:
        yield replicas, balancer
    finally:
        balancer.stop()


@asynccontextmanager
async def session(url: str) -> AsyncIterator[ClientConnection]:
    """An open session that has received `ready` (so it holds a slot on its replica)."""
    async with connect(url) as ws:
        await ws.send(json.dumps({"type": "config", "sample_rate": 16000}))
        ready = json.loads(await asyncio.wait_for(ws.recv(), GUARD_S))
        assert ready["type"] == "ready"
        yield ws


async def _gauges(replicas: list[Replica], want: list[int]) -> list[int]:
    """Each replica's kettle_sessions_active, polled until it reads ``want`` (or the guard)."""
    deadline = time.monotonic() + GUARD_S
    while True:
        got = [await asyncio.to_thread(r.sessions_active) for r in replicas]
        if got == want or time.monotonic() > deadline:
            return got
        await asyncio.sleep(0.2)


async def test_sessions_spread_evenly(cluster: tuple[list[Replica], Balancer]) -> None:
    replicas, balancer = cluster
    async with AsyncExitStack() as sessions:
        for _ in range(3):
            await sessions.enter_async_context(session(balancer.ws_url))
        assert await _gauges(replicas, [1, 1, 1]) == [1, 1, 1]
        for _ in range(3):
            await sessions.enter_async_context(session(balancer.ws_url))
        assert await _gauges(replicas, [2, 2, 2]) == [2, 2, 2]
    assert await _gauges(replicas, [0, 0, 0]) == [0, 0, 0]


async def test_a_full_replica_is_skipped_without_a_503(
    cluster: tuple[list[Replica], Balancer],
) -> None:
    replicas, balancer = cluster
    full = replicas[0]
    async with AsyncExitStack() as sessions:
        # Filled behind the balancer's back: HAProxy counts no connection to it, so leastconn
        # would pick it first; its 503 (or its failing /readyz) sends the session elsewhere.
        for _ in range(MAX_SESSIONS):
            await sessions.enter_async_context(session(full.ws_url))
        for _ in range(2 * MAX_SESSIONS):  # the capacity left, on the two others: no 503
            await sessions.enter_async_context(session(balancer.ws_url))
        assert await _gauges(replicas, [2, 2, 2]) == [2, 2, 2]
        # No capacity left anywhere: now the balancer answers 503 (after its queue wait).
        with pytest.raises(InvalidStatus) as refused:
            await sessions.enter_async_context(session(balancer.ws_url))
        assert refused.value.response.status_code == 503


@pytest.mark.parametrize("stop", ["SIGKILL", "SIGTERM"])
async def test_a_stream_resumes_on_a_survivor_when_its_replica_goes(
    cluster: tuple[list[Replica], Balancer], stop: str
) -> None:
    """SIGKILL: the connection just drops. SIGTERM: the replica drains, the session gets its
    finals and 1012. Either way the client reconnects through the balancer, which sends it
    to a survivor, resends what no final covers, and gets every final."""
    replicas, balancer = cluster
    expected = await stream_audio(AUDIO, ClientOptions(url=balancer.ws_url))
    assert expected.complete and len(expected.finals) == 3

    gone: list[Replica] = []

    def on_message(message: dict[str, Any], _at: float) -> None:
        if message["type"] == "final" and not gone:
            serving = [r for r in replicas if r.sessions_active() == 1]
            assert len(serving) == 1
            if stop == "SIGKILL":
                serving[0].kill()  # no finals, no close frame
            else:
                serving[0].terminate()
            gone.append(serving[0])

    options = ClientOptions(url=balancer.ws_url, realtime=True, chunk_ms=100, reconnects=30)
    result = await stream_audio(AUDIO, options, on_message)
    assert gone and result.complete and result.reconnects >= 1
    assert [f["text"] for f in result.finals] == [f["text"] for f in expected.finals]
    assert [f["utterance"] for f in result.finals] == [0, 1, 2]
    for got, want in zip(result.finals, expected.finals, strict=True):
        assert abs(got["start"] - want["start"]) <= 0.1 and abs(got["end"] - want["end"]) <= 0.1
    survivors = [r for r in replicas if r is not gone[0]]
    assert await _gauges(survivors, [0, 0]) == [0, 0]
    proc = gone[0].proc
    assert proc is not None
    assert await asyncio.to_thread(proc.wait, GUARD_S) == (-9 if stop == "SIGKILL" else 0)
