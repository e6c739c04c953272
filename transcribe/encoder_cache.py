"""An LRU of encoder outputs keyed by the exact window, with hit and miss counts."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Hashable

import numpy as np


def window_key(audio: np.ndarray) -> tuple[str, int, bytes]:
    """A content key for a float32 window: its length and a BLAKE2b digest of its bytes."""
    data = np.ascontiguousarray(audio, dtype=np.float32)
    return ("pcm", data.shape[0], hashlib.blake2b(data.tobytes(), digest_size=16).digest())


class EncoderCache:
    """Bounded LRU; ``capacity`` 0 disables it (every lookup is a miss)."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._items: OrderedDict[Hashable, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._items)

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
        if self._capacity <= 0:
            return
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._capacity:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
