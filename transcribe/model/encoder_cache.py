"""An LRU of encoder outputs keyed by the exact window, with hit and miss counts.

Bounded by entries and by bytes: an entry's size follows its encoder length (and the
model's width), from about 0.15 MB (tiny.en, 1 s) to 7.7 MB (large, 30 s), so a count alone
bounds nothing."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Hashable

import numpy as np

# 32 tiny.en encodes of 30 s: 32 x 1500 positions x 384 (d_model) x 4 B (float32) = 70.3 MiB,
# so the byte budget holds what 32 entries held before it; larger models keep fewer entries.
DEFAULT_MAX_BYTES = 72 * 2**20


def window_key(audio: np.ndarray) -> tuple[str, int, bytes]:
    """A content key for a float32 window: its length and a BLAKE2b digest of its bytes."""
    data = np.ascontiguousarray(audio, dtype=np.float32)
    return ("pcm", data.shape[0], hashlib.blake2b(data.tobytes(), digest_size=16).digest())


class EncoderCache:
    """Bounded LRU: at most ``capacity`` entries and ``max_bytes`` of arrays, the least
    recently used evicted first; either bound 0 disables it (every lookup is a miss). An
    entry larger than ``max_bytes`` on its own is not kept."""

    def __init__(self, capacity: int, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self._capacity = capacity
        self._max_bytes = max_bytes
        self._items: OrderedDict[Hashable, np.ndarray] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._items)

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays held now."""
        return self._bytes

    @property
    def max_bytes(self) -> int:
        return self._max_bytes

    def get(self, key: Hashable) -> np.ndarray | None:
        with self._lock:
            value = self._items.get(key)
            if value is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return value

    def count_hit(self) -> None:
        """Count a lookup served without the cache (the same window twice in one batch)."""
        with self._lock:
            self.hits += 1

    def put(self, key: Hashable, value: np.ndarray) -> None:
        size = int(value.nbytes)
        if self._capacity <= 0 or size > self._max_bytes:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= int(old.nbytes)
            self._items[key] = value
            self._bytes += size
            while len(self._items) > self._capacity or self._bytes > self._max_bytes:
                _, evicted = self._items.popitem(last=False)
                self._bytes -= int(evicted.nbytes)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0
