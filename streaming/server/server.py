"""kettle's server: every protocol and plain HTTP on one port, Starlette on uvicorn.

`KettleServer` owns the lifecycle (listen, load the model, drain on shutdown) and builds what
the routes use (`Services`: the gate with the session slots and admission, the connections,
the uploads, the engine being served); `app.py` mounts the routes on those services; each
WebSocket connection is run by `runner.ConnectionRunner` with its protocol's codec
(`protocols/`). See
`kettle.streaming.protocols` for how to add a protocol or a route.

uvicorn serves with websockets' sans-I/O implementation: it pauses reading the socket after
each message until the runner asks for the next (so a connection that is not read pushes
back through TCP), and waits for the socket to drain before each send (so the outbox sees a
slow reader). Per-message deflate is off (audio does not compress, and it costs CPU and
memory per connection); a message over `max_message_bytes` closes the connection with 1009.
Plain HTTP is uvicorn's httptools protocol, answering request bodies cut short by a
half-close and closing after a slow body's 408 without resetting it (http_protocol.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias, TypeVar

import uvicorn
from kettle.streaming.engine.speakers import SpeakerService
from kettle.streaming.protocols.base import CLOSE_GOING_AWAY, CLOSE_SERVICE_RESTART
from kettle.streaming.protocols.kettle_v1.live import PATH as STREAM_PATH
from kettle.streaming.server.access import Authenticator
from kettle.streaming.server.app import build_app
from kettle.streaming.server.config import ServerConfig
from kettle.streaming.server.connections import Connections
from kettle.streaming.server.gate import ConnectionGate, Refusal
from kettle.streaming.server.hosts import HostPolicy
from kettle.streaming.server.http_protocol import KettleHttpProtocol
from kettle.streaming.server.looplag import LoopLagMonitor
from kettle.streaming.server.metrics import ServerMetrics
from kettle.streaming.server.origins import OriginPolicy
from kettle.streaming.server.services import Services
from kettle.streaming.server.serving import Serving
from kettle.streaming.server.sockets import Uvicorn, bind, caught_signals
from kettle.streaming.server.uploads import Uploads
from kettle.streaming.server.wyoming_server import WyomingListener
from kettle.streaming.server.wyoming_zeroconf import Announcement, announce
from kettle.transcribe.types import Decoder

if TYPE_CHECKING:
    from kettle.streaming.engine.engine import Engine, EngineConfig

T = TypeVar("T")
logger = logging.getLogger(__name__)

# The uvicorn WebSocket implementation: websockets, through its sans-I/O protocol (uvicorn's
# older "websockets" one is deprecated and buffers up to 32 messages ahead of the app).
WS_IMPLEMENTATION = "websockets-sansio"

# What a loader returns: the model, or (partials model, finals model or None), or those and
# the refinements' model (or None).
DecoderLoad: TypeAlias = (
    Decoder | tuple[Decoder, Decoder | None] | tuple[Decoder, Decoder | None, Decoder | None]
)


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
    until it has returned, /readyz answers 503 and handshakes are refused with 503. The
    routes see only `services` (services.py): the gate, the connections, the uploads and
    what is being served (`serving`: the engine, the drain).
    """

    def __init__(
        self,
        config: ServerConfig,
        load: Callable[[], DecoderLoad],
        engine_config: EngineConfig | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        speakers: SpeakerService | None = None,
    ) -> None:
        """``speakers``: the speaker service to use (tests); default per config.diarize."""
        self.config = config
        self._speakers = speakers
        self.metrics = ServerMetrics()
        limits = config.limits()
        authenticator = Authenticator.from_keys(config.api_keys)
        origins = OriginPolicy.parse(config.allowed_origins)
        self.hosts = HostPolicy.build(
            config.allowed_hosts, [config.host, socket.gethostname(), *origins.hosts]
        )
        self._loop_lag = LoopLagMonitor(self.metrics.loop_lag.observe)
        self._load = load
        self._engine_config = engine_config
        self.serving = Serving(config.openai_aliases)
        self.gate = ConnectionGate(
            authenticator=authenticator,
            origins=origins,
            hosts=self.hosts,
            metrics=self.metrics,
            limits=limits,
            retry_after_s=config.retry_after_s,
            draining=lambda: self.serving.draining,
            model_info=lambda: self.serving.model_info,
        )
        # Uploads of every REST API (Deepgram's and OpenAI's) share these slots.
        self.uploads = Uploads(
            config.max_uploads,
            config.max_upload_bytes,
            pace=config.upload_pace(),
            budget_bytes=config.upload_budget_bytes,
            on_cut=lambda reason: self.metrics.uploads_cut.labels(reason=reason).inc(),
        )
        # Every connection's timers and audio budget run on `clock`.
        self.connections = Connections(self.serving, limits, self.metrics, clock)
        self.services = Services(
            config=config,
            serving=self.serving,
            gate=self.gate,
            connections=self.connections,
            uploads=self.uploads,
            authenticator=authenticator,
            metrics=self.metrics,
            web_root=(config.web_root or _default_web_root()).resolve(),
        )
        self._uvicorn: Uvicorn | None = None
        self._main_loop: asyncio.Task[None] | None = None
        self._sockets: list[socket.socket] = []
        self._port: int | None = None
        self._shutdown_task: asyncio.Task[None] | None = None
        self.wyoming: WyomingListener | None = None  # with config.wyoming, once listening
        self._zeroconf: Announcement | None = None
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
            build_app(self.services),
            lifespan="off",
            http=KettleHttpProtocol,  # answers bodies cut short (http_protocol.py)
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
        server = Uvicorn(uv_config)
        server.lifespan = uv_config.lifespan_class(uv_config)
        self._sockets = bind(cfg.host, cfg.port)
        self._port = int(self._sockets[0].getsockname()[1])
        logger.info("answering to hosts: %s", self.hosts.describe())
        await server.on_tick(0)  # default headers (Date, Server) before the first request
        await server.startup(sockets=self._sockets)
        self._uvicorn = server
        self._main_loop = asyncio.create_task(server.main_loop())
        if cfg.wyoming is not None:
            self.wyoming = WyomingListener(cfg.wyoming, self.gate, self.connections)
            await self.wyoming.start()
            if cfg.wyoming_zeroconf is not None:
                port = self.wyoming.port
                self._zeroconf = await announce(cfg.wyoming_zeroconf, cfg.wyoming, port)

    def _speaker_service(self) -> SpeakerService | None:
        """Per ``config.diarize``: "on" loads the speaker model now (and fails without it),
        "auto" loads it at the first diarizing client if installed, "off" has none."""
        from kettle.transcribe.speakers import encoder as speaker_encoder

        mode = self.config.diarize
        if mode == "off" or (mode == "auto" and not speaker_encoder.available()):
            return None
        if mode == "on":
            return SpeakerService(speaker_encoder.shared_encoder())
        return SpeakerService(speaker_encoder.shared_encoder)

    async def load(self) -> None:
        from kettle.streaming.engine.engine import Engine, EngineConfig

        loaded = await _load_in_thread(self._load)
        # A decoder, or (live, finals[, refinements]) with None for "the one before".
        parts: tuple[Decoder | None, ...] = loaded if isinstance(loaded, tuple) else (loaded,)
        decoder, final_decoder, refine_decoder = (*parts, None, None)[:3]
        assert decoder is not None
        engine = Engine(
            decoder,
            self._engine_config or EngineConfig(),
            final_decoder=final_decoder,
            refine_decoder=refine_decoder,
            observer=self.metrics,
            speakers=self._speakers or await _load_in_thread(self._speaker_service),
        )
        await engine.start()
        self.serving.engine = engine
        logger.info(
            "model %s loaded%s",
            decoder.name,
            f", finals by {final_decoder.name}" if final_decoder else "",
        )
        if refine_decoder is not None:
            logger.info("refinements by %s", refine_decoder.name)

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
        """What /readyz answers: see `Services.ready`."""
        return self.services.ready

    @property
    def draining(self) -> bool:
        return self.serving.draining

    @property
    def engine(self) -> Engine | None:
        """The engine, once the model is loaded."""
        return self.serving.engine

    @property
    def sessions_active(self) -> int:
        """Sessions holding a slot: from their handshake until their connection closed."""
        return self.gate.active

    async def wait_idle(self) -> None:
        """Return once no session holds a slot (every connection closed)."""
        await self.gate.wait_idle()

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
        self.serving.draining = True
        uploads = self.uploads.active
        if not self.gate.idle or uploads:
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
        await self.gate.wait_idle()
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
        self.serving.draining = True
        self.uploads.close()  # what still runs is answered 503 before the connections close
        uv = self._uvicorn
        if uv is not None:
            for listener in uv.servers:
                listener.close()  # stop listening; open connections stay
        if self.wyoming is not None:
            self.wyoming.close()
        if self._zeroconf is not None:
            await self._zeroconf.close()
        closing = self.connections.finish_all(close_code)
        waiters = [asyncio.ensure_future(closed) for closed in closing]
        waiters.append(asyncio.ensure_future(self.uploads.wait_idle()))
        _, pending = await asyncio.wait(waiters, timeout=timeout)
        for waiter in pending:
            waiter.cancel()
        self.connections.close_all(close_code)
        if uv is not None:
            uv.should_exit = True
            if self._main_loop is not None:
                await self._main_loop
            await uv.shutdown(sockets=self._sockets)
        if self.serving.engine is not None:
            await self.serving.engine.close()
        await self._loop_lag.stop()
        logger.info("server stopped")


async def _load_in_thread(load: Callable[[], T]) -> T:
    """`load()` in a worker thread of its own, so the event loop goes on serving meanwhile."""
    pool = ThreadPoolExecutor(1, thread_name_prefix="kettle-load")
    try:
        return await asyncio.get_running_loop().run_in_executor(pool, load)
    finally:
        pool.shutdown(wait=False)


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
    speakers: SpeakerService | None = None,
) -> int:
    """Run a server until a signal; returns 0.

    SIGTERM (what an orchestrator sends) drains: see `KettleServer.drain`. SIGINT (Ctrl-C),
    or a second signal during a drain, shuts down now: open sessions get their finals and
    1001 (1012 when the drain had begun), uploads still running 503.
    """
    server = KettleServer(config, load, engine_config, speakers=speakers)
    with caught_signals() as signals:
        await _serve(server, signals, on_ready)
    return 0


async def _serve(
    server: KettleServer,
    signals: asyncio.Queue[signal.Signals],
    on_ready: Callable[[KettleServer], None] | None,
) -> None:
    """Start `server`, then drain or shut it down as the signals ask."""
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


__all__ = [
    "STREAM_PATH",
    "KettleServer",
    "Refusal",
    "ServerConfig",
    "serve_until_signalled",
]
