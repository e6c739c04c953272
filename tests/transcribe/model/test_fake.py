"""The fake model stays deterministic and remembers a bounded amount, however long it runs."""

from __future__ import annotations

import numpy as np
import pytest
from kettle.transcribe.model.fake import _CACHE_KEYS, FakeDecoder, synth_voice
from kettle.transcribe.types import DecodeKind, DecodeRequest


def _request(i: int, audio: np.ndarray) -> DecodeRequest:
    return DecodeRequest(audio=audio, kind=DecodeKind.PARTIAL, request_id=i, cache_key=("w", i))


def test_memory_is_bounded_over_many_requests() -> None:
    fake = FakeDecoder(keep_requests=5, history=7)
    audio = synth_voice(1.0)
    for i in range(_CACHE_KEYS + 50):
        (result,) = fake.decode_batch([_request(i, audio)])
        assert result.text == "alpha bravo"
    assert fake.stats.calls == fake.stats.requests == _CACHE_KEYS + 50  # counters keep counting
    assert [r.request_id for r in fake.requests_seen] == list(
        range(_CACHE_KEYS + 45, _CACHE_KEYS + 50)
    )
    assert len(fake.stats.batch_sizes) == len(fake.stats.kinds) == 7
    assert len(fake._cache) == _CACHE_KEYS
    # The newest keys are still remembered as encoder-cache hits, the oldest are not.
    (again,) = fake.decode_batch([_request(_CACHE_KEYS + 49, audio)])
    assert again.encoder_cache_hit
    (old,) = fake.decode_batch([_request(0, audio)])
    assert not old.encoder_cache_hit


def test_negative_bounds_are_refused() -> None:
    with pytest.raises(ValueError):
        FakeDecoder(keep_requests=-1)
