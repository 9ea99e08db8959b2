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
| Slack install | ["slack-install", key]      | "install" (no ttl)      |
| timer         | ["timer", card_id]          | name (attr: fired_at once fired) |
| timer due     | ["timers-due", DAY]         | "<due_at:017.3f>|card_id|name" |
| timer lease   | ["timer-lease", "timers"]   | "lease"                 |

Timers (issue 33): the "timer due" items are the index on the due time, one partition per UTC
day (DAY = due_at // 86400), sorted by due time; claim_timers queries the days from `since` to
`now`, never the whole table. The due entry is written before its timer item and deleted when
the timer fires (one conditional update on the timer item decides "once"); a due entry left by a
crash is deleted the next time it is listed.

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

The rows' protocol writes are here; what they build on is in the modules beside it:
dynamodb_codec (keys, attribute values, each item's codec), dynamodb_table (calls with retries,
conditional writes, queries, scans, batches), dynamodb_objects (object items, `atomic`),
dynamodb_transactions (TransactWriteItems) and dynamodb_admin (create and delete the table).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from botocore.exceptions import ClientError

from chat_approvals.core.models import (
    AuditEvent,
    AuditWrite,
    Claimed,
    ClaimRead,
    ClaimWrite,
    Fence,
    Grant,
    OutboxItem,
    Pointer,
    Refusal,
    SessionWrite,
    SubjectKind,
    Timer,
    TurnStart,
    Vote,
)
from chat_approvals.store.aws import error_code, parse_target
from chat_approvals.store.base import RowStore, StoreError
from chat_approvals.store.dynamodb_admin import create_table, delete_table
from chat_approvals.store.dynamodb_codec import (
    _CARD_COND,
    _SESSION_COND,
    _TRANSACTION_ITEMS,
    CARD_SK,
    EVENT_SK,
    LEASE_SK,
    POINTER_SK,
    SESSION_SK,
    TTL_ATTRIBUTE,
    TURN_SK,
    Item,
    _audit_item,
    _card_item,
    _get_f,
    _get_s,
    _grant_item,
    _key,
    _n,
    _names,
    _nonce,
    _outbox_item,
    _pointer_item,
    _s,
    _session_item,
    _to_pointer,
    _ttl,
)
from chat_approvals.store.dynamodb_transactions import Transactions

__all__ = ["TTL_ATTRIBUTE", "DynamoRows", "create_table", "delete_table", "open_dynamodb_rows"]

log = logging.getLogger(__name__)

_DAY = 86400.0  # the due-time index has one partition per UTC day


INSTALL_SK = "install"


class DynamoRows(Transactions, RowStore):
    """The row store over one table: the table's plumbing, its object items and its
    transactions come from the classes it builds on (dynamodb_table, _objects, _transactions)."""

    # --- pointers ---------------------------------------------------------------------
    def _index_card(self, chat: str, card_id: str, ttl: float) -> None:
        """Write-once card -> chat entry; re-writing the same pair (a retry) is a no-op."""
        item = _card_item(chat, card_id, ttl)
        values = {":chat": _s(chat)}
        if self._write("put_item", "", "", None, _CARD_COND, Item=item, ExpressionAttributeValues=values) is None:
            raise ValueError(f"card id {card_id!r} already belongs to another chat")

    def put_pointer(self, pointer: Pointer, now: float) -> bool:
        self._index_card(pointer.chat, pointer.card_id, pointer.ttl)
        nonce = _nonce()
        item = _pointer_item(pointer, nonce)
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
        return _to_pointer(self._get(_key("chat", chat), POINTER_SK))

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
        return None if r is None else _to_pointer(r["Attributes"])

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
        fields = _pointer_item(new, "")
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
        return None if r is None else _to_pointer(r["Attributes"])

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
        self._call("put_item", Item=_grant_item(grant, ttl))  # an upsert: the same write again is the same row

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

    # --- Slack installations (issue 31): opaque records, no expiry -----------------------
    def put_installation(self, key: str, record: str) -> None:
        item: Item = {"pk": _s(_key("slack-install", key)), "sk": _s(INSTALL_SK), "record": _s(record)}
        self._flush_objects()
        self._call("put_item", Item=item)  # create or replace: idempotent, so a retry is harmless

    def get_installation(self, key: str) -> str | None:
        item = self._get(_key("slack-install", key), INSTALL_SK)
        return None if item is None else _get_s(item, "record")

    def delete_installation(self, key: str) -> bool:
        pk = _key("slack-install", key)
        return self._write("delete_item", pk, INSTALL_SK, None, "attribute_exists(#pk)") is not None

    # --- sessions -----------------------------------------------------------------------
    def put_session(self, chat: str, key: str, seq: float, ttl: float) -> bool:
        nonce = _nonce()
        item = _session_item(chat, key, seq, ttl, nonce)
        values = {":seq": _n(seq)}
        r = self._write(
            "put_item",
            _key("session", chat),
            SESSION_SK,
            nonce,
            _SESSION_COND,
            Item=item,
            ExpressionAttributeValues=values,
        )
        return r is not None

    def get_session(self, chat: str) -> str | None:
        item = self._get(_key("session", chat), SESSION_SK)
        return None if item is None else _get_s(item, "object_key")

    # --- audit ------------------------------------------------------------------------
    def append_audit(self, event: AuditEvent, ttl: float, outbox: Sequence[OutboxItem] = ()) -> None:
        nonce = _nonce()
        item = _audit_item(event, ttl, nonce)
        pk, sk = str(_get_s(item, "pk")), str(_get_s(item, "sk"))
        out = [_outbox_item(o, ttl, nonce) for o in outbox]
        if out and self._transactions and self._transact([item, *out], nonce):
            return
        for o in out:  # no transactions here: the outbox first (an event never lacks its items)
            self._write(
                "put_item", str(_get_s(o, "pk")), str(_get_s(o, "sk")), nonce, "attribute_not_exists(#pk)", Item=o
            )
        # the sort key is unique to this call, so a failed condition can only be our own retry
        self._write("put_item", pk, sk, nonce, "attribute_not_exists(#pk)", Item=item)

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
            _to_pointer(found.get(pointer_key)),
            tuple(self.list_grants(user, chat, now)),
            None if session is None else _get_s(session, "object_key"),
        )

    def claim_grants(self, w: ClaimWrite) -> Claimed | None:
        """The claim (its one conditional write), then the grant puts and the audit events in one
        BatchWriteItem (unconditional puts: a grant is an upsert, an event's sort key is new);
        a grant delete stays its own conditional call. Events with outbox items go one at a time
        (their items first), as append_audit writes them."""
        if any(a.outbox for a in [*w.before, *w.after, *(c.audit for c in w.changes)]):
            return super().claim_grants(w)
        won = self.claim(
            w.read, worker=w.worker, now=w.now, lease_until=w.lease_until, resume_deadline=w.resume_deadline
        )
        if won is None:
            return None
        nonce = _nonce()
        items = [_audit_item(a.event, a.ttl, nonce) for a in w.before]
        for c in w.changes:
            g = c.grant
            if not c.delete:
                items += [_grant_item(g, c.ttl), _audit_item(c.audit.event, c.audit.ttl, nonce)]
            elif self.delete_grant(g.user, g.chat, g.kind, g.name):
                items.append(_audit_item(c.audit.event, c.audit.ttl, nonce))
        items += [_audit_item(a.event, a.ttl, nonce) for a in w.after]
        self._batch_put(items)
        return Claimed(won, tuple(self.list_grants(won.owner, won.chat, w.now)))

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
                card = _card_item(pointer.chat, pointer.card_id, pointer.ttl)
                ops.append(self._put_op(card, _CARD_COND, {":chat": _s(pointer.chat)}))
                item = _pointer_item(pointer, nonce)
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

    def _take_lease(self, pk: str, holder: str, now: float, lease_until: float) -> bool:
        """Take (or renew) a named lease, one conditional write: only if nobody holds it, we do,
        or the holder's lapsed (the outbox's sinks and the timers)."""
        nonce = _nonce()
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
        r = self._write("put_item", pk, LEASE_SK, nonce, cond, Item=item, ExpressionAttributeValues=values)
        return r is not None

    # --- audit outbox -----------------------------------------------------------------
    def claim_outbox(self, sink: str, holder: str, now: float, lease_until: float, limit: int) -> list[OutboxItem]:
        if not self._take_lease(_key("outbox-lease", sink), holder, now, lease_until):
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

    # --- durable timers (issue 33) ----------------------------------------------------
    @staticmethod
    def _due_key(t: Timer) -> tuple[str, str]:
        return _key("timers-due", str(int(t.due_at // _DAY))), f"{t.due_at:017.3f}|{t.card_id}|{t.name}"

    def put_timers(self, timers: Sequence[Timer]) -> None:
        items = [self._timer_items(t) for t in timers]
        if not items:
            return
        # One TransactWriteItems for a new card's timers (its due-index entries and the timer items,
        # write-once): one request per card instead of two per timer. Cancelled when one exists
        # already (kept as it is, fired or not): then item by item, as without transactions.
        if self._transactions and len(items) <= 50:
            ops: list[dict[str, Any]] = []
            for index, item in items:
                ops.append({"Put": {"TableName": self.table, "Item": index}})
                ops.append(self._put_op(item, "attribute_not_exists(#pk)"))
            tx = self._transact_ops(ops, _nonce())
            if tx is not None and tx.applied:
                return
        for index, item in items:
            self._call("put_item", Item=index)  # the index first
            try:  # not _write: a timer names no object, so the step's pending objects need not flush first
                self._call("put_item", Item=item, ConditionExpression="attribute_not_exists(pk)")
            except ClientError as e:  # _call re-raises only a failed condition: it exists (kept as it is)
                if error_code(e) != "ConditionalCheckFailedException":
                    raise

    def _timer_items(self, t: Timer) -> tuple[Item, Item]:
        """A timer's due-index entry (found by due time) and its item (decides "fired once")."""
        pk, sk = self._due_key(t)
        fields = {"chat": _s(t.chat), "card_id": _s(t.card_id), "name": _s(t.name), "due_at": _n(t.due_at)}
        common = {"ttl": _ttl(t.ttl), "ttl_at": _n(t.ttl), **fields}
        index: Item = {"pk": _s(pk), "sk": _s(sk), **common}
        item: Item = {"pk": _s(_key("timer", t.card_id)), "sk": _s(t.name), **common}
        return index, item

    def claim_timers(self, holder: str, now: float, lease_until: float, since: float, limit: int) -> list[Timer]:
        if not self._take_lease(_key("timer-lease", "timers"), holder, now, lease_until):
            return []
        out: list[Timer] = []
        key = "#pk = :pk AND #sk BETWEEN :lo AND :hi"
        for day in range(int(max(since, 0) // _DAY), int(now // _DAY) + 1):
            page = self._query(
                KeyConditionExpression=key,
                ExpressionAttributeNames=_names(key),
                ExpressionAttributeValues={
                    ":pk": _s(_key("timers-due", str(day))),
                    ":lo": _s(f"{since:017.3f}"),
                    ":hi": _s(f"{now:017.3f}|~"),
                },
                ScanIndexForward=True,
                Limit=limit,
            )
            for i in page:
                out.append(
                    Timer(
                        chat=str(_get_s(i, "chat")),
                        card_id=str(_get_s(i, "card_id")),
                        name=str(_get_s(i, "name")),
                        due_at=float(_get_f(i, "due_at") or 0.0),
                        ttl=float(_get_f(i, "ttl_at") or 0.0),
                    )
                )
                if len(out) >= limit:
                    return out
        return out

    def fire_timer(self, timer: Timer, now: float) -> bool:
        cond = "attribute_exists(#pk) AND attribute_not_exists(#fired_at)"
        fired = self._write(
            "update_item",
            _key("timer", timer.card_id),
            timer.name,
            None,
            cond,
            UpdateExpression="SET #fired_at = :now",
            ExpressionAttributeValues={":now": _n(now)},
        )
        pk, sk = self._due_key(timer)
        self._call("delete_item", Key={"pk": _s(pk), "sk": _s(sk)})  # out of the due index, fired or stale
        return fired is not None

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
