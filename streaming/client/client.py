"""A small docs/protocol.md client: streams audio to a kettle server and collects what comes back.

`stream_audio` is the library part (used by `kettle stream`, the tests and the server
benchmark); `run_stream_command` is the command: it prints partials overwriting one line on
a terminal, finals and revisions (marked `~`) as lines, or every server message as a JSON line
with `--json`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, TextIO

import numpy as np
from kettle.streaming.client.resume import (
    NO_RETRY_CLOSE_CODES,
    RETRY_STATUSES,
    Timeline,
    backoff_s,
    retry_after_s,
)
from kettle.transcribe.errors import KettleError
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

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
    revisions: bool = False  # ask for `revision` messages; they replace their finals
    done_timeout_s: float = 300.0  # after stop, how long to wait for done
    # Reconnects in a row without a session becoming ready before giving up (0: never).
    reconnects: int = 5

    def __post_init__(self) -> None:
        if not 10 <= self.chunk_ms <= 10_000:
            raise ValueError("chunk_ms must lie in 10..10000")
        if not self.url.startswith(("ws://", "wss://")):
            raise ValueError(f"url must start with ws:// or wss://, got {self.url!r}")
        if self.reconnects < 0:
            raise ValueError("reconnects must not be negative")


@dataclass
class StreamResult:
    """What the server sent, on the stream's clock (times continue across reconnects)."""

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
    reconnects: int = 0  # sessions opened after the first
    complete: bool = False  # `done` answered our `stop`: the finals cover all the audio
    # Each revision applied, on the stream's clock; `finals` already holds its text.
    revisions: list[dict[str, Any]] = field(default_factory=list)
    # utterance -> its final as the server first sent it, for each final a revision replaced
    originals: dict[int, dict[str, Any]] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The transcript, with every revision applied."""
        return _join(self.finals)

    @property
    def original_text(self) -> str:
        """The transcript as the finals were first sent, before any revision."""
        return _join(self.originals.get(f.get("utterance", -1), f) for f in self.finals)

    @property
    def revised(self) -> int:
        """How many finals a revision replaced."""
        return len(self.originals)


def _join(finals: Iterable[dict[str, Any]]) -> str:
    return " ".join(f["text"].strip() for f in finals if f["text"].strip())


def to_s16le(audio: np.ndarray) -> bytes:
    clipped = np.clip(np.asarray(audio, dtype=np.float32), -1.0, 1.0)
    return (clipped * 32767.0).round().astype("<i2").tobytes()


async def stream_audio(
    audio: np.ndarray,
    options: ClientOptions = ClientOptions(),
    on_message: Callable[[dict[str, Any], float], None] | None = None,
    on_notice: Callable[[str], None] | None = None,
    *,
    revisions: bool | None = None,
) -> StreamResult:
    """Stream float32 mono 16 kHz audio (sent as pcm_s16le) and return what the server sent.

    In real time, the audio up to sample n is sent once it would have been recorded:
    audio_start + n / 16000 s. When a session ends before `done` answers `stop` (the server
    restarts, the connection drops, a replica drains with 1012), a new session is opened,
    with backoff, and the audio no final covers yet is sent again (see ``resume.Timeline``).
    ``on_notice`` hears a line about each reconnect. Refusals that would repeat (401, 400)
    raise ``StreamClientError``; so does a failed connection once ``reconnects`` are spent.

    ``revisions`` (None: as ``options`` says) asks for `revision` messages: each replaces its
    final in the result (``StreamResult.originals`` keeps the final as sent). ``on_message``
    hears every server message but revisions of no final the client holds, which it ignores.
    """
    if revisions is not None:
        options = replace(options, revisions=revisions)
    return await _Stream(audio, options, on_message, on_notice).run()


class _Refused(Exception):
    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class _Stream:
    def __init__(
        self,
        audio: np.ndarray,
        options: ClientOptions,
        on_message: Callable[[dict[str, Any], float], None] | None,
        on_notice: Callable[[str], None] | None,
    ) -> None:
        self.options = options
        self.on_message = on_message
        self.on_notice = on_notice
        self.data = to_s16le(audio)
        self.samples = len(self.data) // 2
        self.chunk = SAMPLE_RATE * options.chunk_ms // 1000
        self.timeline = Timeline(SAMPLE_RATE)
        self.result = StreamResult()
        self.start = 0.0
        self.final_at: dict[int, int] = {}  # utterance (stream's number) -> index in finals

    async def run(self) -> StreamResult:
        self.result.audio_start = self.start = time.monotonic()
        failures = 0  # in a row, without a session becoming ready
        while True:
            try:
                ws = await self._connect()
            except _Refused as exc:
                if failures >= self.options.reconnects:
                    if self.result.ready is not None:
                        return self.result  # what the earlier sessions got; not complete
                    raise StreamClientError(str(exc)) from None
                await self._pause(failures, exc.retry_after_s, str(exc))
                failures += 1
                continue
            ready = await self._session(ws)
            if self.result.complete:
                return self.result
            code = self.result.close_code
            if ready:
                failures = 0
            if code in NO_RETRY_CLOSE_CODES or failures >= self.options.reconnects:
                return self.result
            await self._pause(failures, None, f"the session ended (close code {code})")
            failures += 1

    async def _pause(self, attempt: int, retry_after_s: float | None, why: str) -> None:
        delay = retry_after_s if retry_after_s is not None else backoff_s(attempt)
        if self.on_notice is not None:
            resend = (self.samples - self.timeline.committed) / SAMPLE_RATE
            self.on_notice(
                f"{why}; reconnecting in {delay:.1f} s (attempt {attempt + 1}), then sending "
                f"the {resend:.1f} s of audio no final covers yet"
            )
        await asyncio.sleep(delay)

    async def _connect(self) -> ClientConnection:
        options = self.options
        headers = {"Authorization": f"Bearer {options.api_key}"} if options.api_key else None
        try:
            return await connect(options.url, additional_headers=headers, max_size=16 << 20)
        except InvalidStatus as exc:
            status = exc.response.status_code
            body = exc.response.body.decode("utf-8", "replace").strip() if exc.response.body else ""
            message = f"server refused the connection: HTTP {status} {body}".strip()
            if status not in RETRY_STATUSES:
                raise StreamClientError(message) from None
            raise _Refused(
                message, retry_after_s(exc.response.headers.get("Retry-After"))
            ) from None
        except (OSError, InvalidHandshake, TimeoutError) as exc:
            raise _Refused(f"cannot connect to {options.url}: {exc}") from None

    async def _session(self, ws: ClientConnection) -> bool:
        """One server session; True when it became ready (the server took the stream)."""
        offset = self.timeline.begin_session()
        if self.result.ready is not None:
            self.result.reconnects += 1
        became_ready = False
        stop_sent = False

        async def receive() -> None:
            nonlocal became_ready
            try:
                async for raw in ws:
                    now = time.monotonic()
                    if not isinstance(raw, str):
                        continue
                    message = self.timeline.shift(json.loads(raw))
                    if not self._record(message, now):
                        continue
                    kind = message.get("type")
                    if kind == "ready":
                        became_ready = True
                    elif kind == "done":
                        self.result.complete = self._covers_all(message, stop_sent)
                    if self.on_message is not None:
                        self.on_message(message, now)
            except ConnectionClosed:
                pass

        async def send() -> None:
            nonlocal stop_sent
            try:
                await ws.send(json.dumps(self._config()))
                pos = offset
                while pos < self.samples:
                    end = min(pos + self.chunk, self.samples)
                    if self.options.realtime:
                        delay = self.start + end / SAMPLE_RATE - time.monotonic()
                        if delay > 0:
                            await asyncio.sleep(delay)
                    await ws.send(self.data[2 * pos : 2 * end])
                    pos = end
                stop_sent = True
                await ws.send(json.dumps({"type": "stop"}))
            except ConnectionClosed:
                pass

        async with ws:
            receiver = asyncio.create_task(receive())
            sender = asyncio.create_task(send())
            try:
                await asyncio.wait({receiver, sender}, return_when=asyncio.FIRST_COMPLETED)
                if receiver.done():  # the connection closed: stop sending into it
                    sender.cancel()
                await asyncio.gather(sender, return_exceptions=True)
                try:
                    await asyncio.wait_for(receiver, self.options.done_timeout_s)
                except TimeoutError:
                    raise StreamClientError("no `done` from the server in time") from None
            finally:
                for task in (receiver, sender):
                    task.cancel()
        self.result.close_code = ws.close_code
        return became_ready

    def _covers_all(self, done: dict[str, Any], stop_sent: bool) -> bool:
        """Whether the server had all the audio when it sent `done` (a draining server sends
        it without our `stop`, possibly before the last audio reached it)."""
        heard = done.get("audio_seconds")
        if not isinstance(heard, (int, float)):
            return stop_sent
        return heard >= self.samples / SAMPLE_RATE - 0.002  # `done` counts whole ms

    def _config(self) -> dict[str, Any]:
        config: dict[str, Any] = {
            "type": "config",
            "encoding": "pcm_s16le",
            "sample_rate": SAMPLE_RATE,
            "channels": 1,
            "partials": self.options.partials,
            "word_timestamps": self.options.word_timestamps,
            "revisions": self.options.revisions,
        }
        if self.options.language is not None:
            config["language"] = self.options.language
        return config

    def _record(self, message: dict[str, Any], now: float) -> bool:
        """Keep a server message; False for one the client ignores (a stray revision)."""
        result = self.result
        result.received.append((message, now))
        kind = message.get("type")
        if kind == "ready":
            result.ready = result.ready or message
        elif kind == "partial":
            result.partials.append(message)
        elif kind == "final":
            number = message.get("utterance")
            if isinstance(number, int):
                self.final_at[number] = len(result.finals)
            result.finals.append(message)
        elif kind == "revision":
            return self._revise(message)
        elif kind == "error":
            result.errors.append(message)
        elif kind == "done":
            result.done = message
        return True

    def _revise(self, revision: dict[str, Any]) -> bool:
        """Replace the final a revision names by its revised copy; False when there is none."""
        number = self.timeline.revised_utterance(revision)
        index = self.final_at.get(number) if number is not None else None
        if number is None or index is None:
            logger.debug(
                "ignoring a revision of an utterance with no final in this session: %r",
                revision.get("utterance"),
            )
            return False
        result = self.result
        # Over the final as first sent, so nothing of an earlier revision lingers.
        original = result.originals.setdefault(number, result.finals[index])
        fields = {k: v for k, v in revision.items() if k != "type"}
        result.finals[index] = {**original, **fields}
        result.revisions.append(revision)
        return True


# -- the `kettle stream` command ------------------------------------------------------------


def _clock(seconds: float) -> str:
    minutes, secs = divmod(max(0.0, seconds), 60)
    return f"{int(minutes)}:{secs:06.3f}"


def _span(message: dict[str, Any]) -> str:
    return f"[{_clock(message['start'])} -> {_clock(message['end'])}]"


class Printer:
    """Prints server messages: partials on one overwritten line (terminal only), finals, and
    revisions as lines marked ``~`` (they correct the final of the same span printed earlier)."""

    def __init__(self, out: TextIO, err: TextIO, *, as_json: bool, tty: bool) -> None:
        self.out = out
        self.err = err
        self.as_json = as_json
        self.tty = tty
        self._line_open = False
        self._partial = ""  # the partial line as drawn, to draw again below a revision

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
            self._draw_partial(text)
        elif kind == "final":
            self._clear()
            print(f"{_span(message)} {message['text'].strip()}", file=self.out, flush=True)
        elif kind == "revision":
            # A revision comes while a later utterance is spoken: its partial stays below.
            partial = self._partial if self._line_open else ""
            self._clear()
            print(f"~ {_span(message)} {message['text'].strip()}", file=self.out, flush=True)
            if partial:
                self._draw_partial(partial)
        elif kind == "error":
            self._clear()
            fatal = " (fatal)" if message.get("fatal") else ""
            print(
                f"kettle: server error {message.get('code')}{fatal}: {message.get('message')}",
                file=self.err,
                flush=True,
            )

    def notice(self, line: str) -> None:
        self._clear()
        print(f"kettle: {line}", file=self.err, flush=True)

    def _draw_partial(self, text: str) -> None:
        self.out.write("\r\x1b[K" + text)
        self.out.flush()
        self._line_open = True
        self._partial = text

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
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    # Looked up per call, not bound at import, so a redirected sys.stdout/stderr is used.
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    from kettle.transcribe.audio.read import RawFormat, load_audio
    from kettle.transcribe.errors import AudioError

    try:
        audio = load_audio(path, RawFormat.parse(raw) if raw else None)
    except AudioError as exc:
        raise AudioError(f"{path}: {exc}") from None
    printer = Printer(out, err, as_json=as_json, tty=(not as_json) and out.isatty())

    def notice(line: str) -> None:
        printer.notice(line)

    try:
        result = asyncio.run(stream_audio(audio, options, printer, notice))
    finally:
        printer.finish()
    if not result.complete:
        covered = result.finals[-1]["end"] if result.finals else 0.0
        print(
            f"kettle: the stream ended before all its audio was transcribed (finals cover "
            f"{covered:.3f} s; close code {result.close_code})",
            file=err,
        )
        return 1
    if not as_json and result.done is not None:
        revised = f" ({result.revised} revised)" if options.revisions else ""
        print(
            f"{result.done['utterances']} utterance(s){revised}, "
            f"{result.done['audio_seconds']:.3f} s of audio",
            file=err,
        )
    return 0


def api_key_from_env() -> str | None:
    keys = os.environ.get("KETTLE_API_KEY") or os.environ.get("KETTLE_API_KEYS")
    if not keys:
        return None
    return keys.split(",")[0].strip() or None
