"""OpenAI Realtime server events, framed: each event's ``event_id``, the item ids, and the
outbox message an event travels in. The bodies are realtime_events'; the ledger and the codec
decide what is sent. No I/O."""

from __future__ import annotations

import itertools
import json
from typing import Any

from kettle.streaming.core.backlog import OTHER, REVISION
from kettle.streaming.core.events import Revision
from kettle.streaming.protocols.base import OutMessage, Send
from kettle.streaming.protocols.openai import realtime_events as bodies


class EventWriter:
    """One session's event and item numbering, tagged with (the end of) its session id."""

    def __init__(self, session_id: str) -> None:
        self.tag = "".join(c for c in session_id if c.isalnum())[-16:] or "kettle"
        self._events = itertools.count(1)
        self._items = itertools.count(1)

    def _event(self, kind: str, body: dict[str, Any]) -> dict[str, Any]:
        return {"event_id": f"event_{self.tag}_{next(self._events)}", "type": kind, **body}

    def send(
        self,
        kind: str,
        body: dict[str, Any],
        *,
        closing: bool = False,
        fatal: bool = False,
        error_code: str | None = None,
        revision: Revision | None = None,
    ) -> Send:
        # Every message is OTHER to the outbox (deltas only append, so none may be dropped),
        # or REVISION for a correction (kept the same way; it names the final it corrects).
        text = json.dumps(self._event(kind, body), ensure_ascii=False)
        if revision is not None:
            message = OutMessage(REVISION, text, revision.utterance, revision.end)
        else:
            message = OutMessage(OTHER, text, closing=closing, fatal=fatal)
        return Send(message, error_code=error_code)

    def error(
        self,
        message: str,
        *,
        code: str = "invalid_value",
        param: str | None = None,
        client_event: str | None = None,
        kind: str = "invalid_request_error",
    ) -> Send:
        body = bodies.error(message, code=code, kind=kind, param=param, client_event=client_event)
        return self.send("error", body, error_code=code)

    def fatal_text(self, message: str) -> str:
        """The text of a fatal internal error, sent just before the close with 1011."""
        body = bodies.error(message, code="internal_error", kind="server_error")
        return json.dumps(self._event("error", body))

    def item_id(self) -> str:
        return f"item_{self.tag}_{next(self._items)}"


__all__ = ["EventWriter"]
