"""How an upload is refused (uploads.py and its body's reading, upload_body.py), and the one
HTTP mapping of those refusals that every REST API renders in its own error shape."""

from __future__ import annotations

from dataclasses import dataclass

from kettle.transcribe.errors import KettleError


class UploadError(Exception):
    """An upload refused before its transcription; the route renders it its own way."""


class UploadsUnavailable(UploadError):
    """The server takes no uploads now (model loading or failing, shutting down): 503."""


class UploadsFull(UploadError):
    """Every upload slot is taken, or the bodies held fill the byte budget: 429."""

    def __init__(self, message: str, *, body_unread: bool = False) -> None:
        super().__init__(message)
        self.body_unread = body_unread  # refused while its body was still coming


class UploadTooLarge(UploadError):
    def __init__(self, limit: int) -> None:
        super().__init__(f"the body is over the limit of {limit} bytes")
        self.limit = limit


class BodyTimeout(UploadError):
    """The body did not come in time: too slow on average ("slow") or not all in by the
    deadline ("deadline"): 408, and the connection closes."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class BodyEndedEarly(UploadError):
    """The body ended before its Content-Length (the client half-closed): 400, then close."""

    def __init__(self, received: int, declared: int) -> None:
        super().__init__(
            f"the body ended after {received} of the {declared} bytes its Content-Length declared"
        )
        self.received, self.declared = received, declared


class UnreadableAudio(UploadError):
    """The bytes are not audio the file reader can decode: 400."""


@dataclass(frozen=True)
class UploadFailure:
    """How a failed upload is answered, whatever the API: the status and what went wrong."""

    status: int
    # "busy", "unavailable", "too_large", "timeout", "ended_early", "unreadable" or "failed"
    kind: str
    message: str
    retry: bool = False  # a Retry-After goes with it
    limit: int | None = None  # the byte limit an upload was over ("too_large")
    # Connection: close goes with it (the body is not read to its end; the server's protocol
    # then closes after the answer without resetting it, http_protocol.py)
    close: bool = False


def upload_failure(exc: Exception, *, draining: bool) -> UploadFailure | None:
    """The one HTTP mapping of an upload's failure, for every REST API; None: unexpected."""
    match exc:
        case UploadsFull(body_unread=unread):
            return UploadFailure(429, "busy", str(exc), retry=True, close=unread)
        case UploadsUnavailable():  # cut short by the server's shutdown
            return UploadFailure(503, "unavailable", str(exc), retry=True)
        case UploadTooLarge(limit=limit):
            return UploadFailure(413, "too_large", str(exc), limit=limit)
        case BodyTimeout():
            return UploadFailure(408, "timeout", str(exc), close=True)
        case BodyEndedEarly():
            return UploadFailure(400, "ended_early", str(exc), close=True)
        case UnreadableAudio():
            return UploadFailure(400, "unreadable", str(exc))
        case KettleError() if draining:  # the shutdown stopped the engine under it: retry
            return UploadFailure(503, "unavailable", str(exc), retry=True)
        case KettleError():
            return UploadFailure(500, "failed", str(exc))
    return None


__all__ = [
    "BodyEndedEarly",
    "BodyTimeout",
    "UnreadableAudio",
    "UploadError",
    "UploadFailure",
    "UploadTooLarge",
    "UploadsFull",
    "UploadsUnavailable",
    "upload_failure",
]
