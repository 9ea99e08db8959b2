"""Objects (snapshots, answers, chat histories) in the PostgreSQL database, in a table of their own.

One row per object, written with one `INSERT ... ON CONFLICT DO NOTHING` (a key written before
inserts nothing: ObjectExists). It shares the row store's pool; inside `PostgresRows.atomic` a
step's puts ride in its row write's statement, as CTEs (the snapshot in front of its pointer, the
answer in front of finish), which the server runs as one implicit transaction: one round trip.
Large snapshots can still go to S3 with `--objects s3://...` beside a `postgresql://` store.
"""

from __future__ import annotations

import hashlib

from chat_approvals.core.models import Clock, ObjectRef, SystemClock
from chat_approvals.store.base import ObjectExists, ObjectStore, verified
from chat_approvals.store.postgres_rows import PostgresRows, sweep_table


class PostgresObjects(ObjectStore):
    def __init__(self, rows: PostgresRows, clock: Clock | None = None, *, owns_rows: bool = False) -> None:
        """`rows`: the row store whose pool (and transaction, inside its `atomic`) this uses;
        `owns_rows`: close it with this store (opened for the objects alone)."""
        self.rows = rows
        self.clock = clock or SystemClock()
        self._owns = owns_rows

    def put(self, key: str, data: bytes) -> ObjectRef:
        if not key or key.startswith("/"):
            raise ValueError(f"bad object key: {key!r}")
        digest = hashlib.sha256(data).hexdigest()
        args = (key, data, digest, self.clock.now())
        # inside a step: sent with the step's row write (a key written before fails the whole statement)
        if self.rows.defer("INSERT INTO objects (key, data, sha256, written_at) VALUES (%s, %s, %s, %s)", args):
            return ObjectRef(key=key, size=len(data), sha256=digest)
        written = self.rows._exec(
            "INSERT INTO objects (key, data, sha256, written_at) VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING", args
        )
        if written.rowcount != 1:
            raise ObjectExists(key)
        return ObjectRef(key=key, size=len(data), sha256=digest)

    def _read(self, key: str, expected: str | None) -> bytes | None:
        got = self.rows.prefetched(key)  # read along with the claim (write-once: the same bytes)
        if got is None:
            row = self.rows._exec("SELECT data, sha256 FROM objects WHERE key = %s", (key,)).fetchone()
            if row is None:
                return None
            got = (bytes(row["data"]), row["sha256"])
        data, stored = got
        return verified(key, data, stored, expected)

    def get(self, ref: ObjectRef) -> bytes:
        data = self._read(ref.key, ref.sha256)
        if data is None:
            raise KeyError(ref.key)
        return data

    def get_key(self, key: str) -> bytes | None:
        return self._read(key, None)

    def sweep(self, older_than: float) -> int:
        return sweep_table(self.rows, "objects", "written_at", older_than)

    def close(self) -> None:
        if self._owns:
            self.rows.close()
