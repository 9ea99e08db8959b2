"""How the embedded store's writes wait for SQLite's one write lock.

SQLite's own busy handler sleeps in growing steps (1, 2, 5, 10 ... 100 ms) and never learns
that the lock came free, so when several connections race for it a writer that keeps losing
sleeps for hundreds of milliseconds while each write holds the lock for well under one (issue
12: up to 0.9-1.3 s with the store's four threads in a 100-click Slack burst).

Instead the store's connections have no busy timeout, and a statement that finds the lock taken
waits on this process's `WriteGate` for the file: every write of this process that ends (commit
or rollback) wakes the waiters at once. A writer in another process (a replica on the same file)
sends no such notice, so the wait also ends after a short pause (1 ms) and the statement is
tried again; in all a statement waits at most LOCK_WAIT, then fails as before ("database is
locked") having changed nothing.

Within one store the writes no longer race for the lock: they take turns on the store's one
writer connection (store/sqlite_rows.py, issue 34), so a write of this process waits here only
for another store or process on the same file. Measured with bench/bench_sqlite_writers.py (4
threads, the main thread busy, 2026-12-04): single statements p50 6-11 ms against 27-44 ms
racing, p99 161-175 against 209-227 ms; compound steps p50 22-108 against 41-69 ms, p99 175-189
against 225-232 ms.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

LOCK_WAIT = 10.0  # seconds a statement waits for the lock in all
RECHECK = 0.001  # seconds between tries while only another process could free the lock

T = TypeVar("T")


def is_busy(e: sqlite3.OperationalError) -> bool:
    text = str(e).lower()
    return "database is locked" in text or "database is busy" in text


class WriteGate:
    """This process's writers to one file: who waits, and the notice that a write ended."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._ended = 0  # writes of this process that ended: a waiter retries when it moves

    def ended(self) -> None:
        with self._cond:
            self._ended += 1
            self._cond.notify_all()

    def attempt(self, statement: Callable[[], T]) -> T:
        """Run `statement` (which must change nothing when it fails busy) until it gets the
        lock or LOCK_WAIT has passed."""
        deadline = time.monotonic() + LOCK_WAIT
        while True:
            with self._cond:
                seen = self._ended
            try:
                return statement()
            except sqlite3.OperationalError as e:
                if not is_busy(e) or time.monotonic() >= deadline:
                    raise
            with self._cond:
                if self._ended == seen:
                    self._cond.wait(timeout=RECHECK)


_gates: dict[str, WriteGate] = {}
_gates_guard = threading.Lock()


def write_gate(path: str) -> WriteGate:
    """The gate of `path` in this process (one per file; `:memory:` is private)."""
    if path == ":memory:":
        return WriteGate()
    key = str(Path(path).resolve())
    with _gates_guard:
        return _gates.setdefault(key, WriteGate())


def connect(path: str) -> sqlite3.Connection:
    """A connection of the store: WAL, every commit fsync'd, autocommit, and no busy timeout
    (its statements wait on the file's WriteGate instead)."""
    return _connect(path, check_same_thread=True)


def connect_writer(path: str) -> sqlite3.Connection:
    """The same, for a store's one writer: used by its threads one at a time (under its lock)."""
    return _connect(path, check_same_thread=False)


def _connect(path: str, check_same_thread: bool) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, timeout=LOCK_WAIT, check_same_thread=check_same_thread)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")  # every commit fsyncs the WAL before it returns
    conn.execute("PRAGMA busy_timeout = 0")
    return conn
