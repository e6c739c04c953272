"""A persistent store of finished transcripts, so the same file is never decoded twice.

Keys are built from the input's content hash, the model's identity and every option that
changes the output (``cache_key``). The store is one sqlite file in WAL mode with a busy
timeout: several kettle processes may read and write it at once. A broken or unwritable cache
never fails a transcription; it only logs and stops caching.

The store is bounded: entries' payload bytes are capped (``max_bytes``, by default
``$KETTLE_CACHE_MAX_MB`` or 256 MB) and the least recently used entries are evicted after each
write that goes over. sqlite reuses the freed pages, so the file stays near the cap.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import BinaryIO

from kettle.transcribe.transcript import Transcript

log = logging.getLogger(__name__)

# Bump when the pipeline's output for the same input and options changes.
SCHEMA = 1
_BUSY_TIMEOUT_MS = 30_000
DEFAULT_MAX_MB = 256.0
_MB = 1 << 20


def default_max_bytes() -> int:
    """``$KETTLE_CACHE_MAX_MB`` (a positive number of MiB) or 256 MiB."""
    text = os.environ.get("KETTLE_CACHE_MAX_MB")
    if not text:
        return int(DEFAULT_MAX_MB * _MB)
    try:
        mb = float(text)
    except ValueError:
        mb = float("nan")
    if not mb > 0:
        raise ValueError(f"KETTLE_CACHE_MAX_MB must be a positive number of MB, got {text!r}")
    return max(1, int(mb * _MB))


def default_cache_path() -> Path:
    """``$KETTLE_CACHE_DIR/results.sqlite``, else ``$XDG_CACHE_HOME`` or ``~/.cache``/kettle."""
    root = os.environ.get("KETTLE_CACHE_DIR")
    if root:
        return Path(root) / "results.sqlite"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "kettle" / "results.sqlite"


def hash_stream(fh: BinaryIO) -> str:
    digest = hashlib.sha256()
    for block in iter(lambda: fh.read(1 << 20), b""):
        digest.update(block)
    return digest.hexdigest()


def hash_file(path: Path) -> str:
    with open(path, "rb") as fh:
        return hash_stream(fh)


def cache_key(content_sha256: str, model_id: str, options: Mapping[str, object]) -> str:
    """One key for (content, model, options); options are canonicalised as sorted JSON."""
    blob = json.dumps(
        {"v": SCHEMA, "content": content_sha256, "model": model_id, "options": dict(options)},
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


class ResultCache:
    """sqlite-backed map from ``cache_key`` to ``Transcript``, LRU-bounded to ``max_bytes`` of
    payload. One connection per thread. ``clock`` stamps uses (wall time, shared by processes)."""

    def __init__(
        self,
        path: Path | None = None,
        *,
        max_bytes: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path) if path is not None else default_cache_path()
        self.max_bytes = default_max_bytes() if max_bytes is None else max_bytes
        if self.max_bytes < 1:
            raise ValueError("the cache size cap must be at least 1 byte")
        self._clock = clock
        self.evictions = 0
        self._local = threading.local()
        self._disabled = False
        self.hits = 0
        self.misses = 0

    def _conn(self) -> sqlite3.Connection | None:
        if self._disabled:
            return None
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_MS / 1000, isolation_level=None)
            conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS results ("
                " key TEXT PRIMARY KEY, created REAL NOT NULL, payload TEXT NOT NULL,"
                " used REAL NOT NULL DEFAULT 0, size INTEGER NOT NULL DEFAULT 0)"
            )
            _migrate(conn)
            conn.execute("CREATE INDEX IF NOT EXISTS results_used ON results (used)")
        except (sqlite3.Error, OSError) as exc:
            log.warning("result cache at %s is unusable, not caching: %s", self.path, exc)
            self._disabled = True
            return None
        self._local.conn = conn
        return conn

    def contains(self, key: str) -> bool:
        """Whether ``key`` has an entry (which ``get`` may still find damaged)."""
        conn = self._conn()
        if conn is None:
            return False
        try:
            row = conn.execute("SELECT 1 FROM results WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error as exc:
            log.warning("result cache read failed: %s", exc)
            return False
        return row is not None

    def get(self, key: str) -> Transcript | None:
        conn = self._conn()
        if conn is None:
            return None
        try:
            row = conn.execute("SELECT payload FROM results WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error as exc:
            log.warning("result cache read failed: %s", exc)
            return None
        if row is None:
            self.misses += 1
            return None
        try:
            transcript = Transcript.from_json(row[0])
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("result cache entry %s is damaged, ignoring it: %s", key[:12], exc)
            self.misses += 1
            return None
        self.hits += 1
        try:
            conn.execute("UPDATE results SET used = ? WHERE key = ?", (self._clock(), key))
        except sqlite3.Error as exc:  # a read-only moment: the entry just ages sooner
            log.debug("result cache could not mark a use: %s", exc)
        return transcript

    def put(self, key: str, transcript: Transcript) -> None:
        conn = self._conn()
        if conn is None:
            return
        payload = transcript.to_json(indent=None)
        now = self._clock()
        try:
            conn.execute(
                "INSERT OR REPLACE INTO results (key, created, payload, used, size)"
                " VALUES (?, ?, ?, ?, ?)",
                (key, now, payload, now, len(payload.encode())),
            )
            self._evict(conn)
        except sqlite3.Error as exc:
            log.warning("result cache write failed: %s", exc)

    def _evict(self, conn: sqlite3.Connection) -> None:
        """Delete the least recently used entries beyond the cap (newest kept first)."""
        cur = conn.execute(
            "DELETE FROM results WHERE key IN ("
            " SELECT key FROM (SELECT key, SUM(size) OVER (ORDER BY used DESC, created DESC,"
            " key ROWS UNBOUNDED PRECEDING) AS total FROM results) WHERE total > ?)",
            (self.max_bytes,),
        )
        if cur.rowcount > 0:
            self.evictions += cur.rowcount
            log.debug("result cache: evicted %d entries over the cap", cur.rowcount)

    @property
    def size_bytes(self) -> int:
        """Payload bytes stored now."""
        conn = self._conn()
        if conn is None:
            return 0
        return int(conn.execute("SELECT COALESCE(SUM(size), 0) FROM results").fetchone()[0])

    def __len__(self) -> int:
        conn = self._conn()
        if conn is None:
            return 0
        return int(conn.execute("SELECT COUNT(*) FROM results").fetchone()[0])

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def __enter__(self) -> ResultCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _migrate(conn: sqlite3.Connection) -> None:
    """Give a store from before the size cap its `used` and `size` columns."""
    conn.execute("BEGIN IMMEDIATE")  # one process migrates; the others then see the columns
    try:
        columns = {row[1] for row in conn.execute("PRAGMA table_info(results)")}
        if "used" not in columns:
            conn.execute("ALTER TABLE results ADD COLUMN used REAL NOT NULL DEFAULT 0")
            conn.execute("UPDATE results SET used = created")
        if "size" not in columns:
            conn.execute("ALTER TABLE results ADD COLUMN size INTEGER NOT NULL DEFAULT 0")
            conn.execute("UPDATE results SET size = length(CAST(payload AS BLOB))")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
