"""kettle.streaming: live transcription, one sub-package per layer.

    core/       one stream, pure: Session, SessionConfig, VAD, agreement, events
    engine/     all streams: Engine, the model thread; engine/scheduling/ the pure policy
    protocols/  sans-I/O wire codecs and the handshake vocabulary
    server/     Starlette on uvicorn: KettleServer, routes, auth, limits, uploads
    client/     the Python client: stream_audio
    cli/        `kettle` and its subcommands

Arrows point one way: core <- engine <- server, core <- protocols <- server; the client
stands apart (tests/test_layout.py holds them). The names below are the public facade; they
are imported on first use, so `import kettle.streaming` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kettle.streaming.client.client import stream_audio
    from kettle.streaming.core.events import (
        Done,
        Error,
        Final,
        Finalized,
        NoTranscript,
        Partial,
        SpeechStarted,
        SpeechStopped,
    )
    from kettle.streaming.core.session import Session, SessionConfig
    from kettle.streaming.engine.engine import Engine, EngineConfig
    from kettle.streaming.server.server import KettleServer, ServerConfig

_HOMES = {
    "Session": "core.session",
    "SessionConfig": "core.session",
    "Partial": "core.events",
    "Final": "core.events",
    "Error": "core.events",
    "Done": "core.events",
    "SpeechStarted": "core.events",
    "SpeechStopped": "core.events",
    "NoTranscript": "core.events",
    "Finalized": "core.events",
    "Engine": "engine.engine",
    "EngineConfig": "engine.engine",
    "KettleServer": "server.server",
    "ServerConfig": "server.server",
    "stream_audio": "client.client",
}
__all__ = [
    "Done",
    "Engine",
    "EngineConfig",
    "Error",
    "Final",
    "Finalized",
    "KettleServer",
    "NoTranscript",
    "Partial",
    "ServerConfig",
    "Session",
    "SessionConfig",
    "SpeechStarted",
    "SpeechStopped",
    "stream_audio",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
