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

from chat_approvals.core.models import Clock, ObjectRef, SystemClock
from chat_approvals.store.base import ObjectExists, ObjectStore, StoreError, verified
from chat_approvals.store.sqlite_writes import connect, write_gate

if TYPE_CHECKING:
    from chat_approvals.store.sqlite_rows import SqliteRows

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
        self._gate = write_gate(self.path)  # the row store's on the same file
        self._gate.attempt(self._create_schema)

    def _create_schema(self) -> None:
        try:
            self._conn().executescript(SCHEMA)  # idempotent: tried again while the lock is taken
        finally:
            self._gate.ended()

    def _conn(self) -> sqlite3.Connection:
        if self.rows is not None:
            return self.rows._conn()
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.path)
            self._local.conn = conn
        return conn

    def _write(self, sql: str, args: tuple[object, ...]) -> int:
        """One write, committed when this returns; inside the row store's `atomic`, part of
        its transaction. Waits for the lock on the file's WriteGate (store/sqlite_writes.py)."""
        if self.rows is not None:  # one statement: atomic alone, so no savepoint of its own
            return self.rows._exec(sql, args).rowcount
        conn = self._conn()
        try:
            return self._gate.attempt(lambda: conn.execute(sql, args).rowcount)
        finally:
            self._gate.ended()

    def put(self, key: str, data: bytes) -> ObjectRef:
        if not key or key.startswith("/"):
            raise ValueError(f"bad object key: {key!r}")
        digest = hashlib.sha256(data).hexdigest()
        try:
            self._write(
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
            conn = self._conn()
            row = self._gate.attempt(
                lambda: conn.execute("SELECT data, sha256 FROM objects WHERE key = ?", (key,)).fetchone()
            )
        except sqlite3.OperationalError as e:
            raise StoreError(f"sqlite objects: {e}") from e
        if row is None:
            return None
        data, stored = bytes(row[0]), row[1]
        return verified(key, data, stored, expected)

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
                count = self._write(
                    "DELETE FROM objects WHERE rowid IN (SELECT rowid FROM objects WHERE written_at < ? LIMIT ?)",
                    (older_than, _SWEEP_BATCH),
                )
            except sqlite3.OperationalError as e:
                raise StoreError(f"sqlite objects: {e}") from e
            removed += count
            if count < _SWEEP_BATCH:
                return removed

    def close(self) -> None:
        if self.rows is not None:
            return  # the row store's connections: it closes them
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
