"""DynamoDB transactions: several items in one TransactWriteItems, all or nothing, idempotent
on retry by its request token; a cancelled one reports each operation's reason. Where the
endpoint has none (dynalite), that is remembered and the callers write item by item.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from chat_approvals.core.models import (
    AuditWrite,
    SessionWrite,
)
from chat_approvals.store.aws import call_with_retries, error_code
from chat_approvals.store.base import StoreError
from chat_approvals.store.dynamodb_codec import (
    _SESSION_COND,
    POINTER_SK,
    Item,
    _audit_item,
    _get_s,
    _key,
    _n,
    _names,
    _outbox_item,
    _s,
    _session_item,
)
from chat_approvals.store.dynamodb_objects import TableObjectItems


@dataclass(frozen=True)
class _Tx:
    """A TransactWriteItems' outcome: applied, or cancelled with each operation's reason."""

    applied: bool
    reasons: tuple[str, ...] = ()

    def failed(self, i: int) -> bool:
        """Did operation `i`'s condition fail (False when the endpoint gave no reasons)?"""
        return i < len(self.reasons) and self.reasons[i] == "ConditionalCheckFailed"


class Transactions(TableObjectItems):
    """TransactWriteItems: several items, one request, all or nothing; remembered as absent
    where the endpoint has none (dynalite), and the callers then write item by item."""

    def _transact(self, items: list[Item], nonce: str) -> bool:
        """All puts (write-once) in one TransactWriteItems. False when the endpoint has no
        transactions (then remembered)."""
        cond = "attribute_not_exists(#pk)"
        puts = [
            {
                "Put": {
                    "TableName": self.table,
                    "Item": i,
                    "ConditionExpression": cond,
                    "ExpressionAttributeNames": _names(cond),
                }
            }
            for i in items
        ]
        tx = self._transact_ops(puts, nonce)
        if tx is None:
            return False
        if not tx.applied:
            raise StoreError(f"dynamodb transact_write_items on {self.table}: cancelled: {list(tx.reasons)}")
        return True

    def _put_op(self, item: Item, condition: str, values: dict[str, Any] | None = None) -> dict[str, Any]:
        put: dict[str, Any] = {
            "TableName": self.table,
            "Item": item,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": _names(condition),
        }
        if values:
            put["ExpressionAttributeValues"] = values
        return {"Put": put}

    def _update_op(self, pk: str, sk: str, condition: str, update: str, values: dict[str, Any]) -> dict[str, Any]:
        return {
            "Update": {
                "TableName": self.table,
                "Key": {"pk": _s(pk), "sk": _s(sk)},
                "ConditionExpression": condition,
                "UpdateExpression": update,
                "ExpressionAttributeNames": _names(condition, update),
                "ExpressionAttributeValues": values,
            }
        }

    def _delete_op(self, pk: str, sk: str, condition: str, values: dict[str, Any]) -> dict[str, Any]:
        return {
            "Delete": {
                "TableName": self.table,
                "Key": {"pk": _s(pk), "sk": _s(sk)},
                "ConditionExpression": condition,
                "ExpressionAttributeNames": _names(condition),
                "ExpressionAttributeValues": values,
            }
        }

    def _session_op(self, session: SessionWrite, nonce: str) -> dict[str, Any]:
        item = _session_item(session.chat, session.key, session.seq, session.ttl, nonce)
        return self._put_op(item, _SESSION_COND, {":seq": _n(session.seq)})

    def _object_op(self, item: Item) -> dict[str, Any]:
        return self._put_op(item, "attribute_not_exists(#pk)")  # write-once

    def _audit_items(self, a: AuditWrite, nonce: str) -> list[Item]:
        return [_audit_item(a.event, a.ttl, nonce), *(_outbox_item(o, a.ttl, nonce) for o in a.outbox)]

    def _transact_ops(self, ops: list[dict[str, Any]], nonce: str) -> _Tx | None:
        """One TransactWriteItems (idempotent on retry by its request token). Applied, or
        cancelled (nothing was written) with each operation's reason; None: the endpoint has no
        transactions (then remembered, and the caller writes item by item)."""
        try:
            call_with_retries(
                self.target,
                f"transact_write_items on {self.table}",
                lambda: self.client.transact_write_items(TransactItems=ops, ClientRequestToken=nonce),
            )
        except ClientError as e:
            code = error_code(e)
            if code == "TransactionCanceledException":
                reasons = tuple(str(r.get("Code", "")) for r in e.response.get("CancellationReasons", []))
                return _Tx(False, reasons)
            if code in ("UnknownOperationException", "UnrecognizedClientException") or "Unknown" in code:
                self._transactions = False
                return None
            raise StoreError(f"dynamodb transact_write_items on {self.table}: {code}: {e}") from e
        return _Tx(True)

    def _applied(self, chat: str, nonce: str) -> bool:
        """Was a cancelled transaction our own earlier attempt whose response was lost (its retry
        then fails its conditions)? The chat's pointer carries that attempt's nonce."""
        item = self._get(_key("chat", chat), POINTER_SK)
        return item is not None and _get_s(item, "op") == nonce
