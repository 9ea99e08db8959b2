"""Small objects (snapshots, answers, chat histories) as items in the DynamoDB row table; larger
ones in S3 (issue 12: fewer HTTP requests per approval cycle).

`--objects 's3://BUCKET/prefix?region=R&table=TABLE'`: an object up to `inline_max` bytes
(default 64 KiB; a snapshot is about 2 KB, an item may hold 400 KB) is one item, pk
`["object", key]`, with its bytes, SHA-256 and the writer's clock time; anything larger is a
confirmed S3 PUT as before (store/s3_objects.py), and a read that misses the table asks S3
(objects written before this option, or too large for an item).

When the row store is the same table in this process (store/open.py shares it), a step's
objects ride in its row write (`RowStore.atomic`, DynamoRows.defer_object): end_turn's snapshot
and finish's answer and history are Puts in the same TransactWriteItems as the pointer write,
all or nothing, so a pointer never names a snapshot that is not there (R7). Where the endpoint
has no transactions (dynalite) they are written just before that row write, in one
BatchWriteItem. Outside a step, `put` is its own write-once conditional PutItem.

Write-once holds per store: a key is refused if the table holds it (a key written to S3 is not
looked up first; every key this service writes is new: card ids, fence tokens, random names).
"""

from __future__ import annotations

import hashlib
import secrets

from chat_approvals.core.models import Clock, ObjectRef, SystemClock
from chat_approvals.store.base import ObjectExists, ObjectStore, verified
from chat_approvals.store.dynamodb_rows import DynamoRows

DEFAULT_INLINE_MAX = 64 * 1024
DEFAULT_RETENTION_DAYS = 9  # core.settings.retention_days(Settings()): physical clean-up by DynamoDB TTL


def _check_key(key: str) -> None:
    if not key or key.startswith("/") or any(p in ("", ".", "..") for p in key.split("/")):
        raise ValueError(f"bad object key: {key!r}")


class TableObjects(ObjectStore):
    def __init__(
        self,
        rows: DynamoRows,
        large: ObjectStore,
        clock: Clock | None = None,
        *,
        inline_max: int = DEFAULT_INLINE_MAX,
        retention_days: float = DEFAULT_RETENTION_DAYS,
    ) -> None:
        self.rows = rows
        self.large = large
        self.clock = clock or SystemClock()
        self.inline_max = inline_max
        self.retention = retention_days * 86400.0

    def put(self, key: str, data: bytes) -> ObjectRef:
        _check_key(key)
        if len(data) > self.inline_max:
            return self.large.put(key, data)
        digest = hashlib.sha256(data).hexdigest()
        now = self.clock.now()
        item = self.rows.object_item(key, data, digest, now, now + self.retention, secrets.token_hex(8))
        if not self.rows.defer_object(item) and not self.rows.put_object_item(item):
            raise ObjectExists(key)
        return ObjectRef(key=key, size=len(data), sha256=digest)

    def _read(self, key: str, expected: str | None) -> bytes | None:
        found = self.rows.get_object_item(key)
        if found is None:
            return None
        data, stored = found
        return verified(key, data, stored, expected)

    def get(self, ref: ObjectRef) -> bytes:
        _check_key(ref.key)
        data = self._read(ref.key, ref.sha256) if ref.size <= self.inline_max else None
        return data if data is not None else self.large.get(ref)

    def get_key(self, key: str) -> bytes | None:
        _check_key(key)
        data = self._read(key, None)
        return data if data is not None else self.large.get_key(key)

    def sweep(self, older_than: float) -> int:
        return self.rows.sweep_objects(older_than) + self.large.sweep(older_than)
