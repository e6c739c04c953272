"""protocols.handshake: the bearer token of an Authorization header."""

from __future__ import annotations

from kettle.streaming.protocols.handshake import bearer_token


def test_bearer_token() -> None:
    assert bearer_token("Bearer abc") == "abc"
    assert bearer_token("bEaReR   abc ") == "abc"
    assert bearer_token("Basic abc") is None
    assert bearer_token("Bearer") is None
    assert bearer_token(None) is None
