"""The README's kettle v1 snippet, exactly as written there, against a server with the real
model (slow)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from kettle.streaming.client.client import to_s16le
from kettle.streaming.server.server import KettleServer, ServerConfig
from kettle.transcribe.audio.read import load_audio

from tests.conftest import readme_python_blocks

pytestmark = pytest.mark.slow

README = Path(__file__).resolve().parents[3] / "README.md"
URL = "ws://127.0.0.1:8765/v1/stream"


def readme_snippet() -> str:
    blocks = readme_python_blocks("## Protocol")
    assert len(blocks) == 1, "one python block in the README's Protocol section"
    return str(blocks[0])


@pytest.fixture
async def server(tiny_decoder: Any) -> AsyncIterator[KettleServer]:
    async with KettleServer(ServerConfig(port=0), lambda: tiny_decoder) as running:
        yield running


async def test_the_readme_snippet_prints_the_finals(
    server: KettleServer,
    eval_clip: Callable[[str], Any],
    wer_fn: Callable[..., float],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    clip = eval_clip("jfk__openai_whisper_jfk.flac")
    (tmp_path / "speech.pcm").write_bytes(to_s16le(load_audio(clip.path)))
    monkeypatch.chdir(tmp_path)
    code = readme_snippet()
    assert URL in code
    code = code.replace(URL, server.ws_url)
    await asyncio.to_thread(exec, compile(code, str(README), "exec"), {"__name__": "readme"})
    finals = capsys.readouterr().out.splitlines()
    assert len(finals) >= 2, "JFK's pauses cut it into several utterances"
    assert wer_fn([clip.reference], [" ".join(finals)]) <= 0.15
