"""Admission and rate policy of the server: API keys, session slots, message rate. No I/O.

Keys are compared in constant time against every configured key (no early exit on the first
match, no length shortcut), and no function here logs or formats a key.
"""

from __future__ import annotations

import hmac
import math
from collections.abc import Sequence
from dataclasses import dataclass, field


def bearer_token(authorization: str | None) -> str | None:
    """The credentials of an `Authorization: Bearer KEY` header (scheme case-insensitive)."""
    if not authorization:
        return None
    scheme, _, credentials = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    credentials = credentials.strip()
    return credentials or None


def key_matches(presented: str | None, keys: Sequence[str]) -> bool:
    """True when `presented` equals one of `keys`; time does not depend on which or where."""
    if presented is None:
        return False
    given = presented.encode("utf-8", "surrogateescape")
    matched = False
    for key in keys:
        # compare_digest on every key: the loop never stops early, so timing reveals nothing.
        matched |= hmac.compare_digest(given, key.encode("utf-8", "surrogateescape"))
    return matched


@dataclass(frozen=True)
class Authenticator:
    """The configured keys; with none, every client is let in."""

    keys: tuple[str, ...] = field(default=(), repr=False)

    @property
    def required(self) -> bool:
        return bool(self.keys)

    def allows(self, authorization: str | None, token: str | None) -> bool:
        if not self.keys:
            return True
        # Evaluate both credentials, so the answer's timing does not say which one was given.
        by_header = key_matches(bearer_token(authorization), self.keys)
        by_query = key_matches(token, self.keys)
        return by_header or by_query

    def allows_any(self, presented: Sequence[str | None]) -> bool:
        """True when any presented key is valid; every one is checked, whichever matched."""
        if not self.keys:
            return True
        matched = False
        for key in presented:
            matched |= key_matches(key, self.keys)
        return matched


class SessionSlots:
    """Counts sessions against the limit, from handshake to connection close."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("the session limit must be at least 1")
        self.limit = limit
        self._active = 0

    @property
    def active(self) -> int:
        return self._active

    @property
    def full(self) -> bool:
        return self._active >= self.limit

    def try_acquire(self) -> bool:
        if self._active >= self.limit:
            return False
        self._active += 1
        return True

    def release(self) -> None:
        if self._active <= 0:
            raise RuntimeError("session slot released twice")
        self._active -= 1


class TokenBucket:
    """`rate` events per second on average, bursts up to `burst`; time is passed in."""

    def __init__(self, rate: float, burst: float, now: float) -> None:
        if not (rate > 0 and math.isfinite(rate)):
            raise ValueError("rate must be a positive number")
        if burst < 1:
            raise ValueError("burst must be at least 1")
        self.rate = rate
        self.burst = burst
        self._tokens = float(burst)
        self._last = now

    def allow(self, now: float) -> bool:
        elapsed = max(0.0, now - self._last)
        self._last = max(self._last, now)
        self._tokens = min(self.burst, self._tokens + elapsed * self.rate)
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False
