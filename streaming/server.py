"""kettle's WebSocket server: PROTOCOL.md on `/v1/stream`, plain HTTP GETs on the same port.

One `KettleServer` owns one Engine. Each connection is one session, run by three tasks:

- the reader takes client messages in order (audio is decoded at the edge with
  `PcmStreamDecoder` and fed to the engine stream; control messages act on it), and enforces
  the idle timeout, the maximum session length and the text message rate;
- the pump takes the stream's events as soon as they exist (so a slow client never holds up
  the engine) and parks them, encoded, in the session's `Outbox`;
- the writer sends what the outbox holds. For a reader slower than its partials, stale
  partials are dropped in the outbox (never finals, errors or `done`), see outbox.py.

Choices where PROTOCOL.md leaves room (all documented in the protocol's spirit of additions):

- The message-rate limit applies to text messages only: dropping audio would lose audio, so
  audio is bounded by the frame-size limit and the maximum session length instead. A text
  message over the rate is dropped with a non-fatal `rate_limited` error (sent once per run
  of dropped messages); `stop` is always honoured.
- `ready` is sent at once, with the input rate the query string gives; a `config` that later
  changes `sample_rate` applies all the same (ready was just early).
- `done` may carry `"reason"`: "idle" (idle timeout), "max_duration" (maximum session length),
  "shutdown" (server shutdown, after which the close code is 1001).
- A peer that reads nothing while its finals pile up past the outbox limit is closed with
  1008: the server will not buffer without bound for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import http
import logging
import re
import signal
import ssl
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias
from urllib.parse import parse_qs, urlsplit

from kettle.kernels.pcm import PcmStreamDecoder
from kettle.streaming import protocol as proto
from kettle.streaming.events import Done, Error, Event, Final, Partial
from kettle.streaming.limits import Authenticator, SessionSlots, TokenBucket
from kettle.streaming.metrics import METRICS_CONTENT_TYPE, ArrivalLog, ServerMetrics
from kettle.streaming.outbox import FINAL, OTHER, PARTIAL, Outbox, OutMessage
from kettle.transcribe.errors import ConfigError
from kettle.transcribe.types import Decoder
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

if TYPE_CHECKING:
    from kettle.streaming.engine import Engine, EngineConfig, Stream

logger = logging.getLogger(__name__)

STREAM_PATH = "/v1/stream"
CLOSE_NORMAL = 1000
CLOSE_GOING_AWAY = 1001
CLOSE_POLICY = 1008
CLOSE_INTERNAL = 1011

# What a loader returns: the model, or (partials model, finals model or None).
DecoderLoad: TypeAlias = Decoder | tuple[Decoder, Decoder | None]


@dataclass(frozen=True)
class ServerConfig:
    """Everything `kettle serve` can set about the server itself (the engine has its own)."""

    host: str = "127.0.0.1"
    port: int = 8765
    api_keys: tuple[str, ...] = field(default=(), repr=False)  # never printed or logged
    max_sessions: int = 64
    max_frame_bytes: int = 1 << 20
    max_message_bytes: int = 16 << 20  # websockets closes with 1009 beyond
    idle_timeout_s: float = 60.0
    max_session_s: float = 4 * 3600.0
    max_messages_per_second: float = 20.0
    shutdown_timeout_s: float = 10.0
    # After stop, the finals and done must be out within this; else internal error and 1011.
    finish_timeout_s: float = 300.0
    retry_after_s: int = 5
    outbox_limit: int = 1000
    tls_cert: str | None = None
    tls_key: str | None = None
    ping_interval_s: float | None = 20.0
    web_root: Path | None = None  # None: the kettle.web package folder

    def __post_init__(self) -> None:
        problems = []
        if not 0 <= self.port <= 65535:
            problems.append(f"port {self.port} is outside 0..65535")
        if self.max_sessions < 1:
            problems.append("max_sessions must be at least 1")
        if self.max_frame_bytes < 1:
            problems.append("max_frame_bytes must be at least 1")
        if self.max_message_bytes < self.max_frame_bytes:
            problems.append("max_message_bytes must be at least max_frame_bytes")
        for name in (
            "idle_timeout_s",
            "max_session_s",
            "max_messages_per_second",
            "finish_timeout_s",
        ):
            if not getattr(self, name) > 0:
                problems.append(f"{name} must be positive")
        if self.shutdown_timeout_s < 0:
            problems.append("shutdown_timeout_s must not be negative")
        if self.retry_after_s < 1:
            problems.append("retry_after_s must be at least 1")
        if self.outbox_limit < 1:
            problems.append("outbox_limit must be at least 1")
        if (self.tls_cert is None) != (self.tls_key is None):
            problems.append("TLS needs both a certificate and a key")
        if any(not k or any(c.isspace() for c in k) for k in self.api_keys):
            problems.append("API keys must be non-empty and contain no whitespace")
        if problems:
            raise ConfigError("invalid server configuration: " + "; ".join(problems))

    @property
    def scheme(self) -> str:
        return "https" if self.tls_cert else "http"


@dataclass
class _Admission:
    """What the handshake decided, handed from process_request to the handler."""

    session_id: str
    settings: proto.StreamSettings


_ASSET_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".ico": "image/x-icon",
    ".png": "image/png",
    ".json": "application/json",
    ".webmanifest": "application/manifest+json",
    ".wasm": "application/wasm",
    ".txt": "text/plain; charset=utf-8",
}
_ASSET_SEGMENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


def _response(
    status: int, body: bytes, content_type: str, extra: dict[str, str] | None = None
) -> Response:
    phrase = http.HTTPStatus(status).phrase
    headers = Headers(
        [
            ("Date", email.utils.formatdate(usegmt=True)),
            ("Connection", "close"),
            ("Content-Length", str(len(body))),
            ("Content-Type", content_type),
            ("Cache-Control", "no-cache"),
        ]
    )
    for key, value in (extra or {}).items():
        headers[key] = value
    return Response(status, phrase, headers, body)


def _text(status: int, text: str, extra: dict[str, str] | None = None) -> Response:
    return _response(status, text.encode(), "text/plain; charset=utf-8", extra)


class KettleServer:
    """The server. `start()` listens, loads the model, starts the engine; `shutdown()` drains.

    `load` runs in a worker thread and returns the decoder (or a (partials, finals) pair);
    until it has returned, /readyz answers 503 and handshakes are refused with 503.
    """

    def __init__(
        self,
        config: ServerConfig,
        load: Callable[[], DecoderLoad],
        engine_config: EngineConfig | None = None,
    ) -> None:
        self.config = config
        self.metrics = ServerMetrics()
        self._load = load
        self._engine_config = engine_config
        self._auth = Authenticator(config.api_keys)
        self._slots = SessionSlots(config.max_sessions)
        self._admissions: dict[ServerConnection, _Admission] = {}
        self._sessions: set[_Session] = set()
        self._engine: Engine | None = None
        self._ws_server: Server | None = None
        self._port: int | None = None
        self._idle = asyncio.Event()  # set while no session holds a slot
        self._idle.set()
        self._draining = False
        self._shutdown_task: asyncio.Task[None] | None = None
        self._web_root = (config.web_root or _default_web_root()).resolve()
        # websockets logs request headers (Authorization included) at debug level; keys must
        # never reach a log, so its debug records are dropped whatever the application sets.
        self._ws_logger = logging.getLogger(__name__ + ".websockets")
        if _drop_debug not in self._ws_logger.filters:
            self._ws_logger.addFilter(_drop_debug)

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """Listen, then load the model and start the engine; returns once sessions are taken."""
        await self.listen()
        await self.load()

    async def listen(self) -> None:
        cfg = self.config
        ssl_context = None
        if cfg.tls_cert and cfg.tls_key:
            ssl_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ssl_context.load_cert_chain(cfg.tls_cert, cfg.tls_key)
        self._ws_server = await serve(
            self._handle,
            cfg.host,
            cfg.port,
            process_request=self._process_request,
            max_size=cfg.max_message_bytes,
            ping_interval=cfg.ping_interval_s,
            ssl=ssl_context,
            logger=self._ws_logger,
            server_header="kettle",
        )
        self._port = int(self._ws_server.sockets[0].getsockname()[1])

    async def load(self) -> None:
        from kettle.streaming.engine import Engine, EngineConfig

        loaded = await asyncio.to_thread(self._load)
        decoder, final_decoder = loaded if isinstance(loaded, tuple) else (loaded, None)
        engine = Engine(
            decoder,
            self._engine_config or EngineConfig(),
            final_decoder=final_decoder,
            observer=self.metrics,
        )
        await engine.start()
        self._engine = engine
        logger.info(
            "model %s loaded%s",
            decoder.name,
            f", finals by {final_decoder.name}" if final_decoder else "",
        )

    @property
    def port(self) -> int:
        """The port listened on (the real one when port 0 was asked)."""
        if self._port is None:
            raise RuntimeError("the server is not listening")
        return self._port

    @property
    def url(self) -> str:
        """The base URL, e.g. http://127.0.0.1:8765 (the real port when port 0 was asked)."""
        host = self.config.host
        shown = f"[{host}]" if ":" in host else host
        return f"{self.config.scheme}://{shown}:{self.port}"

    @property
    def ws_url(self) -> str:
        return self.url.replace("http", "ws", 1) + STREAM_PATH

    @property
    def ready(self) -> bool:
        """Model loaded, not shutting down, a session slot free, engine not overloaded."""
        return (
            self._engine is not None
            and not self._draining
            and not self._slots.full
            and not self._engine.overloaded
        )

    @property
    def engine(self) -> Engine | None:
        """The engine, once the model is loaded."""
        return self._engine

    @property
    def sessions_active(self) -> int:
        """Sessions holding a slot: from their handshake until their connection closed."""
        return self._slots.active

    async def wait_idle(self) -> None:
        """Return once no session holds a slot (every connection closed)."""
        await self._idle.wait()

    async def __aenter__(self) -> KettleServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    async def shutdown(self, timeout: float | None = None) -> None:
        """Stop accepting, finish open sessions' finals (bounded), close them with 1001."""
        if self._shutdown_task is None:
            self._shutdown_task = asyncio.create_task(self._shutdown(timeout))
        await asyncio.shield(self._shutdown_task)

    async def _shutdown(self, timeout: float | None) -> None:
        timeout = self.config.shutdown_timeout_s if timeout is None else timeout
        self._draining = True
        if self._ws_server is not None:
            self._ws_server.server.close()  # stop listening; open connections stay
        sessions = list(self._sessions)
        if sessions:
            logger.info("shutting down: finishing %d open session(s)", len(sessions))
        for session in sessions:
            try:
                session.begin_shutdown()
            except Exception:  # one broken session must not stop the others' shutdown
                logger.exception("session %s: could not stop it", session.session_id)
                session.force_close()
        waiters = [asyncio.ensure_future(s.closed.wait()) for s in sessions]
        if waiters:
            _, pending = await asyncio.wait(waiters, timeout=timeout)
            for waiter in pending:
                waiter.cancel()
        for session in list(self._sessions):
            session.force_close()
        if self._ws_server is not None:
            self._ws_server.close()  # remaining connections close with 1001 (all versions)
            await self._ws_server.wait_closed()
        if self._engine is not None:
            await self._engine.close()
        logger.info("server stopped")

    # -- HTTP and handshake --------------------------------------------------------------

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        url = urlsplit(request.path)
        path = url.path
        if path == STREAM_PATH:
            return self._admit(connection, request, url.query)
        if path == "/healthz":
            return _text(200, "ok\n")
        if path == "/readyz":
            if self.ready:
                return _text(200, "ready\n")
            return _text(503, self._unready_reason() + "\n")
        if path == "/metrics":
            self.metrics.sessions_active.set(self._slots.active)
            return _response(200, self.metrics.render(), METRICS_CONTENT_TYPE)
        return self._asset(path)

    def _unready_reason(self) -> str:
        if self._draining:
            return "shutting down"
        if self._engine is None:
            return "loading model"
        if self._slots.full:
            return "at the session limit"
        return "overloaded"

    def _reject(self, reason: str, response: Response) -> Response:
        self.metrics.sessions_rejected.labels(reason=reason).inc()
        return response

    def _admit(self, connection: ServerConnection, request: Request, query: str) -> Response | None:
        # Order per PROTOCOL.md: auth first (401 before anything else), then the query (400),
        # then capacity (503 + Retry-After).
        token = _lenient_token(query)
        if not self._auth.allows(request.headers.get("Authorization"), token):
            return self._reject(
                "unauthorized",
                _text(401, "a valid API key is required\n", {"WWW-Authenticate": "Bearer"}),
            )
        try:
            params = proto.parse_query(query)
            settings = proto.StreamSettings().apply(params.update)
            if self._engine is not None:
                decoder = self._engine.decoder
                settings.check_model(decoder.multilingual, decoder.name)
        except proto.ProtocolError as exc:
            return self._reject("bad_query", _text(400, exc.message + "\n"))
        if request.headers.get("Upgrade", "").lower() != "websocket":
            return self._reject(
                "not_websocket",
                _text(
                    426, f"{STREAM_PATH} takes WebSocket connections\n", {"Upgrade": "websocket"}
                ),
            )
        retry = {"Retry-After": str(self.config.retry_after_s)}
        if self._draining:
            return self._reject("shutting_down", _text(503, "server is shutting down\n", retry))
        if self._engine is None:
            return self._reject("loading", _text(503, "model is loading\n", retry))
        if not self._slots.try_acquire():
            return self._reject("session_limit", _text(503, "too many sessions\n", retry))
        self.metrics.sessions_active.set(self._slots.active)
        self._idle.clear()
        self._admissions[connection] = _Admission(uuid.uuid4().hex, settings)
        # The slot is held until the connection is closed, whatever happens in between
        # (the handshake may still fail, or the handler may never run).
        connection.connection_lost_waiter.add_done_callback(lambda _fut: self._release(connection))
        return None

    def _release(self, connection: ServerConnection) -> None:
        if self._admissions.pop(connection, None) is not None:
            self._slots.release()
            self.metrics.sessions_active.set(self._slots.active)
            if self._slots.active == 0:
                self._idle.set()

    def _asset(self, path: str) -> Response:
        name = "index.html" if path in ("/", "") else path.lstrip("/")
        segments = name.split("/")
        content_type = _ASSET_TYPES.get(Path(name).suffix.lower())
        if content_type is None or not all(_ASSET_SEGMENT.match(s) for s in segments):
            return _text(404, "not found\n")
        target = (self._web_root / name).resolve()
        if not target.is_relative_to(self._web_root) or not target.is_file():
            return _text(404, "not found\n")
        try:
            body = target.read_bytes()
        except OSError:
            return _text(404, "not found\n")
        return _response(200, body, content_type)

    # -- sessions -------------------------------------------------------------------------

    async def _handle(self, ws: ServerConnection) -> None:
        admission = self._admissions.get(ws)
        engine = self._engine
        if admission is None or engine is None:  # pragma: no cover - admitted means both
            await ws.close(CLOSE_INTERNAL, "session was not admitted")
            return
        session = _Session(self, engine, ws, admission)
        self._sessions.add(session)
        self.metrics.sessions_total.inc()
        try:
            await session.run()
        finally:
            self._sessions.discard(session)


def _drop_debug(record: logging.LogRecord) -> bool:
    return record.levelno > logging.DEBUG


def _lenient_token(query: str) -> str | None:
    """The `token` parameter, read even from a query that fails validation later."""
    values = parse_qs(query, keep_blank_values=True, errors="replace").get("token")
    return values[0] if values else None


def _default_web_root() -> Path:
    import kettle.web

    return Path(kettle.web.__file__).resolve().parent


class _Session:
    """One WebSocket session: reader, pump and writer around one engine stream."""

    def __init__(
        self,
        server: KettleServer,
        engine: Engine,
        ws: ServerConnection,
        admission: _Admission,
    ) -> None:
        self.server = server
        self.config = server.config
        self.metrics = server.metrics
        self.engine = engine
        self.ws = ws
        self.session_id = admission.session_id
        self.settings = admission.settings
        self.outbox = Outbox(self.config.outbox_limit)
        self.pcm: PcmStreamDecoder | None = None
        self.stream: Stream | None = None
        self.arrivals: ArrivalLog | None = None
        self.stopped = False
        self.done_sent = False
        self.close_code = CLOSE_NORMAL
        self.closed = asyncio.Event()
        self._pump: asyncio.Task[None] | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._close_request: tuple[int, str] | None = None
        self._rate = TokenBucket(
            self.config.max_messages_per_second,
            max(1.0, 2 * self.config.max_messages_per_second),
            time.monotonic(),
        )
        self._rate_limited = False
        self._started = time.monotonic()
        self._last_message = self._started
        self._stopped_at = self._started

    # -- the session's life ------------------------------------------------------------

    async def run(self) -> None:
        decoder = self.engine.decoder
        self._queue_text(
            OTHER,
            proto.encode_ready(
                self.session_id,
                decoder.name,
                self.settings.sample_rate,
                multilingual=decoder.multilingual,
                final_model=(
                    self.engine.final_decoder.name
                    if self.engine.final_decoder is not decoder
                    else None
                ),
            ),
        )
        logger.info("session %s opened", self.session_id)
        reader = asyncio.create_task(self._guard(self._read_loop()))
        writer = asyncio.create_task(self._guard(self._write_loop()))
        self._tasks = [reader, writer]
        try:
            await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)
            # Either the writer closed the connection after done (or a fatal error), or the
            # reader saw the peer go away; both end the session.
        finally:
            for task in self._tasks:
                task.cancel()
            if self._pump is not None:
                self._pump.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            if self._pump is not None:
                await asyncio.gather(self._pump, return_exceptions=True)
            if self._close_request is not None:
                with contextlib.suppress(Exception):
                    await self.ws.close(*self._close_request)
            if self.stream is not None and not self.done_sent:
                self.stream.abort()  # client vanished: release what the engine holds
            if self.outbox.dropped_partials:
                self.metrics.messages_dropped.labels(kind="partial").inc(
                    self.outbox.dropped_partials
                )
            self.closed.set()
            logger.info("session %s closed (code %s)", self.session_id, self.ws.close_code)

    async def _guard(self, work: Awaitable[None]) -> None:
        """Unexpected exceptions end this session with `internal` and 1011, never the server."""
        try:
            await work
        except ConnectionClosed:
            pass
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("session %s failed", self.session_id)
            await self._fail("internal server error")

    async def _fail(self, message: str) -> None:
        if self.stream is not None and not self.done_sent:
            self.stream.abort()
            self.done_sent = True  # nothing more will come from the engine
        with contextlib.suppress(Exception):
            self.metrics.errors.labels(code=proto.INTERNAL).inc()
            await asyncio.wait_for(
                self.ws.send(proto.encode_error(proto.INTERNAL, message, fatal=True)), 5
            )
        with contextlib.suppress(Exception):
            await self.ws.close(CLOSE_INTERNAL, "internal error")

    def begin_shutdown(self) -> None:
        if not self.stopped:
            self.close_code = CLOSE_GOING_AWAY
            self._stop("shutdown")

    def force_close(self) -> None:
        """Shutdown ran out of time: release the stream and close with 1001 regardless."""
        if self.stream is not None and not self.done_sent:
            self.stream.abort()
            self.done_sent = True
        self._close_soon(CLOSE_GOING_AWAY, "server shutting down")

    def _close_soon(self, code: int, reason: str) -> None:
        """End the session: run() stops its tasks and closes with this code."""
        if self._close_request is None:
            self._close_request = (code, reason)
        for task in self._tasks:
            task.cancel()

    # -- reading ----------------------------------------------------------------------------

    def _deadline(self) -> tuple[float, str] | None:
        if self.stopped:
            if self.done_sent:
                return None
            return (self._stopped_at + self.config.finish_timeout_s, "finish_timeout")
        idle = self._last_message + self.config.idle_timeout_s
        longest = self._started + self.config.max_session_s
        return (idle, "idle") if idle <= longest else (longest, "max_duration")

    async def _read_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            deadline = self._deadline()
            try:
                if deadline is None:
                    message = await self.ws.recv()
                else:
                    # recv() is cancel-safe: a timeout loses no message.
                    wait = deadline[0] - time.monotonic()
                    async with asyncio.timeout_at(loop.time() + max(0.0, wait)):
                        message = await self.ws.recv()
            except TimeoutError:
                if deadline is None or time.monotonic() < deadline[0]:
                    continue
                if deadline[1] == "finish_timeout":
                    logger.error("session %s: finals not done in time", self.session_id)
                    await self._fail("the transcription did not finish in time")
                    return
                logger.info("session %s: %s, stopping", self.session_id, deadline[1])
                self._stop(deadline[1])
                continue
            if self.stopped:
                continue  # anything after stop is ignored
            self._last_message = time.monotonic()
            if isinstance(message, str):
                self._on_text(message)
            else:
                self._on_audio(message)

    def _on_audio(self, data: bytes) -> None:
        if len(data) > self.config.max_frame_bytes:
            self._error(
                proto.BAD_AUDIO,
                f"audio message of {len(data)} bytes is over the limit of "
                f"{self.config.max_frame_bytes} bytes; it was dropped",
            )
            return
        stream, pcm, arrivals = self._open_stream()
        before = pcm.input_frames
        samples = pcm.feed(data)
        arrivals.record(pcm.input_frames, time.monotonic())
        if pcm.input_frames > before:
            self.metrics.audio_seconds.inc((pcm.input_frames - before) / pcm.sample_rate)
        if samples.size:
            stream.feed_audio(samples)

    def _on_text(self, text: str) -> None:
        try:
            message: proto.ClientMessage | None = proto.parse_client_message(text)
            problem = None
        except proto.ProtocolError as exc:
            message, problem = None, exc
        if isinstance(message, proto.StopMessage):
            self._stop(None)
            return
        if not self._rate.allow(time.monotonic()):
            if not self._rate_limited:
                self._error(
                    proto.RATE_LIMITED,
                    f"more than {self.config.max_messages_per_second:g} text messages per "
                    "second; messages over the rate are dropped",
                )
            self._rate_limited = True
            return
        self._rate_limited = False
        if problem is not None:
            self._error(problem.code, problem.message)
        elif isinstance(message, proto.ConfigMessage):
            self._on_config(message.update)
        elif isinstance(message, proto.FinalizeMessage) and self.stream is not None:
            self.stream.finalize()
        # keepalive: reading it already reset the idle timer

    def _on_config(self, update: proto.ConfigUpdate) -> None:
        if self.stream is not None:
            self._error(
                proto.BAD_MESSAGE, "config must come before the first audio message; ignored"
            )
            return
        settings = self.settings.apply(update)
        decoder = self.engine.decoder
        try:
            settings.check_model(decoder.multilingual, decoder.name)
        except proto.ProtocolError as exc:
            self._error(exc.code, "config refused, nothing changed: " + exc.message)
            return
        self.settings = settings

    def _open_stream(self) -> tuple[Stream, PcmStreamDecoder, ArrivalLog]:
        """The first audio (or stop) fixes the settings and opens the engine stream."""
        if self.stream is None or self.pcm is None or self.arrivals is None:
            from kettle.streaming.session import SessionConfig

            s = self.settings
            self.pcm = PcmStreamDecoder(s.encoding, s.sample_rate, s.channels)
            self.arrivals = ArrivalLog(s.sample_rate)
            self.stream = self.engine.open_stream(
                SessionConfig(
                    language=s.language, partials=s.partials, word_timestamps=s.word_timestamps
                )
            )
            self._pump = asyncio.create_task(self._guard(self._pump_loop(self.stream)))
            logger.debug(
                "session %s: stream %s, %s %d Hz x%d",
                self.session_id,
                self.stream.stream_id,
                s.encoding,
                s.sample_rate,
                s.channels,
            )
        return self.stream, self.pcm, self.arrivals

    def _stop(self, reason: str | None) -> None:
        if self.stopped:
            return
        self.stopped = True
        self._stopped_at = time.monotonic()
        stream, pcm, _ = self._open_stream()
        if pcm.leftover_bytes:
            self._error(
                proto.BAD_AUDIO,
                f"the audio ended with {pcm.leftover_bytes} byte(s) that are not a whole "
                f"sample frame ({pcm.frame_bytes} bytes); they were dropped",
            )
        tail = pcm.flush()
        if tail.size:
            stream.feed_audio(tail)
        stream.stop(reason)

    # -- events out ---------------------------------------------------------------------------

    async def _pump_loop(self, stream: Stream) -> None:
        async for event in stream:
            self._on_event(event)
            if isinstance(event, Done):
                return

    def _on_event(self, event: Event) -> None:
        if isinstance(event, Partial):
            if self.settings.partials:
                self._queue(
                    OutMessage(PARTIAL, proto.encode_partial(event), event.utterance, event.end)
                )
        elif isinstance(event, Final):
            text = proto.encode_final(event, word_timestamps=self.settings.word_timestamps)
            self._queue(OutMessage(FINAL, text, event.utterance, event.end))
        elif isinstance(event, Error):
            self._queue(
                OutMessage(
                    OTHER, proto.encode_error_event(event), closing=event.fatal, fatal=event.fatal
                ),
                code=event.code,
            )
        elif isinstance(event, Done):
            pcm = self.pcm
            frames, rate = (pcm.input_frames, pcm.sample_rate) if pcm else (0, 16000)
            text = proto.encode_done_event(event, input_frames=frames, sample_rate=rate)
            self._queue(OutMessage(OTHER, text, closing=True))

    def _error(self, code: str, message: str) -> None:
        self._queue(OutMessage(OTHER, proto.encode_error(code, message)), code=code)

    def _queue_text(self, kind: str, text: str) -> None:
        self._queue(OutMessage(kind, text))

    def _queue(self, message: OutMessage, code: str | None = None) -> None:
        if code is not None:
            self.metrics.errors.labels(code=code).inc()
        if not self.outbox.put(message):
            logger.warning(
                "session %s: client reads nothing, %d messages waiting; closing",
                self.session_id,
                len(self.outbox),
            )
            if self.stream is not None and not self.done_sent:
                self.stream.abort()
                self.done_sent = True
            self._close_soon(CLOSE_POLICY, "client is not reading")

    async def _write_loop(self) -> None:
        while True:
            message = await self.outbox.get()
            await self.ws.send(message.text)
            sent = time.monotonic()
            if message.kind in (PARTIAL, FINAL) and self.arrivals is not None:
                arrived = self.arrivals.arrival_of(message.end)
                if arrived is not None:
                    lag = max(0.0, sent - arrived)
                    if message.kind == PARTIAL:
                        self.metrics.partial_lag.observe(lag)
                    else:
                        self.metrics.final_lag.observe(lag)
                        self.arrivals.prune_before(message.end)
            if message.closing:
                self.done_sent = True
                code = CLOSE_INTERNAL if message.fatal else self.close_code
                await self.ws.close(code)
                return


# -- running from the command line ------------------------------------------------------------


async def serve_until_signalled(
    config: ServerConfig,
    load: Callable[[], DecoderLoad],
    engine_config: EngineConfig | None = None,
    *,
    on_ready: Callable[[KettleServer], None] | None = None,
) -> int:
    """Run a server until SIGTERM or SIGINT, then shut it down gracefully; returns 0."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    server = KettleServer(config, load, engine_config)
    try:
        await server.start()
        if on_ready is not None:
            on_ready(server)
        await stop.wait()
        logger.info("signal received, shutting down")
    finally:
        await server.shutdown()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError):
                loop.remove_signal_handler(sig)
    return 0


__all__ = [
    "STREAM_PATH",
    "KettleServer",
    "ServerConfig",
    "serve_until_signalled",
]
