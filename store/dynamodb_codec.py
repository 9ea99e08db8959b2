"""How the DynamoDB row store writes its items (the table's design is in store/dynamodb_rows.py):
the key shape, attribute values through boto3's own marshalling, and each item kind's codec.
Shared by the dynamodb_* modules, which import its underscored names as their own.
"""

from __future__ import annotations

import json
import math
import re
import secrets
import threading
import time
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from chat_approvals.core.models import (
    AuditEvent,
    Grant,
    OutboxItem,
    Pointer,
)
from chat_approvals.store.pointer_docs import PointerDocs

Item = dict[str, dict[str, Any]]

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
DOCS = PointerDocs()  # the pointers written and read in this process, by their document's text


_CARD_COND = "attribute_not_exists(#pk) OR #chat = :chat"  # the card index is write-once, per chat
_SESSION_COND = "attribute_not_exists(#pk) OR #seq <= :seq"  # a later history only


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
        "doc": _s(DOCS.document(p)),
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


def _to_pointer(item: Item | None) -> Pointer | None:
    """The item as a Pointer: its document validated once per text (store/pointer_docs.py), its
    columns every time."""
    if item is None:
        return None
    location = _get_s(item, "card_location")
    count = _get_f(item, "claim_count")
    columns = {
        "card_id": _get_s(item, "card_id"),
        "secret_hash": _get_s(item, "sh"),
        "state": _get_s(item, "state"),
        "expires_at": _get_f(item, "expires_at"),
        "ttl": _get_f(item, "ttl_at"),
        "claim_count": int(count or 0),
        "worker": _get_s(item, "worker"),
        "lease_until": _get_f(item, "lease_until"),
        "resume_deadline": _get_f(item, "resume_deadline"),
        "answer_key": _get_s(item, "answer_key"),
        "card_location": json.loads(location) if location else None,
        "votes": [json.loads(v["S"]) for v in item.get("votes", {}).get("L", [])],
    }
    return DOCS.pointer(str(_get_s(item, "doc")), columns)


def _card_item(chat: str, card_id: str, ttl: float) -> Item:
    return {
        "pk": _s(_key("card", card_id)),
        "sk": _s(CARD_SK),
        "chat": _s(chat),
        "ttl": _ttl(ttl),
        "ttl_at": _n(ttl),
    }


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
