"""Objects kept in the DynamoDB table (store/table_objects.py): write-once object items, and
inside `atomic()` a step's objects deferred so that they ride in its next row write (R7: the
object is durable before any row that names it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from chat_approvals.store.base import ObjectExists
from chat_approvals.store.dynamodb_codec import (
    OBJECT_SK,
    Item,
    _get_s,
    _key,
    _n,
    _s,
    _ttl,
)
from chat_approvals.store.dynamodb_table import DynamoTable


class TableObjectItems(DynamoTable):
    """Objects kept in the table (store/table_objects.py): write-once object items, and a
    step's objects deferred to ride in its next row write (`atomic`)."""

    @contextlib.contextmanager
    def _atomic(self) -> Iterator[None]:
        if getattr(self._local, "depth", 0):
            yield
            return
        self._local.depth, self._local.objects = 1, []
        try:
            yield
            self._flush_objects()  # nothing took them: write them before the step ends
        finally:
            self._local.depth, self._local.objects = 0, []

    def atomic(self) -> contextlib.AbstractContextManager[object]:
        """Objects put on the table (TableObjects) inside wait for the step's next row write and
        go in its request: end_turn's and finish's transaction, or else written just before it
        (R7: the object first). Whatever no write took is written when the block ends; on an
        exception they are dropped (no row names them)."""
        return self._atomic()

    def defer_object(self, item: Item) -> bool:
        """Inside atomic() on this thread: keep the object item for the step's next write."""
        if not getattr(self._local, "depth", 0):
            return False
        self._local.objects.append(item)
        return True

    def _take_objects(self) -> list[Item]:
        items: list[Item] = getattr(self._local, "objects", None) or []
        self._local.objects = []
        return items

    def _flush_objects(self) -> None:
        items = self._take_objects()
        if items:
            self._put_objects(items)

    def _put_objects(self, items: list[Item]) -> None:
        """One object: its write-once PutItem. Several: one BatchWriteItem (their keys are new:
        card ids, fence tokens, random names)."""
        if len(items) > 1:
            self._batch_put(items)
        elif items and not self.put_object_item(items[0]):
            raise ObjectExists(str(_get_s(items[0], "key")))

    @staticmethod
    def object_item(key: str, data: bytes, sha256: str, written_at: float, ttl: float, nonce: str) -> Item:
        """No `ttl_at`: the rows' sweep leaves objects to the objects' sweep (by written_at)."""
        return {
            "pk": _s(_key("object", key)),
            "sk": _s(OBJECT_SK),
            "key": _s(key),
            "data": {"B": data},
            "sha256": _s(sha256),
            "written_at": _n(written_at),
            "ttl": _ttl(ttl),
            "op": _s(nonce),
        }

    def put_object_item(self, item: Item) -> bool:
        """Write-once: False when the key exists (and is not our own lost-response retry)."""
        pk, nonce = str(_get_s(item, "pk")), _get_s(item, "op")
        return self._write("put_item", pk, OBJECT_SK, nonce, "attribute_not_exists(#pk)", Item=item) is not None

    def get_object_item(self, key: str) -> tuple[bytes, str] | None:
        item = self._get(_key("object", key), OBJECT_SK)
        if item is None:
            return None
        return bytes(item["data"]["B"]), str(_get_s(item, "sha256"))

    def sweep_objects(self, older_than: float) -> int:
        """Delete object items written before `older_than` (a filtered Scan, as sweep)."""
        values = {":object": _s('["object",'), ":t": _n(older_than)}
        scan = "begins_with(#pk, :object) AND #written_at < :t"
        return sum(1 for _ in self._delete_scanned(scan, "#written_at < :t", values, "object sweep"))
