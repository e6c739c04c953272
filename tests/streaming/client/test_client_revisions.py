"""The client asks for `revision` messages and applies them to their finals, per session across
reconnects; `kettle stream` asks by default and prints them. Against a scripted server that
speaks docs/protocol.md, so nothing here depends on kettle's own server."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
from kettle.streaming.cli.main import main
from kettle.streaming.client.client import ClientOptions, Printer, stream_audio
from kettle.streaming.server.server import ServerConfig
from kettle.transcribe.model.fake import FakeDecoder, scripted_audio
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from tests.streaming.conftest import StartServer

RATE = 16000
AUDIO = np.zeros(2 * RATE, dtype=np.float32)  # the scripted server hears only its length


@dataclass
class Session:
    """One connection to the scripted server, as its script sees it."""

    ws: ServerConnection
    config: dict[str, Any] | None = None
    audio: bytearray = field(default_factory=bytearray)

    async def listen(self, until_bytes: int | None = None) -> None:
        """Read the client's messages until `stop` (or until ``until_bytes`` of audio)."""
        try:
            async for raw in self.ws:
                if isinstance(raw, bytes):
                    self.audio += raw
                    if until_bytes is not None and len(self.audio) >= until_bytes:
                        return
                    continue
                message = json.loads(raw)
                if message["type"] == "config":
                    self.config = message
                elif message["type"] == "stop":
                    return
        except ConnectionClosed:
            pass

    async def send(self, kind: str, **fields: Any) -> None:
        await self.ws.send(json.dumps({"type": kind, **fields}))

    async def ready(self) -> None:
        await self.send("ready", session_id="s", protocol=1, model="scripted", sample_rate=RATE)

    async def done(self, finals: int, reason: str | None = None) -> None:
        extra = {"reason": reason} if reason else {}
        await self.send(
            "done", audio_seconds=len(self.audio) / 2 / RATE, utterances=finals, **extra
        )


Script = Callable[[Session], Awaitable[None]]


@asynccontextmanager
async def scripted_server(*scripts: Script) -> AsyncIterator[tuple[str, list[Session]]]:
    """A server that runs ``scripts[k]`` on its k-th connection; yields its URL and sessions."""
    sessions: list[Session] = []

    async def handler(ws: ServerConnection) -> None:
        session = Session(ws)
        sessions.append(session)
        await scripts[len(sessions) - 1](session)

    async with serve(handler, "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        yield f"ws://127.0.0.1:{port}/v1/stream", sessions


def final(n: int, start: float, end: float, text: str, **extra: Any) -> dict[str, Any]:
    return {"utterance": n, "start": start, "end": end, "text": text, "language": "en", **extra}


async def one_session_with_revisions(session: Session) -> None:
    await session.ready()
    await session.listen()
    await session.send("final", **final(0, 0.5, 1.0, "alpha bravo"))
    await session.send("final", **final(1, 1.2, 1.8, "charlie"))
    await session.send("revision", **final(0, 0.48, 1.1, "alfa bravo"))
    await session.done(2)


async def test_revisions_are_asked_for_and_replace_their_finals() -> None:
    heard: list[dict[str, Any]] = []
    async with scripted_server(one_session_with_revisions) as (url, sessions):
        result = await stream_audio(
            AUDIO, ClientOptions(url=url), lambda m, _at: heard.append(m), revisions=True
        )
    assert sessions[0].config is not None and sessions[0].config["revisions"] is True
    assert result.complete and [f["type"] for f in result.finals] == ["final", "final"]
    assert result.finals[0] == {"type": "final", **final(0, 0.48, 1.1, "alfa bravo")}
    assert result.text == "alfa bravo charlie"
    # what the server first sent stays measurable
    assert result.original_text == "alpha bravo charlie" and result.revised == 1
    assert result.originals == {0: {"type": "final", **final(0, 0.5, 1.0, "alpha bravo")}}
    assert [r["text"] for r in result.revisions] == ["alfa bravo"]
    assert [m["type"] for m in heard].count("revision") == 1


async def test_revisions_are_off_unless_asked_for() -> None:
    async def plain(session: Session) -> None:
        await session.ready()
        await session.listen()
        await session.done(0)

    async with scripted_server(plain, plain, plain) as (url, sessions):
        await stream_audio(AUDIO, ClientOptions(url=url))
        await stream_audio(AUDIO, ClientOptions(url=url, revisions=True))
        await stream_audio(AUDIO, ClientOptions(url=url, revisions=True), revisions=False)
    assert [s.config and s.config["revisions"] for s in sessions] == [False, True, False]


async def test_a_later_revision_replaces_the_earlier_one_whole() -> None:
    words = [{"word": "alpha", "start": 0.5, "end": 1.0, "probability": 0.9}]

    async def twice(session: Session) -> None:
        await session.ready()
        await session.listen()
        await session.send("final", **final(0, 0.5, 1.0, "alpha", words=words, speaker=0))
        first = [{"word": "alfa", "start": 0.4, "end": 1.0, "probability": 0.8}]
        await session.send("revision", **final(0, 0.4, 1.0, "alfa", words=first, speaker=1))
        second = [{"word": "alpha.", "start": 0.5, "end": 1.1, "probability": 0.95}]
        await session.send("revision", **final(0, 0.5, 1.1, "alpha.", words=second, speaker=0))
        await session.done(1)

    async with scripted_server(twice) as (url, _):
        result = await stream_audio(AUDIO, ClientOptions(url=url, word_timestamps=True))
    [entry] = result.finals
    assert entry["text"] == "alpha." and entry["speaker"] == 0 and entry["end"] == 1.1
    assert [w["word"] for w in entry["words"]] == ["alpha."]
    assert result.revised == 1 and result.originals[0]["text"] == "alpha"
    assert len(result.revisions) == 2


async def test_revisions_of_unknown_utterances_are_ignored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def strays(session: Session) -> None:
        await session.ready()
        await session.send("revision", **final(0, 0.0, 0.5, "before its final"))
        await session.listen()
        await session.send("final", **final(0, 0.5, 1.0, "alpha"))
        for number in (1, 7, -1, "0", True, None):
            await session.send("revision", **final(0, 0.5, 1.0, "stray") | {"utterance": number})
        await session.done(1)

    heard: list[dict[str, Any]] = []
    caplog.set_level(logging.DEBUG, logger="kettle.streaming.client.client")
    async with scripted_server(strays) as (url, _):
        result = await stream_audio(
            AUDIO, ClientOptions(url=url), lambda m, _at: heard.append(m), revisions=True
        )
    assert result.complete and result.text == "alpha" and result.revised == 0
    assert result.revisions == [] and "revision" not in [m["type"] for m in heard]
    assert [m["type"] for m, _ in result.received].count("revision") == 7  # still on record
    assert caplog.text.count("ignoring a revision") == 7


async def test_a_revision_after_a_reconnect_reaches_its_own_sessions_final() -> None:
    async def drained(session: Session) -> None:
        await session.ready()
        await session.listen(until_bytes=RATE * 2)  # one second, then the replica drains
        await session.send("final", **final(0, 0.1, 0.5, "alpha"))
        await session.send("final", **final(1, 0.6, 1.0, "bravo"))
        await session.done(2, reason="shutdown")
        await session.ws.close(1012)

    async def resumed(session: Session) -> None:
        await session.ready()
        await session.listen()
        await session.send("final", **final(0, 0.2, 0.6, "alpha juliet"))
        # session numbers: 0 is this session's final (the stream's 2), 1 is none of its own
        await session.send("revision", **final(0, 0.2, 0.7, "alfa juliett"))
        await session.send("revision", **final(1, 0.6, 1.0, "not bravo"))
        await session.done(1)

    async with scripted_server(drained, resumed) as (url, sessions):
        result = await stream_audio(AUDIO, ClientOptions(url=url), revisions=True)
    assert result.complete and result.reconnects == 1
    assert len(sessions[1].audio) == len(AUDIO) * 2 - RATE * 2  # resent after the last final
    assert [f["utterance"] for f in result.finals] == [0, 1, 2]
    assert result.text == "alpha bravo alfa juliett"
    assert result.original_text == "alpha bravo alpha juliet"
    assert list(result.originals) == [2]
    assert (result.finals[2]["start"], result.finals[2]["end"]) == (1.2, 1.7)  # stream clock
    assert result.revisions[0]["utterance"] == 2


def test_printer_prints_a_revision_as_its_own_marked_line() -> None:
    out, err = io.StringIO(), io.StringIO()
    printer = Printer(out, err, as_json=False, tty=False)
    printer({"type": "final", "utterance": 0, "text": "Alpha.", "start": 0.5, "end": 1.0}, 0.0)
    printer({"type": "revision", "utterance": 0, "text": " Alfa.", "start": 0.5, "end": 1.1}, 0)
    assert out.getvalue() == "[0:00.500 -> 0:01.000] Alpha.\n~ [0:00.500 -> 0:01.100] Alfa.\n"


def test_printer_on_a_terminal_keeps_the_partial_below_a_revision() -> None:
    out, err = io.StringIO(), io.StringIO()
    printer = Printer(out, err, as_json=False, tty=True)
    printer({"type": "partial", "utterance": 1, "text": "bravo"}, 0.0)
    printer({"type": "revision", "utterance": 0, "text": "Alfa.", "start": 0.5, "end": 1.1}, 0)
    printer({"type": "partial", "utterance": 1, "text": "bravo charlie"}, 0.0)
    printer.finish()
    assert out.getvalue() == (
        "\r\x1b[Kbravo\r\x1b[K~ [0:00.500 -> 0:01.100] Alfa.\n\r\x1b[Kbravo"
        "\r\x1b[Kbravo charlie\r\x1b[K"
    )
    # with no partial open, nothing is redrawn
    out.seek(0)
    out.truncate()
    printer({"type": "revision", "utterance": 0, "text": "Alfa!", "start": 0.5, "end": 1.1}, 0)
    assert out.getvalue() == "~ [0:00.500 -> 0:01.100] Alfa!\n"


def test_printer_prints_a_revision_as_a_json_line() -> None:
    out, err = io.StringIO(), io.StringIO()
    printer = Printer(out, err, as_json=True, tty=False)
    revision = {"type": "revision", "utterance": 0, "text": "Alfa.", "start": 0.5, "end": 1.1}
    printer(revision, 0.0)
    assert [json.loads(line) for line in out.getvalue().splitlines()] == [revision]


async def test_kettle_stream_asks_for_revisions_and_prints_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wav = tmp_path / "speech.wav"
    sf.write(wav, AUDIO, RATE)
    scripts = (one_session_with_revisions, one_session_with_revisions)
    async with scripted_server(*scripts) as (url, sessions):
        command = ["stream", str(wav), "--url", url]
        assert await asyncio.to_thread(main, command) == 0
        first = capsys.readouterr()
        assert await asyncio.to_thread(main, [*command, "--no-revisions"]) == 0
        second = capsys.readouterr()
    assert [s.config and s.config["revisions"] for s in sessions] == [True, False]
    assert first.out.splitlines() == [
        "[0:00.500 -> 0:01.000] alpha bravo",
        "[0:01.200 -> 0:01.800] charlie",
        "~ [0:00.480 -> 0:01.100] alfa bravo",
    ]
    assert "2 utterance(s) (1 revised), 2.000 s of audio" in first.err
    assert "revised" not in second.err  # not asked for: no count (this server sends anyway)


async def test_a_real_server_revises_a_final_once_the_next_utterance_is_heard(
    start_server: StartServer,
) -> None:
    # The fake model reads each utterance "alpha bravo charlie"; its refinement spells "alfa".
    # The first final is refined once the next utterance is heard (the last may not be).
    server = await start_server(ServerConfig(port=0), FakeDecoder)
    speech = scripted_audio([("voice", 1.5), ("silence", 1.0), ("voice", 1.5), ("silence", 0.8)])
    options = ClientOptions(url=server.ws_url, word_timestamps=True)
    result = await stream_audio(speech, options, revisions=True)
    assert result.complete and len(result.finals) == 2 and 0 in result.originals
    assert result.original_text == "alpha bravo charlie alpha bravo charlie"
    assert result.text.startswith("alfa bravo charlie ")
    assert result.finals[0]["words"][0]["word"] == "alfa"
    for entry in result.finals:
        sent = result.originals.get(entry["utterance"], entry)["text"]
        revised = entry["utterance"] in result.originals
        assert entry["text"] == (sent.replace("alpha", "alfa") if revised else sent)
    plain = await stream_audio(speech, options)
    assert plain.revised == 0 and plain.text == result.original_text
    assert "revision" not in [m["type"] for m, _ in plain.received]
