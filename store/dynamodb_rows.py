"""The multi-replica row store: one DynamoDB table, every state change ONE conditional write.

Key design (one table, `pk` HASH + `sk` RANGE, both strings; keys are compact JSON arrays so no
chat key, user id or name can collide with a separator):

| item          | pk                          | sk                      |
|---------------|-----------------------------|-------------------------|
| pointer       | ["chat", chat]              | "pointer"               |
| card index    | ["card", card_id]           | "card"  (attr: chat)    |
| grant         | ["grant", user]             | [chat, kind, name]      |
| refusal       | ["refusal", chat, turn_id]  | [kind, name]            |
| event dedupe  | ["event", key]              | "event"                 |
| turn lease    | ["turn", chat]              | "turn"                  |
| audit event   | ["audit", chat]             | "<ns:020d>.<nonce>"     |
| outbox item   | ["outbox", sink]            | item id (sorts in append order) |
| outbox lease  | ["outbox-lease", sink]      | "lease"                 |

An audit event and its outbox items are one TransactWriteItems where the endpoint has it (AWS,
moto); where it does not (dynalite), the outbox items are put first, then the event, so an event
in the trail always has its outbox items.

`get_pointer_by_card` must be strongly consistent, and a GSI never is. The card index is a
write-once item (card ids are 128 random bits, never reused), written before the pointer that
carries the card; a lookup is two ConsistentRead GetItems (card -> chat, chat -> pointer) and
the pointer counts only while its CURRENT card id is the one asked for. A card index whose
pointer write then failed, or whose pointer moved on to a chained card, is harmless: it points
at a row that no longer carries that card. The index shares the pointer's physical expiry.

Every non-idempotent write stores a fresh per-call `op` nonce. If a response is lost and the
call is sent again, the retry fails its condition; `ReturnValuesOnConditionCheckFailure=ALL_OLD`
returns the item as it is, and an item carrying our own nonce is our own earlier win, not a
lost race. dynalite ignores ALL_OLD, so then a ConsistentRead GetItem stands in for it.

Logical expiry (`expires_at`, a lease's `lease_until`) is checked in every condition with the
caller's `now`. `ttl` is DynamoDB's TTL attribute (integer epoch seconds), only for physical
clean-up, which AWS performs up to days late; `ttl_at` keeps the exact value for `sweep`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import re
import secrets
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from chat_approvals.core.models import (
    AuditEvent,
    AuditWrite,
    Claimed,
    ClaimRead,
    Fence,
    Grant,
    GrantChange,
    OutboxItem,
    Pointer,
    Refusal,
    SessionWrite,
    SubjectKind,
    TurnStart,
    Vote,
)
from chat_approvals.store.aws import AwsTarget, call_with_retries, error_code, make_client, parse_target
from chat_approvals.store.base import ObjectExists, RowStore, StoreError

Item = dict[str, dict[str, Any]]
log = logging.getLogger(__name__)

POINTER_SK = "pointer"
CARD_SK = "card"
EVENT_SK = "event"
SESSION_SK = "session"
TURN_SK = "turn"
LEASE_SK = "lease"
OBJECT_SK = "object"
TTL_ATTRIBUTE = "ttl"
_TRANSACTION_ITEMS = 100  # TransactWriteItems takes at most this many


def _key(*parts: str) -> str:
    return json.dumps(list(parts), separators=(",", ":"))


# Attribute values go through boto3's own marshalling (numbers as Decimal, so a float keeps its
# shortest repr and no binary noise reaches the table).
_SER, _DE = TypeSerializer(), TypeDeserializer()


def _s(v: str) -> dict[str, Any]:
    return _SER.serialize(v)


def _n(v: float | int) -> dict[str, Any]:
    return _SER.serialize(v if isinstance(v, int) else Decimal(repr(float(v))))


def _ttl(v: float) -> dict[str, Any]:
    return _SER.serialize(math.ceil(v))  # DynamoDB TTL wants whole epoch seconds


def _get_s(item: Item, name: str) -> str | None:
    v = item.get(name)
    return None if v is None else str(_DE.deserialize(v))


def _get_f(item: Item, name: str) -> float | None:
    v = item.get(name)
    return None if v is None else float(_DE.deserialize(v))


_NAME = re.compile(r"#(\w+)")
_VALUE = re.compile(r":\w+")  # a value placeholder in an expression


def _names(*expressions: str) -> dict[str, str]:
    """Every attribute goes through a placeholder (state and ttl are reserved words); only the
    placeholders actually used are passed, since DynamoDB rejects unused ones."""
    return {f"#{n}": n for e in expressions for n in _NAME.findall(e)}


def _nonce() -> str:
    return secrets.token_hex(8)


@dataclass(frozen=True)
class _Tx:
    """A TransactWriteItems' outcome: applied, or cancelled with each operation's reason."""

    applied: bool
    reasons: tuple[str, ...] = ()

    def failed(self, i: int) -> bool:
        """Did operation `i`'s condition fail (False when the endpoint gave no reasons)?"""
        return i < len(self.reasons) and self.reasons[i] == "ConditionalCheckFailed"


class _AuditSeq:
    """Sort keys for audit events: wall-clock nanoseconds, strictly increasing in this process
    (several events can share a clock tick). Across replicas, order follows their clocks."""

    def __init__(self) -> None:
        self._last = 0
        self._lock = threading.Lock()

    def next(self) -> int:
        with self._lock:
            self._last = max(self._last + 1, time.time_ns())
            return self._last


_SEQ = _AuditSeq()


class DynamoRows(RowStore):
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

    # --- pointers ---------------------------------------------------------------------
    @staticmethod
    def _pointer_item(p: Pointer, nonce: str) -> Item:
        item: Item = {
            "pk": _s(_key("chat", p.chat)),
            "sk": _s(POINTER_SK),
            "card_id": _s(p.card_id),
            "sh": _s(p.secret_hash),
            "state": _s(p.state),
            "expires_at": _n(p.expires_at),
            "ttl": _ttl(p.ttl),
            "ttl_at": _n(p.ttl),
            "claim_count": _n(p.claim_count),
            "doc": _s(p.model_dump_json()),
            "op": _s(nonce),
        }
        for name, value in (
            ("worker", p.worker),
            ("lease_until", p.lease_until),
            ("resume_deadline", p.resume_deadline),
            ("answer_key", p.answer_key),
        ):
            if value is not None:
                item[name] = _s(value) if isinstance(value, str) else _n(value)
        if p.card_location is not None:
            item["card_location"] = _s(json.dumps(p.card_location))
        if p.votes:  # a list of JSON docs in vote order, and the voters as a set (the condition)
            item["votes"] = {"L": [_s(v.model_dump_json()) for v in p.votes]}
            item["voters"] = {"SS": sorted({v.user for v in p.votes})}
        return item

    @staticmethod
    def _to_pointer(item: Item | None) -> Pointer | None:
        if item is None:
            return None
        doc = json.loads(str(_get_s(item, "doc")))
        location = _get_s(item, "card_location")
        count = _get_f(item, "claim_count")
        doc.update(
            card_id=_get_s(item, "card_id"),
            secret_hash=_get_s(item, "sh"),
            state=_get_s(item, "state"),
            expires_at=_get_f(item, "expires_at"),
            ttl=_get_f(item, "ttl_at"),
            claim_count=int(count or 0),
            worker=_get_s(item, "worker"),
            lease_until=_get_f(item, "lease_until"),
            resume_deadline=_get_f(item, "resume_deadline"),
            card_location=json.loads(location) if location else None,
            answer_key=_get_s(item, "answer_key"),
            votes=[json.loads(v["S"]) for v in item.get("votes", {}).get("L", [])],
        )
        return Pointer.model_validate_json(json.dumps(doc))

    _CARD_COND = "attribute_not_exists(#pk) OR #chat = :chat"

    @staticmethod
    def _card_item(chat: str, card_id: str, ttl: float) -> Item:
        return {
            "pk": _s(_key("card", card_id)),
            "sk": _s(CARD_SK),
            "chat": _s(chat),
            "ttl": _ttl(ttl),
            "ttl_at": _n(ttl),
        }

    def _index_card(self, chat: str, card_id: str, ttl: float) -> None:
        """Write-once card -> chat entry; re-writing the same pair (a retry) is a no-op."""
        item = self._card_item(chat, card_id, ttl)
        values = {":chat": _s(chat)}
        if self._write("put_item", "", "", None, self._CARD_COND, Item=item, ExpressionAttributeValues=values) is None:
            raise ValueError(f"card id {card_id!r} already belongs to another chat")

    def put_pointer(self, pointer: Pointer, now: float) -> bool:
        self._index_card(pointer.chat, pointer.card_id, pointer.ttl)
        nonce = _nonce()
        item = self._pointer_item(pointer, nonce)
        pk = str(_get_s(item, "pk"))
        values = self._put_pointer_values(now)
        r = self._write(
            "put_item", pk, POINTER_SK, nonce, self._PUT_POINTER, Item=item, ExpressionAttributeValues=values
        )
        return r is not None

    _PUT_POINTER = (
        "attribute_not_exists(#pk) OR #state IN (:done, :expired)"
        " OR (#expires_at <= :now AND NOT (#state = :claimed AND #lease_until >= :now))"
    )

    @staticmethod
    def _put_pointer_values(now: float) -> dict[str, Any]:
        return {":done": _s("done"), ":expired": _s("expired"), ":claimed": _s("claimed"), ":now": _n(now)}

    def get_pointer(self, chat: str) -> Pointer | None:
        return self._to_pointer(self._get(_key("chat", chat), POINTER_SK))

    def get_pointer_by_card(self, card_id: str) -> Pointer | None:
        index = self._get(_key("card", card_id), CARD_SK)
        chat = None if index is None else _get_s(index, "chat")
        if chat is None:
            return None
        p = self.get_pointer(chat)
        return p if p is not None and p.card_id == card_id else None

    def _update(self, chat: str, condition: str, update: str, values: dict[str, Any]) -> dict[str, Any] | None:
        nonce = _nonce()
        values = {**values, ":op": _s(nonce)}
        update = update.replace("SET ", "SET #op = :op, ", 1)
        return self._write(
            "update_item",
            _key("chat", chat),
            POINTER_SK,
            nonce,
            condition,
            UpdateExpression=update,
            ExpressionAttributeValues=values,
            ReturnValues="ALL_NEW",
        )

    def claim(
        self, read: ClaimRead, *, worker: str, now: float, lease_until: float, resume_deadline: float
    ) -> Pointer | None:
        cond = (
            "#card_id = :cid AND #sh = :sh"
            " AND (#state = :pending OR (#state = :claimed AND #lease_until < :now))"
            " AND #expires_at > :now AND #claim_count = :cc"
        )
        upd = (
            "SET #state = :claimed, #worker = :w, #lease_until = :lu, #resume_deadline = :rd,"
            " #claim_count = #claim_count + :one"
        )
        values = {
            ":cid": _s(read.card_id),
            ":sh": _s(read.secret_hash),
            ":pending": _s("pending"),
            ":claimed": _s("claimed"),
            ":now": _n(now),
            ":cc": _n(read.claim_count),
            ":w": _s(worker),
            ":lu": _n(lease_until),
            ":rd": _n(resume_deadline),
            ":one": _n(1),
        }
        r = self._update(read.chat, cond, upd, values)
        return None if r is None else self._to_pointer(r["Attributes"])

    _HOLDING = "#card_id = :cid AND #state = :claimed AND #worker = :w AND #claim_count = :token"

    @staticmethod
    def _holding(f: Fence) -> dict[str, Any]:
        return {":cid": _s(f.card_id), ":claimed": _s("claimed"), ":w": _s(f.worker), ":token": _n(f.token)}

    def renew(self, fence: Fence, *, now: float, lease_until: float) -> bool:
        values = {**self._holding(fence), ":now": _n(now), ":lu": _n(lease_until)}
        r = self._update(fence.chat, self._HOLDING + " AND #lease_until >= :now", "SET #lease_until = :lu", values)
        return r is not None

    _FINISH = "SET #state = :done, #answer_key = :ak REMOVE #lease_until"

    def finish(self, fence: Fence, *, answer_key: str, session: SessionWrite | None = None) -> bool:
        """One TransactWriteItems where the endpoint has it: the step's objects (the answer, the
        history), the conditional finish and the session row. A cancelled transaction wrote
        nothing; then (and without transactions) the objects, the finish, the session row."""
        objects = self._take_objects()
        if self._transactions:
            nonce = _nonce()
            values = {**self._holding(fence), ":done": _s("done"), ":ak": _s(answer_key), ":op": _s(nonce)}
            ops = [self._object_op(i) for i in objects]
            ops.append(
                self._update_op(
                    _key("chat", fence.chat),
                    POINTER_SK,
                    self._HOLDING,
                    self._FINISH.replace("SET ", "SET #op = :op, ", 1),
                    values,
                )
            )
            if session is not None:
                ops.append(self._session_op(session, nonce))
            tx = self._transact_ops(ops, nonce)
            if tx is not None and (tx.applied or self._applied(fence.chat, nonce)):
                return True
            if tx is not None and tx.failed(len(objects)):
                return False  # not holding the claim (R12): nothing written, no object needed
        if objects:
            self._put_objects(objects)
        return self._finish_alone(fence, answer_key=answer_key, session=session)

    def _finish_alone(self, fence: Fence, *, answer_key: str, session: SessionWrite | None) -> bool:
        values = {**self._holding(fence), ":done": _s("done"), ":ak": _s(answer_key)}
        r = self._update(fence.chat, self._HOLDING, self._FINISH, values)
        if r is not None and session is not None:  # a second request: the history is best effort
            try:
                self.put_session(session.chat, session.key, session.seq, session.ttl)
            except StoreError as e:
                log.warning("history of %s not saved: %s", session.chat, e)
        return r is not None

    def replace(self, fence: Fence, *, new: Pointer) -> bool:
        chat = fence.chat
        if new.chat != chat:
            raise ValueError("a chained card stays in its chat")
        self._index_card(chat, new.card_id, new.ttl)
        fields = self._pointer_item(new, "")
        sets, removes, values = [], [], self._holding(fence)
        for name in (
            "card_id",
            "sh",
            "state",
            "expires_at",
            "ttl",
            "ttl_at",
            "claim_count",
            "worker",
            "lease_until",
            "resume_deadline",
            "card_location",
            "answer_key",
            "doc",
            "votes",
            "voters",
        ):
            if name in fields:
                sets.append(f"#{name} = :new_{name}")
                values[f":new_{name}"] = fields[name]
            else:
                removes.append(f"#{name}")
        upd = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        return self._update(chat, self._HOLDING, upd, values) is not None

    def expire(self, chat: str, card_id: str, now: float, answer_key: str | None = None) -> bool:
        cond = "#card_id = :cid AND (#state = :pending OR (#state = :claimed AND #lease_until < :now))"
        values = {
            ":cid": _s(card_id),
            ":pending": _s("pending"),
            ":claimed": _s("claimed"),
            ":now": _n(now),
            ":expired": _s("expired"),
        }
        upd = "SET #state = :expired"
        if answer_key is not None:
            upd += ", #answer_key = :ak"
            values[":ak"] = _s(answer_key)
        return self._update(chat, cond, upd + " REMOVE #lease_until", values) is not None

    def vote(self, *, chat: str, card_id: str, secret_hash: str, vote: Vote, now: float) -> Pointer | None:
        cond = (
            "#card_id = :cid AND #sh = :sh AND #state = :pending AND #expires_at > :now"
            " AND (attribute_not_exists(#voters) OR NOT contains(#voters, :voter))"
        )
        upd = "SET #votes = list_append(if_not_exists(#votes, :none), :vote) ADD #voters :voters"
        values = {
            ":cid": _s(card_id),
            ":sh": _s(secret_hash),
            ":pending": _s("pending"),
            ":now": _n(now),
            ":voter": _s(vote.user),
            ":none": {"L": []},
            ":vote": {"L": [_s(vote.model_dump_json())]},
            ":voters": {"SS": [vote.user]},
        }
        r = self._update(chat, cond, upd, values)
        return None if r is None else self._to_pointer(r["Attributes"])

    def set_card_location(self, chat: str, card_id: str, location: dict[str, str]) -> bool:
        values = {":cid": _s(card_id), ":loc": _s(json.dumps(location))}
        return self._update(chat, "#card_id = :cid", "SET #card_location = :loc", values) is not None

    def rotate_secret(self, chat: str, card_id: str, old_hash: str, new_hash: str, now: float) -> bool:
        cond = (
            "#card_id = :cid AND #sh = :old AND #expires_at > :now"
            " AND (#state = :pending OR (#state = :claimed AND #lease_until < :now))"
        )
        values = {
            ":cid": _s(card_id),
            ":old": _s(old_hash),
            ":new": _s(new_hash),
            ":now": _n(now),
            ":pending": _s("pending"),
            ":claimed": _s("claimed"),
        }
        return self._update(chat, cond, "SET #sh = :new", values) is not None

    # --- turn lease -------------------------------------------------------------------
    def take_turn(self, chat: str, holder: str, now: float, lease_until: float) -> bool:
        nonce = _nonce()
        pk = _key("turn", chat)
        item: Item = {
            "pk": _s(pk),
            "sk": _s(TURN_SK),
            "holder": _s(holder),
            "lease_until": _n(lease_until),
            "ttl": _ttl(lease_until),
            "ttl_at": _n(lease_until),
            "op": _s(nonce),
        }
        cond = "attribute_not_exists(#pk) OR #lease_until < :now"
        r = self._write("put_item", pk, TURN_SK, nonce, cond, Item=item, ExpressionAttributeValues={":now": _n(now)})
        return r is not None

    def renew_turn(self, chat: str, holder: str, now: float, lease_until: float) -> bool:
        nonce = _nonce()
        cond = "#holder = :h AND #lease_until >= :now"
        upd = "SET #op = :op, #lease_until = :lu, #ttl = :ttl, #ttl_at = :lu"
        values = {
            ":h": _s(holder),
            ":now": _n(now),
            ":lu": _n(lease_until),
            ":ttl": _ttl(lease_until),
            ":op": _s(nonce),
        }
        r = self._write(
            "update_item",
            _key("turn", chat),
            TURN_SK,
            nonce,
            cond,
            UpdateExpression=upd,
            ExpressionAttributeValues=values,
        )
        return r is not None

    def release_turn(self, chat: str, holder: str) -> bool:
        cond = "#holder = :h"
        try:
            self._call(
                "delete_item",
                Key={"pk": _s(_key("turn", chat)), "sk": _s(TURN_SK)},
                ConditionExpression=cond,
                ExpressionAttributeNames=_names(cond),
                ExpressionAttributeValues={":h": _s(holder)},
            )
        except ClientError as e:  # another holder (ours lapsed and was taken), or already gone
            if error_code(e) != "ConditionalCheckFailedException":
                raise StoreError(f"dynamodb release_turn on {self.table}: {e}") from e
            return False
        return True

    # --- grants -----------------------------------------------------------------------
    def put_grant(self, grant: Grant, ttl: float) -> None:
        self._call("put_item", Item=self._grant_item(grant, ttl))  # an upsert: the same write again is the same row

    @staticmethod
    def _grant_item(grant: Grant, ttl: float) -> Item:
        item: Item = {
            "pk": _s(_key("grant", grant.user)),
            "sk": _s(_key(grant.chat, grant.kind, grant.name)),
            "user": _s(grant.user),
            "chat": _s(grant.chat),
            "kind": _s(grant.kind),
            "name": _s(grant.name),
            "card_id": _s(grant.card_id),
            "created_at": _n(grant.created_at),
            "expires_at": _n(grant.expires_at),
            "ttl": _ttl(ttl),
            "ttl_at": _n(ttl),
        }
        if grant.turn_id is not None:
            item["turn_id"] = _s(grant.turn_id)
        return item

    def list_grants(self, user: str, chat: str | None, now: float) -> list[Grant]:
        key = "#pk = :pk"
        values: dict[str, Any] = {":pk": _s(_key("grant", user)), ":now": _n(now)}
        if chat is not None:
            key += " AND begins_with(#sk, :chat)"
            values[":chat"] = _s(_key(chat)[:-1] + ",")  # '["chat",' : exactly this chat
        filt = "#expires_at > :now"
        grants = [
            Grant(
                user=user,
                chat=str(_get_s(i, "chat")),
                kind=_get_s(i, "kind"),  # type: ignore[arg-type]
                name=str(_get_s(i, "name")),
                card_id=str(_get_s(i, "card_id")),
                created_at=float(_get_f(i, "created_at") or 0.0),
                expires_at=float(_get_f(i, "expires_at") or 0.0),
                turn_id=_get_s(i, "turn_id"),
            )
            for i in self._query(
                KeyConditionExpression=key,
                FilterExpression=filt,
                ExpressionAttributeNames=_names(key, filt),
                ExpressionAttributeValues=values,
            )
        ]
        return sorted(grants, key=lambda g: (g.chat, g.kind, g.name))

    def delete_grant(self, user: str, chat: str, kind: SubjectKind, name: str) -> bool:
        r = self._call(
            "delete_item",
            Key={"pk": _s(_key("grant", user)), "sk": _s(_key(chat, kind, name))},
            ReturnValues="ALL_OLD",
        )
        return bool(r.get("Attributes"))

    # --- refusals ---------------------------------------------------------------------
    def record_refusal(self, refusal: Refusal, ttl: float) -> bool:
        nonce = _nonce()
        pk, sk = _key("refusal", refusal.chat, refusal.turn_id), _key(refusal.kind, refusal.name)
        item: Item = {
            "pk": _s(pk),
            "sk": _s(sk),
            "doc": _s(refusal.model_dump_json()),
            "at": _n(refusal.at),
            "ttl": _ttl(ttl),
            "ttl_at": _n(ttl),
            "op": _s(nonce),
        }
        return self._write("put_item", pk, sk, nonce, "attribute_not_exists(#pk)", Item=item) is not None

    def list_refusals(self, chat: str, turn_id: str) -> list[Refusal]:
        key = "#pk = :pk"
        items = self._query(
            KeyConditionExpression=key,
            ExpressionAttributeNames=_names(key),
            ExpressionAttributeValues={":pk": _s(_key("refusal", chat, turn_id))},
        )
        refusals = [Refusal.model_validate_json(str(_get_s(i, "doc"))) for i in items]
        return sorted(refusals, key=lambda r: (r.at, r.kind, r.name))

    # --- dedupe -----------------------------------------------------------------------
    def claim_event(self, key: str, now: float, ttl: float) -> bool:
        nonce = _nonce()
        pk = _key("event", key)
        item: Item = {"pk": _s(pk), "sk": _s(EVENT_SK), "ttl": _ttl(ttl), "ttl_at": _n(ttl), "op": _s(nonce)}
        cond = "attribute_not_exists(#pk) OR #ttl_at < :now"  # past its ttl though not yet swept
        r = self._write("put_item", pk, EVENT_SK, nonce, cond, Item=item, ExpressionAttributeValues={":now": _n(now)})
        return r is not None

    # --- sessions -----------------------------------------------------------------------
    _SESSION_COND = "attribute_not_exists(#pk) OR #seq <= :seq"

    @staticmethod
    def _session_item(chat: str, key: str, seq: float, ttl: float, nonce: str) -> Item:
        return {
            "pk": _s(_key("session", chat)),
            "sk": _s(SESSION_SK),
            "object_key": _s(key),
            "seq": _n(seq),
            "ttl": _ttl(ttl),
            "ttl_at": _n(ttl),
            "op": _s(nonce),
        }

    def put_session(self, chat: str, key: str, seq: float, ttl: float) -> bool:
        nonce = _nonce()
        item = self._session_item(chat, key, seq, ttl, nonce)
        values = {":seq": _n(seq)}
        r = self._write(
            "put_item",
            _key("session", chat),
            SESSION_SK,
            nonce,
            self._SESSION_COND,
            Item=item,
            ExpressionAttributeValues=values,
        )
        return r is not None

    def get_session(self, chat: str) -> str | None:
        item = self._get(_key("session", chat), SESSION_SK)
        return None if item is None else _get_s(item, "object_key")

    # --- audit ------------------------------------------------------------------------
    @staticmethod
    def _audit_item(event: AuditEvent, ttl: float, nonce: str) -> Item:
        """The event's item; its sort key is taken now, so items made in order sort in order."""
        return {
            "pk": _s(_key("audit", event.chat)),
            "sk": _s(f"{_SEQ.next():020d}.{nonce}"),
            "doc": _s(event.model_dump_json()),
            "at": _n(event.at),
            "ttl": _ttl(ttl),
            "ttl_at": _n(ttl),
            "op": _s(nonce),
        }

    def append_audit(self, event: AuditEvent, ttl: float, outbox: Sequence[OutboxItem] = ()) -> None:
        nonce = _nonce()
        item = self._audit_item(event, ttl, nonce)
        pk, sk = str(_get_s(item, "pk")), str(_get_s(item, "sk"))
        out = [self._outbox_item(o, ttl, nonce) for o in outbox]
        if out and self._transactions and self._transact([item, *out], nonce):
            return
        for o in out:  # no transactions here: the outbox first (an event never lacks its items)
            self._write(
                "put_item", str(_get_s(o, "pk")), str(_get_s(o, "sk")), nonce, "attribute_not_exists(#pk)", Item=o
            )
        # the sort key is unique to this call, so a failed condition can only be our own retry
        self._write("put_item", pk, sk, nonce, "attribute_not_exists(#pk)", Item=item)

    @staticmethod
    def _outbox_item(o: OutboxItem, ttl: float, nonce: str) -> Item:
        return {
            "pk": _s(_key("outbox", o.sink)),
            "sk": _s(o.id),
            "chat": _s(o.chat),
            "body": _s(o.body),
            "ttl": _ttl(ttl),
            "ttl_at": _n(ttl),
            "op": _s(nonce),
        }

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

    # --- compound steps: fewer requests where no condition is lost ------------------------
    def begin_turn(self, chat: str, holder: str, user: str, now: float, lease_until: float) -> TurnStart:
        """take_turn, then the pointer and the history key in one BatchGetItem, and the grants."""
        if not self.take_turn(chat, holder, now, lease_until):
            return TurnStart(taken=False)
        pointer_key, session_key = (_key("chat", chat), POINTER_SK), (_key("session", chat), SESSION_SK)
        found = self._batch_get([pointer_key, session_key])
        session = found.get(session_key)
        return TurnStart(
            True,
            self._to_pointer(found.get(pointer_key)),
            tuple(self.list_grants(user, chat, now)),
            None if session is None else _get_s(session, "object_key"),
        )

    def claim_grants(
        self,
        read: ClaimRead,
        *,
        worker: str,
        now: float,
        lease_until: float,
        resume_deadline: float,
        changes: Sequence[GrantChange] = (),
        before: Sequence[AuditWrite] = (),
        after: Sequence[AuditWrite] = (),
    ) -> Claimed | None:
        """The claim (its one conditional write), then the grant puts and the audit events in one
        BatchWriteItem (unconditional puts: a grant is an upsert, an event's sort key is new);
        a grant delete stays its own conditional call. Events with outbox items go one at a time
        (their items first), as append_audit writes them."""
        if any(a.outbox for a in [*before, *after, *(c.audit for c in changes)]):
            return super().claim_grants(
                read,
                worker=worker,
                now=now,
                lease_until=lease_until,
                resume_deadline=resume_deadline,
                changes=changes,
                before=before,
                after=after,
            )
        won = self.claim(read, worker=worker, now=now, lease_until=lease_until, resume_deadline=resume_deadline)
        if won is None:
            return None
        nonce = _nonce()
        items = [self._audit_item(a.event, a.ttl, nonce) for a in before]
        for c in changes:
            g = c.grant
            if not c.delete:
                items += [self._grant_item(g, c.ttl), self._audit_item(c.audit.event, c.audit.ttl, nonce)]
            elif self.delete_grant(g.user, g.chat, g.kind, g.name):
                items.append(self._audit_item(c.audit.event, c.audit.ttl, nonce))
        items += [self._audit_item(a.event, a.ttl, nonce) for a in after]
        self._batch_put(items)
        return Claimed(won, tuple(self.list_grants(won.owner, won.chat, now)))

    def end_turn(
        self,
        chat: str,
        holder: str,
        *,
        now: float,
        pointer: Pointer | None = None,
        audit: Sequence[AuditWrite] = (),
        session: SessionWrite | None = None,
    ) -> bool:
        """One TransactWriteItems where the endpoint has it: the step's objects (the snapshot),
        the card index, the conditional pointer write (R7) with its events, the session row and
        the turn lease released. All or nothing: the pointer never names a snapshot that is not
        there. A cancelled transaction wrote nothing; then (and without transactions) the
        objects first, then the single calls in R7's order (RowStore.end_turn)."""
        objects = self._take_objects()
        if self._transactions:
            nonce = _nonce()
            ops = [self._object_op(i) for i in objects]
            if pointer is not None:
                card = self._card_item(pointer.chat, pointer.card_id, pointer.ttl)
                ops.append(self._put_op(card, self._CARD_COND, {":chat": _s(pointer.chat)}))
                item = self._pointer_item(pointer, nonce)
                ops.append(self._put_op(item, self._PUT_POINTER, self._put_pointer_values(now)))
                for a in audit:
                    ops += [self._put_op(i, "attribute_not_exists(#pk)") for i in self._audit_items(a, nonce)]
            if session is not None:
                ops.append(self._session_op(session, nonce))
            ops.append(self._delete_op(_key("turn", chat), TURN_SK, "#holder = :h", {":h": _s(holder)}))
            if len(ops) <= _TRANSACTION_ITEMS:
                tx = self._transact_ops(ops, nonce)
                if tx is not None and (tx.applied or (pointer is not None and self._applied(pointer.chat, nonce))):
                    return True
                at = len(objects) + 1  # the pointer's Put (after the card index)
                if (
                    tx is not None
                    and pointer is not None
                    and session is None
                    and tx.failed(at)
                    and not tx.failed(at - 1)
                ):
                    # the chat has an open request: refused as put_pointer refuses it; no object
                    # was written and none is needed; only the lease is given back
                    self.release_turn(chat, holder)
                    return False
        if objects:
            self._put_objects(objects)
        return super().end_turn(chat, holder, now=now, pointer=pointer, audit=audit, session=session)

    # --- transactions: several items, one request, all or nothing ------------------------
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
        item = self._session_item(session.chat, session.key, session.seq, session.ttl, nonce)
        return self._put_op(item, self._SESSION_COND, {":seq": _n(session.seq)})

    def _object_op(self, item: Item) -> dict[str, Any]:
        return self._put_op(item, "attribute_not_exists(#pk)")  # write-once

    def _audit_items(self, a: AuditWrite, nonce: str) -> list[Item]:
        return [self._audit_item(a.event, a.ttl, nonce), *(self._outbox_item(o, a.ttl, nonce) for o in a.outbox)]

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

    # --- objects kept in the table (store/table_objects.py) ---------------------------------
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

    def list_audit(self, chat: str) -> list[AuditEvent]:
        key = "#pk = :pk"
        items = self._query(
            KeyConditionExpression=key,
            ExpressionAttributeNames=_names(key),
            ExpressionAttributeValues={":pk": _s(_key("audit", chat))},
            ScanIndexForward=True,
        )
        return [AuditEvent.model_validate_json(str(_get_s(i, "doc"))) for i in items]

    def list_audit_since(self, since: float) -> list[AuditEvent]:
        """A filtered Scan: an export, not a protocol path."""
        filt = "begins_with(#pk, :audit)"
        events: list[tuple[str, str, AuditEvent]] = []
        start: dict[str, Any] | None = None
        while True:
            page = self._call(
                "scan",
                ConsistentRead=True,
                FilterExpression=filt,
                ExpressionAttributeNames=_names(filt),
                ExpressionAttributeValues={":audit": _s('["audit",')},
                **({"ExclusiveStartKey": start} if start else {}),
            )
            for i in page.get("Items", []):
                e = AuditEvent.model_validate_json(str(_get_s(i, "doc")))
                if e.at >= since:
                    events.append((e.chat, str(_get_s(i, "sk")), e))
            start = page.get("LastEvaluatedKey")
            if not start:
                break
        events.sort(key=lambda t: (t[2].at, t[0], t[1]))
        return [e for _, _, e in events]

    # --- audit outbox -----------------------------------------------------------------
    def claim_outbox(self, sink: str, holder: str, now: float, lease_until: float, limit: int) -> list[OutboxItem]:
        nonce = _nonce()
        pk = _key("outbox-lease", sink)
        item: Item = {
            "pk": _s(pk),
            "sk": _s(LEASE_SK),
            "holder": _s(holder),
            "lease_until": _n(lease_until),
            "ttl": _ttl(lease_until),
            "ttl_at": _n(lease_until),
            "op": _s(nonce),
        }
        cond = "attribute_not_exists(#pk) OR #holder = :h OR #lease_until < :now"
        values = {":now": _n(now), ":h": _s(holder)}
        if self._write("put_item", pk, LEASE_SK, nonce, cond, Item=item, ExpressionAttributeValues=values) is None:
            return []
        key = "#pk = :pk"
        r = self._call(
            "query",
            ConsistentRead=True,
            KeyConditionExpression=key,
            ExpressionAttributeNames=_names(key),
            ExpressionAttributeValues={":pk": _s(_key("outbox", sink))},
            ScanIndexForward=True,
            Limit=limit,
        )
        return [
            OutboxItem(sink=sink, id=str(_get_s(i, "sk")), chat=str(_get_s(i, "chat")), body=str(_get_s(i, "body")))
            for i in r.get("Items", [])
        ]

    def delete_outbox(self, sink: str, item_id: str) -> bool:
        r = self._call("delete_item", Key={"pk": _s(_key("outbox", sink)), "sk": _s(item_id)}, ReturnValues="ALL_OLD")
        return bool(r.get("Attributes"))

    # --- sweep ------------------------------------------------------------------------
    def sweep(self, now: float) -> int:
        """What DynamoDB's TTL does eventually, done now: delete items whose ttl has passed.
        Each delete re-checks the ttl, so a row re-put since the scan is kept. Card index
        items are deleted but not counted (they are part of their pointer)."""
        filt = "#ttl_at < :now"
        deleted = self._delete_scanned(filt, filt, {":now": _n(now)}, "sweep")
        return sum(1 for item in deleted if _get_s(item, "sk") != CARD_SK)

    def close(self) -> None:
        self.client.close()


def open_dynamodb_rows(url: str) -> DynamoRows:
    """`dynamodb://TABLE?region=R[&endpoint_url=URL][&max_attempts=N]`; credentials from boto3's chain."""
    return DynamoRows(parse_target(url, "dynamodb"))


# --- table management (store init, tests) -----------------------------------------------


def create_table(url: str) -> str:
    """Create the table (on-demand) with TTL on `ttl`, idempotently. Returns what was done."""
    target = parse_target(url, "dynamodb")
    client = make_client("dynamodb", target)
    done = []
    try:
        try:
            client.create_table(
                TableName=target.name,
                AttributeDefinitions=[
                    {"AttributeName": "pk", "AttributeType": "S"},
                    {"AttributeName": "sk", "AttributeType": "S"},
                ],
                KeySchema=[
                    {"AttributeName": "pk", "KeyType": "HASH"},
                    {"AttributeName": "sk", "KeyType": "RANGE"},
                ],
                BillingMode="PAY_PER_REQUEST",
            )
            done.append(f"created table {target.name}")
        except ClientError as e:
            if error_code(e) != "ResourceInUseException":
                raise
            done.append(f"table {target.name} exists")
        client.get_waiter("table_exists").wait(TableName=target.name, WaiterConfig={"Delay": 1, "MaxAttempts": 60})
        done.append(_enable_ttl(client, target.name))
    finally:
        client.close()
    return "; ".join(done)


def _enable_ttl(client: Any, table: str) -> str:
    try:
        desc = client.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
        if desc.get("TimeToLiveStatus") in ("ENABLED", "ENABLING") and desc.get("AttributeName") == TTL_ATTRIBUTE:
            return f"TTL on {TTL_ATTRIBUTE!r} already enabled"
        client.update_time_to_live(
            TableName=table, TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE}
        )
        return f"enabled TTL on {TTL_ATTRIBUTE!r}"
    except ClientError as e:
        if error_code(e) == "UnknownOperationException":  # dynalite has no TTL API
            return "this endpoint has no TTL API (emulator): rows are removed by `sweep` only"
        raise


def delete_table(url: str) -> None:
    target = parse_target(url, "dynamodb")
    client = make_client("dynamodb", target)
    try:
        client.delete_table(TableName=target.name)
    except ClientError as e:
        if error_code(e) != "ResourceNotFoundException":
            raise
    finally:
        client.close()
