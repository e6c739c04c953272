"""server.access: API keys, session slots and the message rate."""

from __future__ import annotations

import pytest
from kettle.streaming.server.access import (
    Authenticator,
    SessionSlots,
    TokenBucket,
    key_digest,
    key_matches,
)


def test_authenticator() -> None:
    open_door = Authenticator()
    assert not open_door.required and open_door.allows(None, None)
    auth = Authenticator.from_keys(("k1", "secret-2"))
    assert "secret" not in repr(auth) and auth.digests[0] == key_digest("k1")
    assert all(len(d) == 32 for d in auth.digests)  # one length whatever the key's
    assert auth.allows("Bearer secret-2", None)
    assert auth.allows("BEARER k1", None)
    assert auth.allows(None, "k1")
    assert auth.allows("Bearer wrong", "k1")
    assert not auth.allows("Bearer wrong", None)
    assert not auth.allows(None, "k")
    assert not auth.allows("k1", None)  # no scheme
    assert not auth.allows(None, None)
    assert key_matches("ünï", ["ünï"]) and not key_matches("\udcff", ["x"])


def test_session_slots() -> None:
    slots = SessionSlots(2)
    assert slots.try_acquire() and slots.try_acquire()
    assert slots.full and not slots.try_acquire()
    slots.release()
    assert slots.active == 1 and slots.try_acquire()
    with pytest.raises(ValueError):
        SessionSlots(0)


def test_token_bucket() -> None:
    bucket = TokenBucket(rate=2.0, burst=3, now=0.0)
    assert [bucket.allow(0.0) for _ in range(4)] == [True, True, True, False]
    assert bucket.allow(0.5)  # one token back after 0.5 s at 2/s
    assert not bucket.allow(0.5)
    assert bucket.allow(100.0) and bucket.allow(100.0) and bucket.allow(100.0)
    assert not bucket.allow(100.0)  # refill is capped at the burst
    with pytest.raises(ValueError):
        TokenBucket(rate=0, burst=1, now=0)


# -- outbox ---------------------------------------------------------------------------------
