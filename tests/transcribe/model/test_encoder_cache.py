"""The encoder cache (transcribe/model/encoder_cache.py): an LRU bounded by entries and by bytes."""

from __future__ import annotations

import numpy as np
from kettle.transcribe.model.encoder_cache import DEFAULT_MAX_BYTES, EncoderCache


def _entry(positions: int, width: int = 384) -> np.ndarray:
    return np.zeros((positions, width), dtype=np.float32)


def test_bytes_bound_evicts_least_recently_used_until_under_budget() -> None:
    kib = 1024
    cache = EncoderCache(capacity=100, max_bytes=10 * kib)
    cache.put("a", _entry(1, 1024))  # 4 KiB each
    cache.put("b", _entry(1, 1024))
    assert (len(cache), cache.nbytes) == (2, 8 * kib)
    assert cache.get("a") is not None  # "b" is now the least recently used
    cache.put("c", _entry(1, 512))  # 2 KiB: exactly at the budget, nothing goes
    assert (len(cache), cache.nbytes) == (3, 10 * kib)
    cache.put("d", _entry(1, 1536))  # 6 KiB: "b" then "a" go
    assert cache.get("b") is None and cache.get("a") is None
    assert cache.get("c") is not None and cache.get("d") is not None
    assert cache.nbytes == 8 * kib <= cache.max_bytes
    cache.put("huge", _entry(1, 4096))  # larger than the budget alone: not kept, nothing lost
    assert cache.get("huge") is None and len(cache) == 2
    cache.put("c", _entry(1, 256))  # a key stored again counts once, at its new size
    assert (len(cache), cache.nbytes) == (2, 7 * kib)
    cache.clear()
    assert (len(cache), cache.nbytes) == (0, 0)


def test_entry_bound_still_holds() -> None:
    cache = EncoderCache(capacity=2)
    for key in "abc":
        cache.put(key, _entry(10))
    assert len(cache) == 2 and cache.get("a") is None
    assert cache.nbytes == 2 * 10 * 384 * 4


def test_zero_disables_either_way() -> None:
    for cache in (EncoderCache(0), EncoderCache(32, max_bytes=0)):
        cache.put("a", _entry(1))
        assert cache.get("a") is None and cache.nbytes == 0 and cache.misses == 1


def test_default_budget_holds_32_full_length_tiny_en_encodings() -> None:
    cache = EncoderCache(capacity=32)
    assert cache.max_bytes == DEFAULT_MAX_BYTES
    for i in range(40):
        cache.put(i, _entry(1500))  # 30 s of tiny.en: 1500 positions x 384 float32
    assert len(cache) == 32  # the entry bound, not the byte bound, decides on tiny.en
    wide = EncoderCache(capacity=32)
    for i in range(40):
        wide.put(i, _entry(1500, 1280))  # a large model's 30 s: the bytes decide
    assert len(wide) == DEFAULT_MAX_BYTES // (1500 * 1280 * 4) == 9
