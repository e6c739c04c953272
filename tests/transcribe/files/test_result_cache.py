"""The sqlite result cache: keys, round trips, damage, and two writer processes."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
from pathlib import Path

import pytest
from kettle.transcribe.files.result_cache import (
    ResultCache,
    cache_key,
    default_cache_path,
    hash_file,
)
from kettle.transcribe.transcript import Segment, Transcript


def _transcript(i: int) -> Transcript:
    return Transcript(float(i), "en", (Segment(0.0, 1.0, f"text number {i}"),), model="m")


def test_key_depends_on_content_model_and_options() -> None:
    base = cache_key("abc", "tiny.en", {"beam": 5, "lang": None})
    assert base == cache_key("abc", "tiny.en", {"lang": None, "beam": 5})
    assert base != cache_key("abd", "tiny.en", {"beam": 5, "lang": None})
    assert base != cache_key("abc", "base", {"beam": 5, "lang": None})
    assert base != cache_key("abc", "tiny.en", {"beam": 1, "lang": None})


def test_round_trip_and_counts(tmp_path: Path) -> None:
    with ResultCache(tmp_path / "c.sqlite") as cache:
        assert cache.get("k") is None and not cache.contains("k")
        cache.put("k", _transcript(3))
        assert cache.contains("k") and not cache.contains("other")
        assert cache.get("k") == _transcript(3)
        assert (cache.hits, cache.misses) == (1, 1)  # contains counts neither
        assert len(cache) == 1
    with ResultCache(tmp_path / "c.sqlite") as again:  # persists across instances
        assert again.get("k") == _transcript(3)
        mode = sqlite3.connect(tmp_path / "c.sqlite").execute("PRAGMA journal_mode").fetchone()
        assert mode[0].lower() == "wal"


def test_damaged_entry_is_a_miss(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    with ResultCache(path) as cache:
        cache.put("k", _transcript(1))
    conn = sqlite3.connect(path)
    conn.execute("UPDATE results SET payload = '{not json'")
    conn.commit()
    conn.close()
    with ResultCache(path) as cache:
        assert cache.get("k") is None


def test_unusable_location_disables_without_failing(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    cache = ResultCache(blocker / "sub" / "c.sqlite")  # parent is a file
    assert cache.get("k") is None and not cache.contains("k")
    cache.put("k", _transcript(1))  # no exception
    assert len(cache) == 0


def test_default_path_honours_env(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KETTLE_CACHE_DIR", str(tmp_path))
    assert default_cache_path() == tmp_path / "results.sqlite"
    monkeypatch.delenv("KETTLE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert default_cache_path() == tmp_path / "x" / "kettle" / "results.sqlite"


def test_hash_file(tmp_path: Path) -> None:
    p = tmp_path / "a.bin"
    p.write_bytes(b"abc")
    assert hash_file(p) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def _writer(path: str, worker: int, count: int, barrier) -> None:
    cache = ResultCache(Path(path))
    cache.get("warm-up")  # open the connection before the race starts
    barrier.wait(30)
    for i in range(count):
        cache.put(f"{worker}-{i}", _transcript(worker * 1000 + i))
        cache.get(f"{1 - worker}-{i}")  # read the other writer's rows while it writes
    cache.close()


@pytest.mark.timeout(120)
def test_two_processes_write_at_once(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    ResultCache(path).close()
    # fork: test modules are not importable by name under --import-mode=importlib
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_writer, args=(str(path), w, 150, barrier)) for w in (0, 1)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(100)
        assert p.exitcode == 0
    with ResultCache(path) as cache:
        assert len(cache) == 300
        for w in (0, 1):
            for i in range(150):
                assert cache.get(f"{w}-{i}") == _transcript(w * 1000 + i)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def _size(t: Transcript) -> int:
    return len(t.to_json(indent=None).encode())


def test_size_cap_evicts_least_recently_used(tmp_path: Path) -> None:
    one = _size(_transcript(1))
    clock = _Clock()
    # Room for three entries, not four.
    with ResultCache(tmp_path / "c.sqlite", max_bytes=3 * one + one // 2, clock=clock) as cache:
        for i in (1, 2, 3):
            cache.put(f"k{i}", _transcript(i))
        assert len(cache) == 3 and cache.evictions == 0
        assert cache.get("k1") == _transcript(1)  # k1 is now the most recently used
        cache.put("k4", _transcript(4))
        assert cache.get("k2") is None  # the least recently used went
        assert [cache.get(k) is not None for k in ("k1", "k3", "k4")] == [True, True, True]
        assert cache.evictions == 1
        assert cache.size_bytes <= cache.max_bytes


def test_many_writes_stay_under_the_cap(tmp_path: Path) -> None:
    one = _size(_transcript(100))
    with ResultCache(tmp_path / "c.sqlite", max_bytes=10 * one, clock=_Clock()) as cache:
        for i in range(100, 300):
            cache.put(f"k{i}", _transcript(i))
            assert cache.size_bytes <= cache.max_bytes
        assert 8 <= len(cache) <= 10
        assert cache.get("k299") == _transcript(299)  # the newest is always kept
        assert cache.get("k100") is None


def test_an_entry_larger_than_the_cap_is_not_kept(tmp_path: Path) -> None:
    with ResultCache(tmp_path / "c.sqlite", max_bytes=10) as cache:
        cache.put("k", _transcript(1))
        assert cache.get("k") is None
        assert len(cache) == 0


def test_store_from_before_the_cap_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE results (key TEXT PRIMARY KEY, created REAL NOT NULL, payload TEXT NOT NULL)"
    )
    payload = _transcript(7).to_json(indent=None)
    conn.execute("INSERT INTO results VALUES ('old', 5.0, ?)", (payload,))
    conn.commit()
    conn.close()
    with ResultCache(path, max_bytes=1 << 20) as cache:
        assert cache.get("old") == _transcript(7)
        assert cache.size_bytes == len(payload.encode())


def test_cap_from_the_environment(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KETTLE_CACHE_MAX_MB", "1.5")
    assert ResultCache(tmp_path / "c.sqlite").max_bytes == int(1.5 * (1 << 20))
    monkeypatch.setenv("KETTLE_CACHE_MAX_MB", "-3")
    with pytest.raises(ValueError, match="KETTLE_CACHE_MAX_MB"):
        ResultCache(tmp_path / "c.sqlite")
    monkeypatch.delenv("KETTLE_CACHE_MAX_MB")
    assert ResultCache(tmp_path / "c.sqlite").max_bytes == 256 << 20
