"""A small PROTOCOL.md client: streams audio to a kettle server and collects what comes back.

`stream_audio` is the library part (used by `kettle stream`, the tests and the server
benchmark); `run_stream_command` is the command: it prints partials overwriting one line on
a terminal and finals as lines, or every server message as a JSON line with `--json`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np
from kettle.transcribe.errors import KettleError
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

logger = logging.getLogger(__name__)

DEFAULT_URL = "ws://127.0.0.1:8765/v1/stream"
SAMPLE_RATE = 16000


class StreamClientError(KettleError):
    """The server refused the connection or broke off the session."""


@dataclass(frozen=True)
class ClientOptions:
    url: str = DEFAULT_URL
    api_key: str | None = None
    realtime: bool = False  # pace audio as a microphone would; else as fast as possible
    chunk_ms: int = 100
    language: str | None = None
    partials: bool = True
    word_timestamps: bool = False
    done_timeout_s: float = 300.0  # after stop, how long to wait for done

    def __post_init__(self) -> None:
        if not 10 <= self.chunk_ms <= 10_000:
            raise ValueError("chunk_ms must lie in 10..10000")
        if not self.url.startswith(("ws://", "wss://")):
            raise ValueError(f"url must start with ws:// or wss://, got {self.url!r}")


@dataclass
class StreamResult:
    ready: dict[str, Any] | None = None
    partials: list[dict[str, Any]] = field(default_factory=list)
    finals: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    done: dict[str, Any] | None = None
    close_code: int | None = None
    # time.monotonic() when the first audio was (or, in real time, began to be) recorded
    audio_start: float = 0.0
    # (message, time.monotonic() at receipt) for every server message, in order
    received: list[tuple[dict[str, Any], float]] = field(default_factory=list)

    @property
    def text(self) -> str:
        return " ".join(f["text"].strip() for f in self.finals if f["text"].strip())


def to_s16le(audio: np.ndarray) -> bytes:
    clipped = np.clip(np.asarray(audio, dtype=np.float32), -1.0, 1.0)
    return (clipped * 32767.0).round().astype("<i2").tobytes()


async def stream_audio(
    audio: np.ndarray,
    options: ClientOptions = ClientOptions(),
    on_message: Callable[[dict[str, Any], float], None] | None = None,
) -> StreamResult:
    """Stream float32 mono 16 kHz audio (sent as pcm_s16le) and return what the server sent.

    In real time, chunk i is sent once its audio would have been recorded:
    audio_start + (i + 1) * chunk duration.
    """
    headers = {"Authorization": f"Bearer {options.api_key}"} if options.api_key else None
    result = StreamResult()
    data = to_s16le(audio)
    chunk_bytes = SAMPLE_RATE * options.chunk_ms // 1000 * 2
    config: dict[str, Any] = {
        "type": "config",
        "encoding": "pcm_s16le",
        "sample_rate": SAMPLE_RATE,
        "channels": 1,
        "partials": options.partials,
        "word_timestamps": options.word_timestamps,
    }
    if options.language is not None:
        config["language"] = options.language
    try:
        ws = await connect(options.url, additional_headers=headers, max_size=16 << 20)
    except InvalidStatus as exc:
        body = exc.response.body.decode("utf-8", "replace").strip()
        raise StreamClientError(
            f"server refused the connection: HTTP {exc.response.status_code} {body}"
        ) from None
    except OSError as exc:
        raise StreamClientError(f"cannot connect to {options.url}: {exc}") from None

    async def receive() -> None:
        try:
            async for raw in ws:
                now = time.monotonic()
                if not isinstance(raw, str):
                    continue
                message = json.loads(raw)
                result.received.append((message, now))
                kind = message.get("type")
                if kind == "ready":
                    result.ready = message
                elif kind == "partial":
                    result.partials.append(message)
                elif kind == "final":
                    result.finals.append(message)
                elif kind == "error":
                    result.errors.append(message)
                elif kind == "done":
                    result.done = message
                if on_message is not None:
                    on_message(message, now)
        except ConnectionClosed:
            pass

    async with ws:
        receiver = asyncio.create_task(receive())
        await ws.send(json.dumps(config))
        chunk_s = options.chunk_ms / 1000
        result.audio_start = start = time.monotonic()
        try:
            for i, offset in enumerate(range(0, len(data), chunk_bytes)):
                if options.realtime:
                    delay = start + (i + 1) * chunk_s - time.monotonic()
                    if delay > 0:
                        await asyncio.sleep(delay)
                await ws.send(data[offset : offset + chunk_bytes])
            await ws.send(json.dumps({"type": "stop"}))
        except ConnectionClosed:
            pass
        try:
            await asyncio.wait_for(receiver, options.done_timeout_s)
        except TimeoutError:
            raise StreamClientError("no `done` from the server in time") from None
        result.close_code = ws.close_code
    return result


# -- the `kettle stream` command ------------------------------------------------------------


def _clock(seconds: float) -> str:
    minutes, secs = divmod(max(0.0, seconds), 60)
    return f"{int(minutes)}:{secs:06.3f}"


class Printer:
    """Prints server messages: partials on one overwritten line (terminal only), finals."""

    def __init__(self, out: TextIO, err: TextIO, *, as_json: bool, tty: bool) -> None:
        self.out = out
        self.err = err
        self.as_json = as_json
        self.tty = tty
        self._line_open = False

    def __call__(self, message: dict[str, Any], _at: float) -> None:
        kind = message.get("type")
        if self.as_json:
            print(json.dumps(message, ensure_ascii=False), file=self.out, flush=True)
            return
        if kind == "partial" and self.tty:
            width = max(20, shutil.get_terminal_size((100, 20)).columns - 1)
            text = message["text"].strip()
            if len(text) > width - 2:
                text = "…" + text[-(width - 3) :]
            self.out.write("\r\x1b[K" + text)
            self.out.flush()
            self._line_open = True
        elif kind == "final":
            self._clear()
            start, end = _clock(message["start"]), _clock(message["end"])
            print(f"[{start} -> {end}] {message['text'].strip()}", file=self.out, flush=True)
        elif kind == "error":
            self._clear()
            fatal = " (fatal)" if message.get("fatal") else ""
            print(
                f"kettle: server error {message.get('code')}{fatal}: {message.get('message')}",
                file=self.err,
                flush=True,
            )

    def _clear(self) -> None:
        if self._line_open:
            self.out.write("\r\x1b[K")
            self._line_open = False

    def finish(self) -> None:
        self._clear()
        self.out.flush()


def run_stream_command(
    path: str,
    options: ClientOptions,
    *,
    raw: str | None = None,
    as_json: bool = False,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    from kettle.transcribe.audio_io import RawFormat, load_audio
    from kettle.transcribe.errors import AudioError

    try:
        audio = load_audio(path, RawFormat.parse(raw) if raw else None)
    except AudioError as exc:
        raise AudioError(f"{path}: {exc}") from None
    printer = Printer(out, err, as_json=as_json, tty=(not as_json) and out.isatty())
    try:
        result = asyncio.run(stream_audio(audio, options, printer))
    finally:
        printer.finish()
    if result.done is None:
        print(
            f"kettle: the session ended without `done` (close code {result.close_code})",
            file=err,
        )
        return 1
    if not as_json:
        print(
            f"{result.done['utterances']} utterance(s), {result.done['audio_seconds']:.3f} s of"
            " audio",
            file=err,
        )
    return 0


def api_key_from_env() -> str | None:
    keys = os.environ.get("KETTLE_API_KEY") or os.environ.get("KETTLE_API_KEYS")
    if not keys:
        return None
    return keys.split(",")[0].strip() or None
