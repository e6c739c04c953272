"""`kettle serve` (the WebSocket server) and `kettle stream` (its small client)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from kettle.streaming.engine.config import EngineConfig
from kettle.streaming.engine.scheduling.config import SchedulerConfig
from kettle.streaming.server.config import ServerConfig
from kettle.transcribe.cli.args import (
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
)
from kettle.transcribe.errors import ConfigError

# The server's defaults have one home, ServerConfig; the flags show them (config.py is light).
_DEFAULTS = ServerConfig()


def register_serve(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "serve",
        help="run the streaming WebSocket server",
        description=(
            "Serve kettle v1 (docs/protocol.md) on ws://HOST:PORT/v1/stream, OpenAI's audio API "
            "(/v1/audio/..., /v1/models, /v1/realtime), the browser page on /, and /v1/info, "
            "/healthz, /readyz, /metrics. Prints 'kettle serving on http://HOST:PORT' once ready. "
            "SIGTERM drains: /readyz turns 503, new sessions and uploads get 503, live sessions "
            "and uploads in flight go on for up to --drain-timeout, then sessions get their finals "
            "and close 1012 (clients reconnect elsewhere), uploads still running 503. Ctrl-C "
            "finishes open sessions' finals now, answers uploads in flight 503 and exits."
        ),
    )
    parser.add_argument(
        "--host", default=_DEFAULTS.host, help="address to bind (default %(default)s)"
    )
    parser.add_argument(
        "--port", type=non_negative_int, default=_DEFAULTS.port, help="port; 0 picks a free one"
    )
    parser.add_argument(
        "--wyoming",
        default=None,
        metavar="tcp://HOST:PORT",
        help="also serve Wyoming speech-to-text (Home Assistant) on this address, e.g. "
        "tcp://0.0.0.0:10300; it has no API keys (docs/wyoming.md)",
    )
    parser.add_argument(
        "--wyoming-zeroconf",
        default=None,
        metavar="NAME",
        help="announce the --wyoming listener over mDNS as NAME (_wyoming._tcp) so Home "
        "Assistant discovers it; needs pip install 'kettle[zeroconf]'",
    )
    parser.add_argument("--model", default="tiny.en", help="model for partials (and finals)")
    parser.add_argument("--final-model", default=None, help="a second model for finals only")
    parser.add_argument(
        "--refine-model",
        default=None,
        metavar="NAME",
        help="a model for refinements only (the second pass that may revise finals for "
        "clients that ask for revisions), e.g. base; default: the finals' model",
    )
    parser.add_argument("--fake-model", action="store_true", help="a fake model (tests, demos)")
    parser.add_argument(
        "--api-key-file",
        default=None,
        metavar="FILE",
        help="require one of the keys in FILE (one a line; # comments). Keys may also come "
        "from KETTLE_API_KEYS (comma-separated); both keep them out of `ps`",
    )
    parser.add_argument(
        "--api-key",
        action="append",
        default=[],
        metavar="KEY",
        help="require this key (repeatable; visible in `ps`: prefer --api-key-file)",
    )
    parser.add_argument("--max-sessions", type=positive_int, default=_DEFAULTS.max_sessions)
    parser.add_argument(
        "--max-frame-bytes",
        type=positive_int,
        default=_DEFAULTS.max_frame_bytes,
        help="largest audio message",
    )
    parser.add_argument(
        "--idle-timeout",
        type=positive_float,
        default=_DEFAULTS.idle_timeout_s,
        metavar="S",
        help="seconds",
    )
    parser.add_argument(
        "--deepgram-audio-timeout",
        type=positive_float,
        default=_DEFAULTS.deepgram_audio_timeout_s,
        metavar="S",
        help="seconds a Deepgram live socket (/v1/listen) may send neither audio nor a text "
        "message (KeepAlive) before it gets its finals and close 1011 NET-0001, as Deepgram's "
        "(in place of --idle-timeout there; default %(default)s)",
    )
    parser.add_argument(
        "--max-session-seconds",
        type=positive_float,
        default=_DEFAULTS.max_session_s,
        metavar="S",
        help="longest session, in wall time and in audio time alike",
    )
    parser.add_argument(
        "--max-messages-per-second",
        type=positive_float,
        default=_DEFAULTS.max_messages_per_second,
        metavar="N",
        help="text messages per session per second (audio has its own budget: --audio-rate)",
    )
    parser.add_argument(
        "--audio-rate",
        type=positive_float,
        default=_DEFAULTS.audio_rate,
        metavar="X",
        help="audio a connection may send, in multiples of real time after its first "
        "--audio-burst seconds; faster clients are slowed down (reads pause), never cut",
    )
    parser.add_argument(
        "--audio-burst", type=positive_float, default=_DEFAULTS.audio_burst_s, metavar="S"
    )
    parser.add_argument(
        "--max-backlog-seconds",
        type=positive_float,
        default=_DEFAULTS.max_backlog_s,
        metavar="S",
        help="audio a session may hold not yet transcribed; beyond, it gets an error, its "
        "finals and a close",
    )
    parser.add_argument(
        "--openai-aliases",
        type=_names,
        default=_DEFAULTS.openai_aliases,
        metavar="NAMES",
        help="comma-separated model names OpenAI clients may send for the served model "
        "(and their dated variants); default: " + ",".join(_DEFAULTS.openai_aliases),
    )
    parser.add_argument(
        "--allowed-origins",
        action="append",
        default=[],
        metavar="ORIGINS",
        help="web pages (scheme://host[:port], comma-separated, or *) that may open "
        "WebSockets here besides this server's own page and localhost",
    )
    parser.add_argument(
        "--allowed-hosts",
        action="append",
        default=[],
        metavar="HOSTS",
        help="host names (comma-separated; *.example.com for subdomains) clients may reach "
        "this server by, besides localhost, IP addresses, --host, the machine's name and the "
        "hosts of --allowed-origins; others get 400 (a guard against DNS rebinding). * allows "
        "any: only behind a proxy that checks Host itself",
    )
    parser.add_argument(
        "--metrics-require-key",
        action="store_true",
        help="/metrics asks for an API key too (Authorization: Bearer or ?token=)",
    )
    parser.add_argument(
        "--shutdown-timeout",
        type=positive_float,
        default=_DEFAULTS.shutdown_timeout_s,
        metavar="S",
        help="how long shutdown waits for open sessions' finals",
    )
    parser.add_argument(
        "--drain-timeout",
        type=non_negative_float,
        default=_DEFAULTS.drain_timeout_s,
        metavar="S",
        help="after SIGTERM, how long live sessions and uploads in flight may go on "
        "(default %(default)s)",
    )
    parser.add_argument(
        "--diarize",
        choices=("auto", "on", "off"),
        default=_DEFAULTS.diarize,
        help="speaker labels for clients that ask (the diarize extra): auto (default) when "
        "installed, loaded at the first such client; on: load now, fail without it; off",
    )
    parser.add_argument(
        "--max-uploads",
        type=positive_int,
        default=_DEFAULTS.max_uploads,
        metavar="N",
        help="REST uploads (OpenAI, Deepgram) transcribed at once (more get 429, Retry-After)",
    )
    parser.add_argument(
        "--max-upload-mb",
        type=positive_int,
        default=_DEFAULTS.max_upload_bytes >> 20,
        metavar="MB",
        help="largest upload",
    )
    parser.add_argument(
        "--upload-body-timeout",
        type=positive_float,
        default=_DEFAULTS.upload_body_timeout_s,
        metavar="S",
        help="an upload's body must be all in within S seconds of its headers, or 408 "
        "(default %(default)s)",
    )
    parser.add_argument(
        "--upload-body-grace",
        type=non_negative_float,
        default=_DEFAULTS.upload_body_grace_s,
        metavar="S",
        help="seconds an upload's body may take before --upload-min-rate applies "
        "(default %(default)s)",
    )
    parser.add_argument(
        "--upload-min-rate",
        type=non_negative_int,
        default=_DEFAULTS.upload_min_bytes_per_s >> 10,
        metavar="KIB_S",
        help="after the grace period an upload's body must have come at this many KiB/s "
        "on average, or 408; 0: any rate (default %(default)s)",
    )
    parser.add_argument(
        "--upload-budget-mb",
        type=positive_int,
        default=None,
        metavar="MB",
        help="upload bodies held at once, being read or transcribed, all together (429 "
        "beyond; default: --max-uploads times --max-upload-mb)",
    )
    parser.add_argument("--threads", type=non_negative_int, default=0, help="model CPU threads")
    parser.add_argument(
        "--batch-size",
        type=positive_int,
        default=SchedulerConfig.max_batch_size,
        help="largest decode batch",
    )
    parser.add_argument(
        "--fixed-cadence",
        action="store_true",
        help="partials every 0.5 s of audio as configured, not paced by the measured decode "
        "cost (the cadence before scheduler v2); degradation may still stretch it",
    )
    parser.add_argument(
        "--remeasure-costs",
        action="store_true",
        help="measure the model's costs at start-up even if they are cached (the cache, in "
        "$KETTLE_CACHE_DIR/costs, keeps them per model, device, compute type, threads and "
        "machine), and replace the cached ones",
    )
    parser.add_argument(
        "--no-cost-cache",
        action="store_true",
        help="measure the model's costs at every start-up and store nothing",
    )
    parser.add_argument(
        "--release-memory-s",
        type=non_negative_float,
        default=60.0,  # a server runs for days; EngineConfig keeps None for embedded engines
        metavar="S",
        help="after work, give memory the C library holds free back to the OS at most "
        "every S seconds: when idle, or between batches when the model was busy all along "
        "(glibc only; 0: never). Keeps a long-running server's RSS from creeping up",
    )
    parser.add_argument(
        "--allocator",
        choices=("auto", "jemalloc", "tcmalloc", "glibc"),
        default="auto",
        help="the server's malloc: auto (default) runs on jemalloc where libjemalloc2 is "
        "installed, which keeps a long-running server's RSS flat (docs/operating.md); "
        "glibc: the C library's own",
    )
    parser.add_argument("--tls-cert", default=None, metavar="FILE")
    parser.add_argument("--tls-key", default=None, metavar="FILE")
    parser.set_defaults(func=_serve)


def _serve(args: argparse.Namespace) -> int:
    from kettle.streaming.server.credentials import load_api_keys
    from kettle.streaming.server.server import serve_until_signalled

    loaded = load_api_keys(args.api_key, args.api_key_file, os.environ)
    for warning in loaded.warnings:
        print(f"kettle: warning: {warning}", file=sys.stderr, flush=True)
    config = _server_config(args, loaded.keys)
    if config.wyoming_zeroconf is not None:
        from kettle.streaming.server.wyoming_zeroconf import check_available

        check_available()
    engine_config = _engine_config(args)
    fake, model, final_model, threads = args.fake_model, args.model, args.final_model, args.threads
    refine_model = args.refine_model

    def load() -> Any:
        if fake:
            from kettle.transcribe.model.fake import FakeDecoder

            return FakeDecoder(keep_requests=16)  # bounded: a demo server may run for days
        from kettle.transcribe.model.adapter import ModelConfig, WhisperAdapter

        decoder = WhisperAdapter(ModelConfig(name=model, threads=threads))
        finals = refine = None
        if final_model and final_model != model:
            finals = WhisperAdapter(ModelConfig(name=final_model, threads=threads))
        if refine_model and refine_model not in (model, final_model or model):
            refine = WhisperAdapter(ModelConfig(name=refine_model, threads=threads))
        return decoder, finals, refine

    def announce(server: Any) -> None:
        print(f"kettle serving on {server.url}", flush=True)
        if server.wyoming is not None:
            print(f"kettle Wyoming on {args.wyoming} (port {server.wyoming.port})", flush=True)

    speakers = None
    if fake and args.diarize != "off":
        # The fake model's voices differ by pitch: the pitch stand-in labels them.
        from kettle.streaming.engine.speakers import SpeakerService
        from kettle.transcribe.speakers.fake import PitchSpeakerEncoder

        speakers = SpeakerService(PitchSpeakerEncoder())
    try:
        return asyncio.run(
            serve_until_signalled(config, load, engine_config, on_ready=announce, speakers=speakers)
        )
    except OSError as exc:
        raise ConfigError(
            f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}"
        ) from None


def _server_config(args: argparse.Namespace, keys: tuple[str, ...]) -> ServerConfig:
    """The server's settings from the flags (ServerConfig validates them)."""
    budget_mb = args.upload_budget_mb
    return ServerConfig(
        host=args.host,
        port=args.port,
        api_keys=keys,
        max_sessions=args.max_sessions,
        max_uploads=args.max_uploads,
        max_upload_bytes=args.max_upload_mb << 20,
        upload_body_timeout_s=args.upload_body_timeout,
        upload_body_grace_s=args.upload_body_grace,
        upload_min_bytes_per_s=args.upload_min_rate << 10,
        upload_budget_bytes=None if budget_mb is None else budget_mb << 20,
        max_frame_bytes=args.max_frame_bytes,
        max_message_bytes=max(_DEFAULTS.max_message_bytes, args.max_frame_bytes),
        idle_timeout_s=args.idle_timeout,
        deepgram_audio_timeout_s=args.deepgram_audio_timeout,
        max_session_s=args.max_session_seconds,
        max_messages_per_second=args.max_messages_per_second,
        shutdown_timeout_s=args.shutdown_timeout,
        drain_timeout_s=args.drain_timeout,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        allowed_origins=tuple(args.allowed_origins),
        allowed_hosts=tuple(args.allowed_hosts),
        metrics_require_key=args.metrics_require_key,
        audio_rate=args.audio_rate,
        audio_burst_s=args.audio_burst,
        max_backlog_s=args.max_backlog_seconds,
        openai_aliases=args.openai_aliases,
        diarize=args.diarize,
        wyoming=args.wyoming,
        wyoming_zeroconf=args.wyoming_zeroconf,
    )


def _names(value: str) -> tuple[str, ...]:
    """A comma-separated list of names ("" for none)."""
    return tuple(name.strip() for name in value.split(",") if name.strip())


def _engine_config(args: argparse.Namespace) -> EngineConfig:
    from kettle.transcribe.model.models import cache_dir

    return EngineConfig(
        scheduler=SchedulerConfig(max_batch_size=args.batch_size),
        adaptive_cadence=not args.fixed_cadence,
        cost_cache=None if args.no_cost_cache else cache_dir() / "costs",
        remeasure_costs=args.remeasure_costs,
        release_memory_s=args.release_memory_s or None,
    )


def register_stream(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "stream",
        help="stream an audio file to a kettle server and print the transcript",
        description=(
            "Stream FILE per docs/protocol.md. On a terminal partials overwrite one line and "
            "finals are printed as lines, revisions (a later, corrected final) as lines "
            "starting '~'; --json prints every server message as a JSON line."
        ),
    )
    parser.add_argument("file", metavar="FILE", help="audio file (any format kettle reads)")
    parser.add_argument("--url", default="ws://127.0.0.1:8765/v1/stream")
    parser.add_argument(
        "--realtime", action="store_true", help="send audio at its real pace, like a microphone"
    )
    parser.add_argument("--chunk-ms", type=positive_int, default=100, help="audio per message")
    parser.add_argument("--language", default=None, help="ISO 639-1 code (multilingual models)")
    parser.add_argument("--no-partials", action="store_true", help="ask for finals only")
    parser.add_argument("--word-timestamps", action="store_true")
    parser.add_argument(
        "--no-revisions",
        action="store_true",
        help="do not ask for revisions (later corrections of finals, printed marked '~')",
    )
    parser.add_argument("--api-key", default=None, help="API key (or KETTLE_API_KEY)")
    parser.add_argument("--raw", default=None, metavar="ENC:RATE:CH", help="headerless PCM input")
    parser.add_argument("--json", action="store_true", help="print server messages as JSON lines")
    parser.add_argument(
        "--reconnects",
        type=non_negative_int,
        default=5,
        metavar="N",
        help="reconnect up to N times in a row when a session breaks off, sending again the "
        "audio no final covers yet (default %(default)s; 0: never)",
    )
    parser.set_defaults(func=_stream)


def _stream(args: argparse.Namespace) -> int:
    from kettle.streaming.client.client import ClientOptions, api_key_from_env, run_stream_command

    try:
        options = ClientOptions(
            url=args.url,
            api_key=args.api_key or api_key_from_env(),
            realtime=args.realtime,
            chunk_ms=args.chunk_ms,
            language=args.language,
            partials=not args.no_partials,
            word_timestamps=args.word_timestamps,
            revisions=not args.no_revisions,
            reconnects=args.reconnects,
        )
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return run_stream_command(args.file, options, raw=args.raw, as_json=args.json, out=sys.stdout)
