"""Wyoming's framing, bounded: a JSON header line, then ``data_length`` bytes of JSON data,
then ``payload_length`` bytes of payload. No I/O.

The ``wyoming`` library's reader takes any header it is given: a malformed one reads as the
end of the stream, and it reads whatever lengths the header declares. Here every part has a
bound, and every refusal says what was wrong (the codec answers it with an ``error`` event):

- the header line, newline included, is at most ``MAX_HEADER_BYTES``;
- the data, JSON, at most ``MAX_DATA_BYTES``;
- the payload (audio) at most ``Limits.max_frame_bytes``.

A transport reads one event's bytes with `parse_header` (to know how much follows) and hands
them whole to `decode`; bytes that stop short (the peer closed inside an event) are refused
by `decode` too, so the codec is the one judge of what arrived.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from wyoming.event import Event

MAX_HEADER_BYTES = 16 << 10
MAX_DATA_BYTES = 64 << 10

BAD_HEADER = "bad_header"
TOO_BIG = "too_big"
TRUNCATED = "truncated"


class FrameError(Exception):
    """Bytes that are no Wyoming event; ``code`` is the error event's."""

    def __init__(self, code: str, text: str) -> None:
        super().__init__(text)
        self.code, self.text = code, text


@dataclass(frozen=True)
class Header:
    type: str
    data: dict[str, Any]  # data carried inside the header line (older writers)
    data_length: int
    payload_length: int
    size: int  # bytes of the header line, newline included

    @property
    def total(self) -> int:
        """Bytes of the whole event."""
        return self.size + self.data_length + self.payload_length


def parse_header(raw: bytes, max_payload: int) -> Header:
    """The header line at the start of ``raw`` (FrameError when it is not a valid one)."""
    end = raw.find(b"\n")
    if end < 0:
        if len(raw) >= MAX_HEADER_BYTES:
            raise FrameError(TOO_BIG, f"an event header is longer than {MAX_HEADER_BYTES} bytes")
        raise FrameError(TRUNCATED, "the connection ended inside an event header")
    if end + 1 > MAX_HEADER_BYTES:
        raise FrameError(TOO_BIG, f"an event header is longer than {MAX_HEADER_BYTES} bytes")
    try:
        header = json.loads(raw[:end])
    except ValueError:
        raise FrameError(BAD_HEADER, "an event header is not valid JSON") from None
    if not isinstance(header, dict):
        raise FrameError(BAD_HEADER, "an event header must be a JSON object")
    kind = header.get("type")
    if not isinstance(kind, str) or not kind:
        raise FrameError(BAD_HEADER, "an event header needs a string 'type'")
    data = header.get("data") or {}
    if not isinstance(data, dict):
        raise FrameError(BAD_HEADER, "an event's 'data' must be a JSON object")
    data_length = _length(header, "data_length", MAX_DATA_BYTES)
    payload_length = _length(header, "payload_length", max_payload)
    return Header(kind, data, data_length, payload_length, end + 1)


def _length(header: dict[str, Any], name: str, limit: int) -> int:
    value = header.get(name)
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise FrameError(BAD_HEADER, f"'{name}' must be a non-negative integer")
    if value > limit:
        raise FrameError(TOO_BIG, f"'{name}' of {value} bytes is over the limit of {limit}")
    return value


def decode(raw: bytes, max_payload: int) -> Event:
    """One whole event from its bytes, as the library's `Event` (FrameError otherwise)."""
    header = parse_header(raw, max_payload)
    if len(raw) < header.total:
        raise FrameError(
            TRUNCATED,
            f"the connection ended inside a '{header.type}' event "
            f"({len(raw)} of {header.total} bytes)",
        )
    if len(raw) > header.total:  # a transport bug, not the peer's
        raise ValueError("bytes after the event")
    data = dict(header.data)
    if header.data_length:
        start = header.size
        try:
            extra = json.loads(raw[start : start + header.data_length])
        except ValueError:
            text = f"the data of a '{header.type}' event is not JSON"
            raise FrameError(BAD_HEADER, text) from None
        if not isinstance(extra, dict):
            raise FrameError(BAD_HEADER, f"the data of a '{header.type}' event is no object")
        data.update(extra)
    payload = raw[header.size + header.data_length :] if header.payload_length else None
    return Event(type=header.type, data=data, payload=payload)


__all__ = [
    "BAD_HEADER",
    "MAX_DATA_BYTES",
    "MAX_HEADER_BYTES",
    "TOO_BIG",
    "TRUNCATED",
    "FrameError",
    "Header",
    "decode",
    "parse_header",
]
