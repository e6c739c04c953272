"""The client resumes a stream on a new session when its server goes away: it sends again
the audio no final covers yet, and the times and utterance numbers continue."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kettle.streaming.client import ClientOptions, stream_audio
from kettle.transcribe.fake import scripted_audio

if TYPE_CHECKING:
    from tests.conftest import Replica

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
