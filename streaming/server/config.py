"""What `kettle serve` can set about the server itself, validated when it is made."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path

from kettle.streaming.protocols.limits import DEFAULT_LIMITS, Limits
from kettle.streaming.protocols.openai.models import MODEL_ALIASES
from kettle.streaming.protocols.wyoming.address import parse_uri
from kettle.streaming.server.hosts import HostPolicy
from kettle.streaming.server.origins import OriginPolicy
from kettle.streaming.server.upload_limits import BodyPace
from kettle.transcribe.errors import ConfigError


@dataclass(frozen=True)
class ServerConfig:
    """Everything `kettle serve` can set about the server itself (the engine has its own).
    The connection limits' defaults are `Limits`'; `limits()` gathers them into that record."""

    host: str = "127.0.0.1"
    port: int = 8765
    api_keys: tuple[str, ...] = field(default=(), repr=False)  # never printed or logged
    max_sessions: int = DEFAULT_LIMITS.max_sessions
    max_frame_bytes: int = DEFAULT_LIMITS.max_frame_bytes
    max_message_bytes: int = DEFAULT_LIMITS.max_message_bytes
    idle_timeout_s: float = DEFAULT_LIMITS.idle_timeout_s
    deepgram_audio_timeout_s: float = DEFAULT_LIMITS.deepgram_audio_timeout_s
    max_session_s: float = DEFAULT_LIMITS.max_session_s
    max_messages_per_second: float = DEFAULT_LIMITS.max_messages_per_second
    shutdown_timeout_s: float = 10.0
    # A drain (SIGTERM): how long live sessions may go on before they get their finals and
    # 1012; meanwhile /readyz is 503 and new sessions are refused with 503 + Retry-After.
    drain_timeout_s: float = 30.0
    finish_timeout_s: float = DEFAULT_LIMITS.finish_timeout_s
    retry_after_s: int = 5
    outbox_limit: int = DEFAULT_LIMITS.outbox_limit
    # Uploads (Deepgram's POST /v1/listen, OpenAI's /v1/audio/...): the largest body taken
    # (413 beyond), and how many are transcribed at once, all APIs together (429 beyond).
    max_upload_bytes: int = 1 << 30
    max_uploads: int = 4
    # An upload's body is read before it takes a slot, and cut with 408 when it is not all
    # in within upload_body_timeout_s, or when after the first upload_body_grace_s it has
    # come at under upload_min_bytes_per_s on average (0: any rate); docs/operating.md.
    upload_body_timeout_s: float = 1800.0
    upload_body_grace_s: float = 10.0
    upload_min_bytes_per_s: int = 16 << 10
    # Bytes of upload bodies held at once, being read or transcribed (429 beyond); None:
    # max_uploads bodies of max_upload_bytes.
    upload_budget_bytes: int | None = None
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
    audio_rate: float = DEFAULT_LIMITS.audio_rate
    audio_burst_s: float = DEFAULT_LIMITS.audio_burst_s
    max_backlog_s: float = DEFAULT_LIMITS.max_backlog_s
    # Model names OpenAI clients send that name the served finals model (openai_models.py),
    # on the REST and Realtime APIs alike.
    openai_aliases: tuple[str, ...] = MODEL_ALIASES
    # Speaker labels (the diarize extra): "auto" when installed, loaded at the first
    # client that asks; "on" loads it at start (and fails without it); "off" refuses.
    diarize: str = "auto"
    # A Wyoming speech-to-text listener beside the HTTP port (Home Assistant), as
    # tcp://HOST:PORT; None: none. ``wyoming_zeroconf``: the name it is announced by over
    # mDNS (_wyoming._tcp), so Home Assistant discovers it; None: not announced.
    wyoming: str | None = None
    wyoming_zeroconf: str | None = None

    def __post_init__(self) -> None:
        problems = []
        if not 0 <= self.port <= 65535:
            problems.append(f"port {self.port} is outside 0..65535")
        if self.diarize not in ("auto", "on", "off"):
            problems.append(f"diarize must be auto, on or off, not {self.diarize!r}")
        try:
            self.limits()
        except ConfigError as exc:
            problems.append(str(exc))
        if self.shutdown_timeout_s < 0:
            problems.append("shutdown_timeout_s must not be negative")
        if self.drain_timeout_s < 0:
            problems.append("drain_timeout_s must not be negative")
        if self.retry_after_s < 1:
            problems.append("retry_after_s must be at least 1")
        if self.max_upload_bytes < 1 or self.max_uploads < 1:
            problems.append("max_upload_bytes and max_uploads must be at least 1")
        budget = self.upload_budget_bytes
        if budget is not None and budget < self.max_upload_bytes:
            problems.append("upload_budget_bytes must be at least max_upload_bytes")
        try:
            self.upload_pace()
        except ValueError as exc:
            problems.append(str(exc))
        if (self.tls_cert is None) != (self.tls_key is None):
            problems.append("TLS needs both a certificate and a key")
        if any(not k or any(c.isspace() for c in k) for k in self.api_keys):
            problems.append("API keys must be non-empty and contain no whitespace")
        try:
            OriginPolicy.parse(self.allowed_origins)
            HostPolicy.build(self.allowed_hosts)
        except ConfigError as exc:
            problems.append(str(exc))
        if self.wyoming is not None:
            try:
                parse_uri(self.wyoming)
            except ValueError as exc:
                problems.append(str(exc))
        if self.wyoming_zeroconf is not None and self.wyoming is None:
            problems.append("--wyoming-zeroconf announces the --wyoming listener: give both")
        if problems:
            raise ConfigError("invalid server configuration: " + "; ".join(problems))

    @property
    def scheme(self) -> str:
        return "https" if self.tls_cert else "http"

    def upload_pace(self) -> BodyPace:
        """How fast an upload's body must come (upload_limits.py)."""
        return BodyPace(
            deadline_s=self.upload_body_timeout_s,
            grace_s=self.upload_body_grace_s,
            min_rate=float(self.upload_min_bytes_per_s),
        )

    def limits(self) -> Limits:
        """Every connection's limits, as the gate, the runner, the codecs and the audio
        budget read them."""
        # Every field of Limits is one of ServerConfig's, by the same name.
        return Limits(**{f.name: getattr(self, f.name) for f in fields(Limits)})
