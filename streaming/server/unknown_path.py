"""A WebSocket handshake on a path no protocol serves: 404, in the error shape of the API the
path belongs to, so a client reads "wrong URL" rather than the bare 403 a closed handshake
gives (which users read as a key problem)."""

from __future__ import annotations

import json
from typing import Any

# Path prefixes and the API whose clients use them: (prefix, body maker).
_DEEPGRAM_PREFIXES = ("/v1/listen", "/v2/", "/v1/speak", "/v1/agent")
_OPENAI_PREFIXES = ("/v1/realtime", "/v1/audio", "/v1/chat", "/v1/responses")
_ASSEMBLYAI_PREFIXES = ("/v3/", "/v2/realtime")


def not_found(path: str, served: list[str]) -> tuple[bytes, str]:
    """The 404 body and content type for a handshake on ``path``; ``served`` lists the paths
    that do exist (named in the message)."""
    message = f"no WebSocket endpoint at {path}; this server speaks {', '.join(served)}"
    body: dict[str, Any]
    if path.startswith(_ASSEMBLYAI_PREFIXES):
        body = {"error": message}
    elif path.startswith(_DEEPGRAM_PREFIXES):
        body = {"err_code": "NOT_FOUND", "err_msg": message}
    elif path.startswith(_OPENAI_PREFIXES):
        body = {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": None,
                "code": "not_found",
            }
        }
    else:
        return (message + "\n").encode(), "text/plain; charset=utf-8"
    return json.dumps(body).encode(), "application/json"


class UnknownWebSocketPath:
    """The ASGI app of the catch-all WebSocket route (after every protocol's own)."""

    def __init__(self, served: list[str]) -> None:
        self.served = served

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        connect = await receive()
        if connect["type"] != "websocket.connect":  # pragma: no cover - ASGI order
            return
        body, content_type = not_found(scope.get("path", ""), self.served)
        await send(
            {
                "type": "websocket.http.response.start",
                "status": 404,
                "headers": [(b"content-type", content_type.encode())],
            }
        )
        await send({"type": "websocket.http.response.body", "body": body})
