"""Wyoming events as the bytes a client writes (the library's own writer)."""

from __future__ import annotations

import io

from wyoming.event import Event, Eventable, write_event


def wire(event: Eventable | Event) -> bytes:
    """One event's bytes, exactly as the ``wyoming`` library writes them."""
    out = io.BytesIO()
    write_event(event if isinstance(event, Event) else event.event(), out)
    return out.getvalue()
