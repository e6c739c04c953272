"""kettle's server: every protocol and plain HTTP on one port, Starlette on uvicorn.

`KettleServer` owns the lifecycle (listen, load the model, drain on shutdown), the engine,
the session slots and admission; `app.py` mounts the routes; each WebSocket connection is run
by `runner.ConnectionRunner` with its protocol's codec (`protocols/`). See
`kettle.streaming.protocols` for how to add a protocol or a route.

uvicorn serves with websockets' sans-I/O implementation: it pauses reading the socket after
each message until the runner asks for the next (so a connection that is not read pushes
back through TCP), and waits for the socket to drain before each send (so the outbox sees a
slow reader). Per-message deflate is off (audio does not compress, and it costs CPU and
memory per connection); a message over `max_message_bytes` closes the connection with 1009.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import uvicorn
from kettle.streaming.protocols.base import (
    CLOSE_GOING_AWAY,
    CLOSE_SERVICE_RESTART,
    CodecContext,
    Limits,
    ModelInfo,
)
from kettle.streaming.protocols.handshake import (
    HandshakeRefused,
    HandshakeRequest,
    Prepared,
    ProtocolRoute,
)
from kettle.streaming.protocols.kettle_v1 import PATH as STREAM_PATH
from kettle.streaming.server.app import build_app
from kettle.streaming.server.audio_budget import AdmissionConfig, AudioAdmission
from kettle.streaming.server.connection import ConnectionLimits
from kettle.streaming.server.gate import Refusal
from kettle.streaming.server.hosts import HostPolicy
from kettle.streaming.server.limits import Authenticator, SessionSlots
from kettle.streaming.server.looplag import LoopLagMonitor
from kettle.streaming.server.metrics import ServerMetrics
from kettle.streaming.server.origins import OriginPolicy
from kettle.streaming.server.runner import ConnectionRunner, Transport
from kettle.streaming.server.uploads import Uploads
from kettle.transcribe.errors import ConfigError
from kettle.transcribe.types import Decoder

if TYPE_CHECKING:
    from kettle.streaming.engine.engine import Engine, EngineConfig

logger = logging.getLogger(__name__)

# The uvicorn WebSocket implementation: websockets, through its sans-I/O protocol (uvicorn's
# older "websockets" one is deprecated and buffers up to 32 messages ahead of the app).
WS_IMPLEMENTATION = "websockets-sansio"

# The kernel's receive buffer per connection (Linux doubles it for bookkeeping): ~4 s of
# 16 kHz 16-bit audio, far more than any link needs for audio.
RECEIVE_BUFFER_BYTES = 128 * 1024

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
    max_message_bytes: int = 16 << 20  # closes with 1009 beyond
    idle_timeout_s: float = 60.0
    max_session_s: float = 4 * 3600.0
    max_messages_per_second: float = 20.0
    shutdown_timeout_s: float = 10.0
    # A drain (SIGTERM): how long live sessions may go on before they get their finals and
    # 1012; meanwhile /readyz is 503 and new sessions are refused with 503 + Retry-After.
    drain_timeout_s: float = 30.0
    # After stop, the finals and done must be out within this; else internal error and 1011.
    finish_timeout_s: float = 300.0
    retry_after_s: int = 5
    outbox_limit: int = 1000
    # Uploads (Deepgram's POST /v1/listen, OpenAI's /v1/audio/...): the largest body taken
    # (413 beyond), and how many are transcribed at once, all APIs together (429 beyond).
    max_upload_bytes: int = 1 << 30
    max_uploads: int = 4
    tls_cert: str | None = None
    tls_key: str | None = None
    ping_interval_s: float | None = 20.0
    web_root: Path | None = None  # None: the kettle.web package folder
    # Web pages that may open WebSockets, beyond this server's own and localhost's (origins.py)
    allowed_origins: tuple[str, ...] = ()
    # Host names served besides loopback names, IP addresses, `host` and the origins' hosts;
    # "*": any (hosts.py: the DNS-rebinding guard)
    allowed_hosts: tuple[str, ...] = ()
    metrics_require_key: bool = False  # /metrics asks for an API key too
    # Audio admission (admission.py): sustained x real time, initial burst, undecoded cap.
    audio_rate: float = 2.0
    audio_burst_s: float = 10.0
    max_backlog_s: float = 120.0

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
        if self.drain_timeout_s < 0:
            problems.append("drain_timeout_s must not be negative")
        if self.retry_after_s < 1:
            problems.append("retry_after_s must be at least 1")
        if self.max_upload_bytes < 1 or self.max_uploads < 1:
            problems.append("max_upload_bytes and max_uploads must be at least 1")
        if self.outbox_limit < 1:
            problems.append("outbox_limit must be at least 1")
        if (self.tls_cert is None) != (self.tls_key is None):
            problems.append("TLS needs both a certificate and a key")
        if any(not k or any(c.isspace() for c in k) for k in self.api_keys):
            problems.append("API keys must be non-empty and contain no whitespace")
        try:
            self.admission_config()
            OriginPolicy.parse(self.allowed_origins)
            HostPolicy.build(self.allowed_hosts)
        except ConfigError as exc:
            problems.append(str(exc))
        if problems:
            raise ConfigError("invalid server configuration: " + "; ".join(problems))

    @property
    def scheme(self) -> str:
        return "https" if self.tls_cert else "http"

    def admission_config(self) -> AdmissionConfig:
        """Audio admission per connection; the session length limit counts audio time too."""
        return AdmissionConfig(
            realtime_factor=self.audio_rate,
            burst_s=self.audio_burst_s,
            max_backlog_s=self.max_backlog_s,
            max_audio_s=self.max_session_s,
        )


class _Uvicorn(uvicorn.Server):
    """uvicorn's server without its signal handling: kettle's entry point owns signals."""

    @contextlib.contextmanager
    def capture_signals(self) -> Any:
        yield


def _drop_request_lines(record: logging.LogRecord) -> bool:
    # Keys must never reach a log: uvicorn logs each WebSocket handshake with its query
    # string (?token=), and websockets logs request headers (Authorization, subprotocols)
    # at debug level on uvicorn's logger; those records are dropped whatever the app sets.
    if record.levelno <= logging.DEBUG:
        return False
    return not str(record.msg).startswith('%s - "WebSocket %s"')


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
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.clock = clock  # every connection's timers and audio budget run on it
        self.metrics = ServerMetrics()
        self.authenticator = Authenticator.from_keys(config.api_keys)
        self.origins = OriginPolicy.parse(config.allowed_origins)
        self.hosts = HostPolicy.build(
            config.allowed_hosts, [config.host, socket.gethostname(), *self.origins.hosts]
        )
        self._loop_lag = LoopLagMonitor(self.metrics.loop_lag.observe)
        self._load = load
        self._engine_config = engine_config
        self._slots = SessionSlots(config.max_sessions)
        # Uploads of every REST API (Deepgram's and OpenAI's) share these slots.
        self.uploads = Uploads(config.max_uploads, config.max_upload_bytes)
        self._runners: set[ConnectionRunner] = set()
        self._engine: Engine | None = None
        self._uvicorn: _Uvicorn | None = None
        self._main_loop: asyncio.Task[None] | None = None
        self._sockets: list[socket.socket] = []
        self._port: int | None = None
        self._idle = asyncio.Event()  # set while no session holds a slot
        self._idle.set()
        self._draining = False
        self._shutdown_task: asyncio.Task[None] | None = None
        self.web_root = (config.web_root or _default_web_root()).resolve()
        uvicorn_log = logging.getLogger("uvicorn.error")
        if _drop_request_lines not in uvicorn_log.filters:
            uvicorn_log.addFilter(_drop_request_lines)

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """Listen, then load the model and start the engine; returns once sessions are taken."""
        self._loop_lag.start()
        await self.listen()
        await self.load()

    async def listen(self) -> None:
        cfg = self.config
        uv_config = uvicorn.Config(
            build_app(self),
            lifespan="off",
            ws=WS_IMPLEMENTATION,
            ws_max_size=cfg.max_message_bytes,
            ws_per_message_deflate=False,
            ws_ping_interval=cfg.ping_interval_s,
            # Pings keep idle paths (NAT) open but never time out: a client held back by
            # audio admission has its pong queued behind audio we read slowly on purpose.
            # Dead peers are found by TCP keepalive and the user timeout instead (see _bind).
            ws_ping_timeout=None,
            access_log=False,
            log_config=None,
            server_header=False,
            headers=[("server", "kettle")],
            ssl_certfile=cfg.tls_cert,
            ssl_keyfile=cfg.tls_key,
            timeout_graceful_shutdown=1,
        )
        uv_config.load()
        server = _Uvicorn(uv_config)
        server.lifespan = uv_config.lifespan_class(uv_config)
        self._sockets = _bind(cfg.host, cfg.port)
        self._port = int(self._sockets[0].getsockname()[1])
        logger.info("answering to hosts: %s", self.hosts.describe())
        await server.on_tick(0)  # default headers (Date, Server) before the first request
        await server.startup(sockets=self._sockets)
        self._uvicorn = server
        self._main_loop = asyncio.create_task(server.main_loop())

    async def load(self) -> None:
        from kettle.streaming.engine.engine import Engine, EngineConfig

        loaded = await _load_in_thread(self._load)
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
        """Model loaded and not failing, not shutting down or draining, a session slot free,
        engine not overloaded: what a load balancer's health check asks (/readyz)."""
        return (
            self._engine is not None
            and self._engine.healthy
            and not self._draining
            and not self._slots.full
            and not self._engine.overloaded
        )

    def unready_reason(self) -> str:
        if self._draining:
            return "shutting down"
        if self._engine is None:
            return "loading model"
        if self._engine.model_failing:
            return "model failing"
        if not self._engine.healthy:
            return "engine stopped"
        if self._slots.full:
            return "at the session limit"
        return "overloaded"

    @property
    def draining(self) -> bool:
        return self._draining

    @property
    def engine(self) -> Engine | None:
        """The engine, once the model is loaded."""
        return self._engine

    @property
    def model_info(self) -> ModelInfo | None:
        """The model serving sessions; None while it loads."""
        engine = self._engine
        if engine is None:
            return None
        decoder, finals = engine.decoder, engine.final_decoder
        return ModelInfo(
            decoder.name,
            decoder.multilingual,
            finals.name if finals is not decoder else None,
        )

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

    async def drain(self, timeout: float | None = None) -> None:
        """Leave the rotation but finish the work: /readyz turns 503 at once and new sessions
        and uploads get 503 + Retry-After (the port stays open, so a balancer sees both and
        retries elsewhere); live sessions go on, and uploads in flight are transcribed and
        answered, for up to ``timeout`` (``drain_timeout_s``). Then the server shuts down:
        sessions still live get their finals and a close with 1012, on which clients
        reconnect (through the balancer, to another replica); uploads still running get 503
        + Retry-After."""
        timeout = self.config.drain_timeout_s if timeout is None else timeout
        self._draining = True
        uploads = self.uploads.active
        if not self._idle.is_set() or uploads:
            logger.info(
                "draining: %d live session(s) and %d upload(s) may go on for up to %g s",
                self.sessions_active,
                uploads,
                timeout,
            )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._settled(), timeout)
        await self.shutdown(close_code=CLOSE_SERVICE_RESTART)

    async def _settled(self) -> None:
        """Every session closed and every upload answered (none can start while draining)."""
        await self._idle.wait()
        await self.uploads.wait_idle()

    async def shutdown(
        self, timeout: float | None = None, *, close_code: int = CLOSE_GOING_AWAY
    ) -> None:
        """Stop accepting, finish open sessions' finals (bounded), close them with
        ``close_code`` (1001; a drain's end uses 1012); uploads still running are answered
        503 at once (bounded by the same timeout)."""
        if self._shutdown_task is None:
            self._shutdown_task = asyncio.create_task(self._shutdown(timeout, close_code))
        await asyncio.shield(self._shutdown_task)

    async def _shutdown(self, timeout: float | None, close_code: int) -> None:
        timeout = self.config.shutdown_timeout_s if timeout is None else timeout
        self._draining = True
        self.uploads.close()  # what still runs is answered 503 before the connections close
        uv = self._uvicorn
        if uv is not None:
            for listener in uv.servers:
                listener.close()  # stop listening; open connections stay
        runners = list(self._runners)
        if runners:
            logger.info("shutting down: finishing %d open session(s)", len(runners))
        for runner in runners:
            try:
                runner.begin_shutdown(close_code)
            except Exception:  # one broken session must not stop the others' shutdown
                logger.exception("session %s: could not stop it", runner.session_id)
                runner.force_close(close_code)
        waiters = [asyncio.ensure_future(r.closed.wait()) for r in runners]
        waiters.append(asyncio.ensure_future(self.uploads.wait_idle()))
        _, pending = await asyncio.wait(waiters, timeout=timeout)
        for waiter in pending:
            waiter.cancel()
        for runner in list(self._runners):
            runner.force_close(close_code)
        if uv is not None:
            uv.should_exit = True
            if self._main_loop is not None:
                await self._main_loop
            await uv.shutdown(sockets=self._sockets)
        if self._engine is not None:
            await self._engine.close()
        await self._loop_lag.stop()
        logger.info("server stopped")

    # -- admission -------------------------------------------------------------------------

    def check(self, route: ProtocolRoute, request: HandshakeRequest) -> Refusal | Prepared:
        """The checks that need no capacity: the key (401) first, then parameters (400)."""
        if not self.authenticator.allows_any(route.credentials(request)):
            return self._reject(
                Refusal(401, "a valid API key is required", "unauthorized", _BEARER_CHALLENGE)
            )
        try:
            return route.prepare(request, self.model_info)
        except HandshakeRefused as exc:
            return self._reject(Refusal(exc.status, exc.message, exc.reason))

    def admit(self, route: ProtocolRoute, request: HandshakeRequest) -> Refusal | Prepared:
        """A WebSocket handshake: check(), then capacity (503 + Retry-After). An admitted
        handshake holds a session slot; the caller releases it with `release_slot()` once the
        connection has closed, whatever happened in between."""
        decision = self.check(route, request)
        if isinstance(decision, Refusal):
            return decision
        origin, host = request.header("origin"), request.header("host")
        # Same origin only as a host this server answers to (the guard has refused others
        # already): a rebinding page names its own host in both headers.
        if not self.origins.allows(origin, host if host and self.hosts.allows(host) else None):
            # A page from another site, driving a visitor's browser: refused before capacity.
            return self._reject(Refusal(403, f"pages from {origin} may not connect here", "origin"))
        if not request.upgrade:
            return self._reject(
                Refusal(
                    426,
                    f"{route.path} takes WebSocket connections",
                    "not_websocket",
                    {"Upgrade": "websocket"},
                )
            )
        retry = {"Retry-After": str(self.config.retry_after_s)}
        if self._draining:
            return self._reject(Refusal(503, "server is shutting down", "shutting_down", retry))
        if self._engine is None:
            return self._reject(Refusal(503, "model is loading", "loading", retry))
        if not self._slots.try_acquire():
            return self._reject(Refusal(503, "too many sessions", "session_limit", retry))
        self.metrics.sessions_active.set(self._slots.active)
        self._idle.clear()
        return decision

    def host_refused(self, kind: str) -> None:
        """Count a request the host guard refused (kind: "http" or "websocket")."""
        self.metrics.hosts_refused.labels(kind=kind).inc()
        if kind == "websocket":
            self.metrics.sessions_rejected.labels(reason="host").inc()

    def _reject(self, refusal: Refusal) -> Refusal:
        self.metrics.sessions_rejected.labels(reason=refusal.reason).inc()
        return refusal

    def release_slot(self) -> None:
        self._slots.release()
        self.metrics.sessions_active.set(self._slots.active)
        if self._slots.active == 0:
            self._idle.set()

    def codec_limits(self) -> Limits:
        return Limits(self.config.max_frame_bytes, self.config.max_messages_per_second)

    def connection_limits(self) -> ConnectionLimits:
        cfg = self.config
        return ConnectionLimits(
            idle_timeout_s=cfg.idle_timeout_s,
            max_session_s=cfg.max_session_s,
            finish_timeout_s=cfg.finish_timeout_s,
            max_messages_per_second=cfg.max_messages_per_second,
        )

    async def run_connection(self, transport: Transport, prepared: Prepared) -> None:
        """Run one admitted, accepted connection until it closes."""
        engine, model = self._engine, self.model_info
        if engine is None or model is None:  # pragma: no cover - admitted means loaded
            await transport.close(CLOSE_GOING_AWAY, "server is not ready")
            return
        session_id = uuid.uuid4().hex
        codec = prepared.make_codec(CodecContext(session_id, model, self.codec_limits()))
        runner = ConnectionRunner(
            transport,
            codec,
            engine,
            session_id=session_id,
            limits=self.connection_limits(),
            outbox_limit=self.config.outbox_limit,
            metrics=self.metrics,
            clock=self.clock,
            admission=AudioAdmission(self.config.admission_config(), self.clock()),
        )
        self._runners.add(runner)
        self.metrics.sessions_total.inc()
        try:
            if self._draining:
                runner.begin_shutdown()
            await runner.run()
        finally:
            self._runners.discard(runner)


_BEARER_CHALLENGE = {"WWW-Authenticate": "Bearer"}


async def _load_in_thread(load: Callable[[], DecoderLoad]) -> DecoderLoad:
    """`load()` in a worker thread of its own, so the event loop goes on serving meanwhile."""
    pool = ThreadPoolExecutor(1, thread_name_prefix="kettle-load")
    try:
        return await asyncio.get_running_loop().run_in_executor(pool, load)
    finally:
        pool.shutdown(wait=False)


def _dead_peer_detection(sock: socket.socket) -> None:
    """TCP keepalive probes after 30 s of silence, and a 60 s limit on unacknowledged data:
    a peer that vanished is dropped within about a minute, however much of its audio is
    still queued (the kernel answers probes, whatever the application has read). Accepted
    connections inherit these; where the platform lacks an option it is left out."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (
        ("TCP_KEEPIDLE", 30),
        ("TCP_KEEPINTVL", 10),
        ("TCP_KEEPCNT", 3),
        ("TCP_USER_TIMEOUT", 60_000),
    ):
        option = getattr(socket, name, None)
        if option is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, option, value)


def _bind(host: str, port: int) -> list[socket.socket]:
    """Sockets on every address `host` resolves to (localhost: IPv4 and IPv6), one port.

    With port 0 the first socket picks a free port and the others take the same one.
    """
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    seen: set[tuple[int, object]] = set()
    try:
        for family, kind, proto, _, address in infos:
            if (int(family), address[0]) in seen:
                continue
            seen.add((int(family), address[0]))
            if sockets:
                address = (address[0], sockets[0].getsockname()[1], *address[2:])
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            # Accepted connections inherit a bounded receive buffer. Autotuning would let the
            # kernel hold megabytes per connection for a client that sends faster than it is
            # read (audio admission pauses reads); bounded, TCP pushes back after a few
            # seconds of audio, and the client's pong to a keepalive ping is never queued
            # behind more.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER_BYTES)
            _dead_peer_detection(sock)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.setblocking(False)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def _default_web_root() -> Path:
    import kettle.web

    return Path(kettle.web.__file__).resolve().parent


# -- running from the command line ------------------------------------------------------------


async def serve_until_signalled(
    config: ServerConfig,
    load: Callable[[], DecoderLoad],
    engine_config: EngineConfig | None = None,
    *,
    on_ready: Callable[[KettleServer], None] | None = None,
) -> int:
    """Run a server until a signal; returns 0.

    SIGTERM (what an orchestrator sends) drains: see `KettleServer.drain`. SIGINT (Ctrl-C),
    or a second signal during a drain, shuts down now: open sessions get their finals and
    1001 (1012 when the drain had begun), uploads still running 503.
    """
    loop = asyncio.get_running_loop()
    signals: asyncio.Queue[signal.Signals] = asyncio.Queue()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, signals.put_nowait, sig)
    server = KettleServer(config, load, engine_config)
    try:
        await server.start()
        if on_ready is not None:
            on_ready(server)
        received = await signals.get()
        if received == signal.SIGTERM:
            logger.info("SIGTERM: draining")
            drain = asyncio.create_task(server.drain())
            again = asyncio.create_task(signals.get())
            await asyncio.wait({drain, again}, return_when=asyncio.FIRST_COMPLETED)
            again.cancel()
            if not drain.done():
                logger.info("second signal: shutting down now")
                await server.shutdown(close_code=CLOSE_SERVICE_RESTART)
            await drain
        else:
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
    "Refusal",
    "ServerConfig",
    "serve_until_signalled",
]
