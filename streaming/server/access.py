"""Access policy of the server: API keys, session slots, message rate. No I/O.

Keys are kept only as SHA-256 digests and compared digest to digest in constant time against
every configured key (no early exit on the first match; digests all have one length, so the
comparison's time says nothing about a key's length), and no function here logs or formats a
key.
"""

from __future__ import annotations

import hashlib
import hmac
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from kettle.streaming.protocols.handshake import bearer_token


def key_digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).digest()


def digest_matches(presented: str | None, digests: Sequence[bytes]) -> bool:
    """True when `presented` hashes to one of `digests`; time does not depend on which."""
    if presented is None:
        return False
    given = key_digest(presented)
    matched = False
    for digest in digests:
        # compare_digest on every key: the loop never stops early, so timing reveals nothing.
        matched |= hmac.compare_digest(given, digest)
    return matched


def key_matches(presented: str | None, keys: Sequence[str]) -> bool:
    """True when `presented` equals one of `keys` (compared as digests, in constant time)."""
    return digest_matches(presented, [key_digest(k) for k in keys])


@dataclass(frozen=True)
class Authenticator:
    """The configured keys, held as digests; with none, every client is let in."""

    digests: tuple[bytes, ...] = field(default=(), repr=False)

    @classmethod
    def from_keys(cls, keys: Sequence[str]) -> Authenticator:
        return cls(tuple(key_digest(k) for k in keys))

    @property
    def required(self) -> bool:
        return bool(self.digests)

    def allows(self, authorization: str | None, token: str | None) -> bool:
        if not self.digests:
            return True
        # Evaluate both credentials, so the answer's timing does not say which one was given.
        by_header = digest_matches(bearer_token(authorization), self.digests)
        by_query = digest_matches(token, self.digests)
        return by_header or by_query

    def allows_any(self, presented: Sequence[str | None]) -> bool:
        """True when any presented key is valid; every one is checked, whichever matched."""
        if not self.digests:
            return True
        matched = False
        for key in presented:
            matched |= digest_matches(key, self.digests)
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

    def try_acquire(self, count: int = 1) -> bool:
        """Take `count` slots at once, or none."""
        if self._active + count > self.limit:
            return False
        self._active += count
        return True

    def release(self, count: int = 1) -> None:
        if self._active < count:
            raise RuntimeError("session slot released twice")
        self._active -= count


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
