"""A persistent store of finished transcripts, so the same file is never decoded twice.

Keys are built from the input's content hash, the model's identity and every option that
changes the output (``cache_key``). The store is one sqlite file in WAL mode with a busy
timeout: several kettle processes may read and write it at once. A broken or unwritable cache
never fails a transcription; it only logs and stops caching.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import BinaryIO

from kettle.transcribe.transcript import Transcript

log = logging.getLogger(__name__)

# Bump when the pipeline's output for the same input and options changes.
SCHEMA = 1
_BUSY_TIMEOUT_MS = 30_000


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
    """sqlite-backed map from ``cache_key`` to ``Transcript``. One connection per thread."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_cache_path()
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
                " key TEXT PRIMARY KEY, created REAL NOT NULL, payload TEXT NOT NULL)"
            )
        except (sqlite3.Error, OSError) as exc:
            log.warning("result cache at %s is unusable, not caching: %s", self.path, exc)
            self._disabled = True
            return None
        self._local.conn = conn
        return conn

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
        return transcript

    def put(self, key: str, transcript: Transcript) -> None:
        conn = self._conn()
        if conn is None:
            return
        try:
            conn.execute(
                "INSERT OR REPLACE INTO results (key, created, payload) VALUES (?, ?, ?)",
                (key, time.time(), transcript.to_json(indent=None)),
            )
        except sqlite3.Error as exc:
            log.warning("result cache write failed: %s", exc)

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
