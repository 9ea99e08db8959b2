"""One DynamoDB table as the row store calls it: each API call with retries (a fault that
outlasts them is a StoreError that says what to do), conditional writes that recognise their
own earlier win by its nonce, paged queries, scan-and-delete, and batches.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

from botocore.exceptions import ClientError

from chat_approvals.store.aws import AwsTarget, call_with_retries, error_code, make_client
from chat_approvals.store.base import StoreError
from chat_approvals.store.dynamodb_codec import (
    _VALUE,
    Item,
    _get_s,
    _names,
    _s,
)


class DynamoTable:
    """One DynamoDB table: its calls with retries, conditional writes that recognise their own
    lost-response retries by nonce, paged queries and scans, batches."""

    def __init__(self, target: AwsTarget, client: Any | None = None) -> None:
        self.target = target
        self.table = target.name
        self.client = client if client is not None else make_client("dynamodb", target)
        self._transactions = True  # until the endpoint says it has no TransactWriteItems
        self._local = threading.local()  # a step's objects waiting for its write (atomic)

    # --- plumbing ---------------------------------------------------------------------
    def _call(self, op: str, **kwargs: Any) -> dict[str, Any]:
        """One API call with retries. A failed condition is the caller's to read; any other
        error is a StoreError that says what to do about it."""
        fn = getattr(self.client, op)
        try:
            result: dict[str, Any] = call_with_retries(
                self.target, f"{op} on {self.table}", lambda: fn(TableName=self.table, **kwargs)
            )
        except ClientError as e:
            code = error_code(e)
            if code == "ConditionalCheckFailedException":
                raise
            hint = " (create it with `chat-approvals store init`)" if code == "ResourceNotFoundException" else ""
            raise StoreError(f"dynamodb {op} on table {self.table}: {code}{hint}: {e}") from e
        return result

    def _get(self, pk: str, sk: str) -> Item | None:
        r = self._call("get_item", Key={"pk": _s(pk), "sk": _s(sk)}, ConsistentRead=True)
        item: Item | None = r.get("Item")
        return item

    def _write(
        self, op: str, pk: str, sk: str, nonce: str | None, condition: str, **kwargs: Any
    ) -> dict[str, Any] | None:
        """One conditional write. Returns the response when it applied (now or, recognised by
        our nonce, on an earlier attempt whose response was lost), None when the condition failed."""
        self._flush_objects()  # R7: a step's objects are durable before any row that may name them
        exprs = [condition, kwargs.get("UpdateExpression", "")]
        if op != "put_item":
            kwargs["Key"] = {"pk": _s(pk), "sk": _s(sk)}
        try:
            return self._call(
                op,
                ConditionExpression=condition,
                ExpressionAttributeNames=_names(*exprs),
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                **kwargs,
            )
        except ClientError as e:
            if error_code(e) != "ConditionalCheckFailedException":
                raise StoreError(f"dynamodb {op} on {self.table}: {e}") from e
            if nonce is None:
                return None
            old: Item | None = e.response.get("Item")
            if old is None:  # dynalite does not return ALL_OLD: read it, strongly consistent
                old = self._get(pk, sk)
            if old is not None and _get_s(old, "op") == nonce:
                return {"Attributes": old}
            return None

    def _query(self, **kwargs: Any) -> Iterator[Item]:
        start: dict[str, Any] | None = None
        while True:
            page = self._call("query", ConsistentRead=True, **kwargs, **({"ExclusiveStartKey": start} if start else {}))
            yield from page.get("Items", [])
            start = page.get("LastEvaluatedKey")
            if not start:
                return

    def _delete_scanned(self, scan: str, still: str, values: dict[str, Any], what: str) -> Iterator[Item]:
        """Scan for the items `scan` matches and delete each that `still` matches when it is
        deleted (a row re-put since the scan is kept); yields the items deleted."""
        start: dict[str, Any] | None = None
        while True:
            page = self._call(
                "scan",
                ConsistentRead=True,
                FilterExpression=scan,
                ProjectionExpression="#pk, #sk",
                ExpressionAttributeNames=_names(scan, "#pk #sk"),
                ExpressionAttributeValues=values,
                **({"ExclusiveStartKey": start} if start else {}),
            )
            for item in page.get("Items", []):
                try:
                    self._call(
                        "delete_item",
                        Key={"pk": item["pk"], "sk": item["sk"]},
                        ConditionExpression=still,
                        ExpressionAttributeNames=_names(still),
                        ExpressionAttributeValues={k: values[k] for k in set(_VALUE.findall(still))},
                    )
                except ClientError as e:
                    if error_code(e) != "ConditionalCheckFailedException":
                        raise StoreError(f"dynamodb {what} on {self.table}: {e}") from e
                    continue
                yield item
            start = page.get("LastEvaluatedKey")
            if not start:
                return

    def _batch_get(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], Item]:
        """Strongly consistent reads in one BatchGetItem (keys left unprocessed are asked again)."""
        want: dict[str, Any] = {
            self.table: {"Keys": [{"pk": _s(pk), "sk": _s(sk)} for pk, sk in keys], "ConsistentRead": True}
        }
        found: dict[tuple[str, str], Item] = {}
        for attempt in range(8):
            r = self._batch("batch_get_item", want)
            for item in r.get("Responses", {}).get(self.table, []):
                found[(str(_get_s(item, "pk")), str(_get_s(item, "sk")))] = item
            want = r.get("UnprocessedKeys") or {}
            if not want:
                return found
            time.sleep(0.02 * 2**attempt)
        raise StoreError(f"dynamodb batch_get_item on {self.table}: keys still unprocessed")

    def _batch_put(self, items: list[Item]) -> None:
        """Unconditional puts, 25 to a BatchWriteItem (items left unprocessed are sent again)."""
        self._flush_objects()
        for start in range(0, len(items), 25):
            want: dict[str, Any] = {self.table: [{"PutRequest": {"Item": i}} for i in items[start : start + 25]]}
            for attempt in range(8):
                want = self._batch("batch_write_item", want).get("UnprocessedItems") or {}
                if not want:
                    break
                time.sleep(0.02 * 2**attempt)
            else:
                raise StoreError(f"dynamodb batch_write_item on {self.table}: items still unprocessed")

    def _batch(self, op: str, request: dict[str, Any]) -> dict[str, Any]:
        fn = getattr(self.client, op)
        try:
            result: dict[str, Any] = call_with_retries(
                self.target, f"{op} on {self.table}", lambda: fn(RequestItems=request)
            )
        except ClientError as e:
            raise StoreError(f"dynamodb {op} on table {self.table}: {error_code(e)}: {e}") from e
        return result

    def _flush_objects(self) -> None:
        """Write a step's deferred objects before a row that may name them (dynamodb_objects.py)."""
