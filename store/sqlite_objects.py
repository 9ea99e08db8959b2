"""Small objects (snapshots, answers, chat histories) inside the embedded SQLite file.

One row per object in an `objects` table, written with one INSERT: the primary key makes every
key write-once without a lock, and synchronous=FULL makes the commit durable (the WAL is
fsync'd) before `put` returns, which is what R7 asks of a snapshot before its pointer. One
commit, one fsync, instead of the folder store's three (sidecar, data, folder).

It may share its file with the row store (`--store sqlite:///var/approvals.db --objects
sqlite:///var/approvals.db`): then it shares the row store's connections (store/open.py), and
a step's snapshot, pointer and audit event commit in one transaction (SqliteRows.atomic, one
fsync) in the order R7 asks for. On another file it has connections of its own.
The folder store (store/file_objects.py) stays the choice for objects larger than a row
should hold.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from core.models import Clock, ObjectRef, SystemClock
from store.base import CorruptObject, ObjectExists, ObjectStore, StoreError

if TYPE_CHECKING:
    from store.sqlite_rows import SqliteRows

SCHEMA = """
CREATE TABLE IF NOT EXISTS objects (
  key TEXT PRIMARY KEY, data BLOB NOT NULL, sha256 TEXT NOT NULL, written_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS objects_written ON objects(written_at);
"""
_SWEEP_BATCH = 500


class SqliteObjects(ObjectStore):
    def __init__(self, path: str | Path, clock: Clock | None = None, rows: SqliteRows | None = None) -> None:
        """`rows`: the row store on the same file, whose connections this then shares, so a
        step's object and row writes can commit together (SqliteRows.atomic)."""
        self.path = str(path)
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.clock = clock or SystemClock()
        self.rows = rows
        self._local = threading.local()
        self._conn().executescript(SCHEMA)

    def _conn(self) -> sqlite3.Connection:
        if self.rows is not None:
            return self.rows._conn()
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, isolation_level=None, timeout=10.0)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")  # put returns only once its commit is on disk
            self._local.conn = conn
        return conn

    def put(self, key: str, data: bytes) -> ObjectRef:
        if not key or key.startswith("/"):
            raise ValueError(f"bad object key: {key!r}")
        digest = hashlib.sha256(data).hexdigest()
        try:
            self._conn().execute(
                "INSERT INTO objects (key, data, sha256, written_at) VALUES (?, ?, ?, ?)",
                (key, data, digest, self.clock.now()),
            )
        except sqlite3.IntegrityError as e:
            raise ObjectExists(key) from e
        except sqlite3.OperationalError as e:
            raise StoreError(f"sqlite objects: {e}") from e
        return ObjectRef(key=key, size=len(data), sha256=digest)

    def _read(self, key: str, expected: str | None) -> bytes | None:
        try:
            row = self._conn().execute("SELECT data, sha256 FROM objects WHERE key = ?", (key,)).fetchone()
        except sqlite3.OperationalError as e:
            raise StoreError(f"sqlite objects: {e}") from e
        if row is None:
            return None
        data, stored = bytes(row[0]), row[1]
        actual = hashlib.sha256(data).hexdigest()
        if actual != stored or (expected is not None and actual != expected):
            raise CorruptObject(f"checksum mismatch for {key}")
        return data

    def get(self, ref: ObjectRef) -> bytes:
        data = self._read(ref.key, ref.sha256)
        if data is None:
            raise KeyError(ref.key)
        return data

    def get_key(self, key: str) -> bytes | None:
        return self._read(key, None)

    def sweep(self, older_than: float) -> int:
        removed = 0
        while True:
            try:
                cur = self._conn().execute(
                    "DELETE FROM objects WHERE rowid IN (SELECT rowid FROM objects WHERE written_at < ? LIMIT ?)",
                    (older_than, _SWEEP_BATCH),
                )
            except sqlite3.OperationalError as e:
                raise StoreError(f"sqlite objects: {e}") from e
            removed += cur.rowcount
            if cur.rowcount < _SWEEP_BATCH:
                return removed

    def close(self) -> None:
        if self.rows is not None:
            return  # the row store's connections: it closes them
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
