"""The client resumes a stream on a new session when its server goes away: it sends again
the audio no final covers yet, and the times and utterance numbers continue."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import soundfile as sf
from kettle.streaming.client.client import ClientOptions, stream_audio
from kettle.transcribe.model.fake import scripted_audio

if TYPE_CHECKING:
    from tests.conftest import Replica

# slow: real `kettle serve` processes killed and restarted under a live stream.
pytestmark = pytest.mark.slow

GUARD_S = 120.0  # deadlock guard
UTTERANCE = [("voice", 1.5), ("silence", 1.0)]
AUDIO = scripted_audio([*UTTERANCE, *UTTERANCE, ("voice", 1.5), ("silence", 0.8)])


async def test_a_stream_survives_a_server_killed_and_restarted(
    serve_replica: Callable[..., Replica],
) -> None:
    replica = serve_replica()
    expected = await stream_audio(AUDIO, ClientOptions(url=replica.ws_url))
    assert expected.complete and len(expected.finals) == 3

    restarted: list[asyncio.Task[Any]] = []
    notices: list[str] = []

    def on_message(message: dict[str, Any], _at: float) -> None:
        if message["type"] == "final" and not restarted:
            replica.kill()  # SIGKILL: no finals, no close frame
            restarted.append(asyncio.create_task(asyncio.to_thread(replica.restart)))

    options = ClientOptions(url=replica.ws_url, realtime=True, chunk_ms=100, reconnects=30)
    result = await stream_audio(AUDIO, options, on_message, notices.append)
    await restarted[0]
    assert result.complete and result.reconnects >= 1 and notices
    assert [f["text"] for f in result.finals] == [f["text"] for f in expected.finals]
    assert [f["utterance"] for f in result.finals] == [0, 1, 2]
    # The clock continues: the finals' times are those of the uninterrupted stream.
    for got, want in zip(result.finals, expected.finals, strict=True):
        assert abs(got["start"] - want["start"]) <= 0.1 and abs(got["end"] - want["end"]) <= 0.1
    assert result.done is not None
    assert abs(result.done["audio_seconds"] - len(AUDIO) / 16000) <= 0.002
    assert result.done["utterances"] == 3


async def test_kettle_stream_reconnects_and_says_so(
    serve_replica: Callable[..., Replica], tmp_path: Path
) -> None:
    replica = serve_replica()
    wav = tmp_path / "speech.wav"
    sf.write(wav, AUDIO, 16000)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kettle.streaming.cli.main", "stream", str(wav),
        "--url", replica.ws_url, "--realtime", "--reconnects", "30",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    first = await asyncio.wait_for(proc.stdout.readline(), GUARD_S)  # the first final
    lines = [first.decode()]
    await asyncio.to_thread(replica.restart)  # SIGKILL, then the same port again
    out, err = await asyncio.wait_for(proc.communicate(), GUARD_S)
    lines += out.decode().splitlines(keepends=True)
    assert proc.returncode == 0, err.decode()
    finals = [line for line in lines if not line.startswith("~ ")]  # revisions: '~' lines
    assert len(finals) == 3 and all(line.startswith("[0:0") for line in finals)
    assert "reconnecting in" in err.decode() and "3 utterance(s)" in err.decode()
