"""The store as the server uses it: every call timed and its faults counted, claims counted
won or lost, this process's open cards tracked, and every audit event given its outbox items
(one per audit webhook) in the same write (see store/base.py `append_audit`).

A plain delegating wrapper under whatever calls the store, so the core does not change for it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from chat_approvals.core.metrics import Metrics
from chat_approvals.core.models import (
    AuditEvent,
    AuditWrite,
    Claimed,
    ClaimRead,
    Fence,
    Grant,
    GrantChange,
    ObjectRef,
    OutboxItem,
    Pointer,
    Refusal,
    SessionWrite,
    SubjectKind,
    TurnStart,
    Vote,
)
from chat_approvals.store.base import ObjectStore, RowStore

T = TypeVar("T")

_BACKENDS = {"SqliteRows": "sqlite", "DynamoRows": "dynamodb", "FileObjects": "files", "S3Objects": "s3"}


def backend_name(store: object) -> str:
    name = type(store).__name__
    return _BACKENDS.get(name, name.lower())


class _EventIds:
    """Outbox ids: wall-clock nanoseconds, strictly increasing in this process (a restarted
    process starts after its predecessor's ids), with a random tail so replicas never collide.
    They sort in append order, which is what keeps delivery in order per chat."""

    def __init__(self) -> None:
        self._last = 0
        self._lock = threading.Lock()

    def next(self) -> str:
        with self._lock:
            self._last = max(self._last + 1, time.time_ns())
            return f"{self._last:020d}-{secrets.token_hex(6)}"


EVENT_IDS = _EventIds()


def event_body(event_id: str, event: AuditEvent) -> str:
    """The webhook body: the audit event with its stable id, compact JSON (signed as sent)."""
    doc = {"id": event_id, **json.loads(event.model_dump_json())}
    return json.dumps(doc, separators=(",", ":"), sort_keys=True)


class _Timed:
    def __init__(self, metrics: Metrics, backend: str) -> None:
        self._m = metrics
        self._backend = backend
        self._hist: dict[str, Any] = {}  # op -> its labelled histogram (labels() is the costly part)

    def _timed(self, op: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        except Exception:
            self._m.store_faults.labels(self._backend, op).inc()
            raise
        finally:
            hist = self._hist.get(op)
            if hist is None:
                hist = self._hist[op] = self._m.store_seconds.labels(self._backend, op)
            hist.observe(time.perf_counter() - start)


class ObservedRows(_Timed, RowStore):
    def __init__(
        self,
        rows: RowStore,
        metrics: Metrics,
        sinks: Sequence[str] = (),
        on_outbox: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(metrics, backend_name(rows))
        self.inner = rows
        self.local_reads = rows.local_reads
        self.sinks = list(dict.fromkeys(sinks))  # a webhook named twice is one sink
        self.on_outbox = on_outbox

    # --- pointers ----------------------------------------------------------------------
    def put_pointer(self, pointer: Pointer, now: float) -> bool:
        ok = self._timed("put_pointer", self.inner.put_pointer, pointer, now)
        if ok:
            self._m.open.add(pointer.card_id, pointer.expires_at)
        return ok

    def get_pointer(self, chat: str) -> Pointer | None:
        return self._timed("get_pointer", self.inner.get_pointer, chat)

    def get_pointer_by_card(self, card_id: str) -> Pointer | None:
        return self._timed("get_pointer_by_card", self.inner.get_pointer_by_card, card_id)

    def claim(
        self, read: ClaimRead, *, worker: str, now: float, lease_until: float, resume_deadline: float
    ) -> Pointer | None:
        won = self._timed(
            "claim",
            self.inner.claim,
            read,
            worker=worker,
            now=now,
            lease_until=lease_until,
            resume_deadline=resume_deadline,
        )
        self._m.claims.labels("won" if won is not None else "lost").inc()
        return won

    def renew(self, fence: Fence, *, now: float, lease_until: float) -> bool:
        return self._timed("renew", self.inner.renew, fence, now=now, lease_until=lease_until)

    def finish(self, fence: Fence, *, answer_key: str, session: SessionWrite | None = None) -> bool:
        ok = self._timed("finish", self.inner.finish, fence, answer_key=answer_key, session=session)
        if ok:
            self._m.open.discard(fence.card_id)
        return ok

    def replace(self, fence: Fence, *, new: Pointer) -> bool:
        ok = self._timed("replace", self.inner.replace, fence, new=new)
        if ok:
            self._m.open.discard(fence.card_id)
            self._m.open.add(new.card_id, new.expires_at)
        return ok

    def expire(self, chat: str, card_id: str, now: float, answer_key: str | None = None) -> bool:
        ok = self._timed("expire", self.inner.expire, chat, card_id, now, answer_key)
        if ok:
            self._m.open.discard(card_id)
        return ok

    def vote(self, *, chat: str, card_id: str, secret_hash: str, vote: Vote, now: float) -> Pointer | None:
        return self._timed(
            "vote", self.inner.vote, chat=chat, card_id=card_id, secret_hash=secret_hash, vote=vote, now=now
        )

    def set_card_location(self, chat: str, card_id: str, location: dict[str, str]) -> bool:
        return self._timed("set_card_location", self.inner.set_card_location, chat, card_id, location)

    def rotate_secret(self, chat: str, card_id: str, old_hash: str, new_hash: str, now: float) -> bool:
        return self._timed("rotate_secret", self.inner.rotate_secret, chat, card_id, old_hash, new_hash, now)

    # --- turn lease --------------------------------------------------------------------
    def take_turn(self, chat: str, holder: str, now: float, lease_until: float) -> bool:
        return self._timed("take_turn", self.inner.take_turn, chat, holder, now, lease_until)

    def renew_turn(self, chat: str, holder: str, now: float, lease_until: float) -> bool:
        return self._timed("renew_turn", self.inner.renew_turn, chat, holder, now, lease_until)

    def release_turn(self, chat: str, holder: str) -> bool:
        return self._timed("release_turn", self.inner.release_turn, chat, holder)

    # --- grants, refusals, dedupe ------------------------------------------------------
    def put_grant(self, grant: Grant, ttl: float) -> None:
        self._timed("put_grant", self.inner.put_grant, grant, ttl)

    def list_grants(self, user: str, chat: str | None, now: float) -> list[Grant]:
        return self._timed("list_grants", self.inner.list_grants, user, chat, now)

    def delete_grant(self, user: str, chat: str, kind: SubjectKind, name: str) -> bool:
        return self._timed("delete_grant", self.inner.delete_grant, user, chat, kind, name)

    def record_refusal(self, refusal: Refusal, ttl: float) -> bool:
        return self._timed("record_refusal", self.inner.record_refusal, refusal, ttl)

    def list_refusals(self, chat: str, turn_id: str) -> list[Refusal]:
        return self._timed("list_refusals", self.inner.list_refusals, chat, turn_id)

    def claim_event(self, key: str, now: float, ttl: float) -> bool:
        return self._timed("claim_event", self.inner.claim_event, key, now, ttl)

    # --- audit and its outbox ----------------------------------------------------------
    def append_audit(self, event: AuditEvent, ttl: float, outbox: Sequence[OutboxItem] = ()) -> None:
        items = list(outbox)
        if self.sinks and not items:
            event_id = EVENT_IDS.next()
            body = event_body(event_id, event)
            items = [OutboxItem(sink=s, id=event_id, chat=event.chat, body=body) for s in self.sinks]
        self._timed("append_audit", self.inner.append_audit, event, ttl, items)
        if items and self.on_outbox is not None:
            self.on_outbox()

    def list_audit(self, chat: str) -> list[AuditEvent]:
        return self._timed("list_audit", self.inner.list_audit, chat)

    def list_audit_since(self, since: float) -> list[AuditEvent]:
        return self._timed("list_audit_since", self.inner.list_audit_since, since)

    def claim_outbox(self, sink: str, holder: str, now: float, lease_until: float, limit: int) -> list[OutboxItem]:
        return self._timed("claim_outbox", self.inner.claim_outbox, sink, holder, now, lease_until, limit)

    def delete_outbox(self, sink: str, item_id: str) -> bool:
        return self._timed("delete_outbox", self.inner.delete_outbox, sink, item_id)

    # --- compound steps: each audit event gets its outbox items as append_audit's do ------
    def _outboxed(self, audit: Sequence[AuditWrite]) -> list[AuditWrite]:
        if not self.sinks:
            return list(audit)
        out = []
        for a in audit:
            if not a.outbox:
                event_id = EVENT_IDS.next()
                body = event_body(event_id, a.event)
                items = tuple(OutboxItem(sink=s, id=event_id, chat=a.event.chat, body=body) for s in self.sinks)
                a = dataclasses.replace(a, outbox=items)
            out.append(a)
        return out

    def _notify(self, audit: Sequence[AuditWrite]) -> None:
        if self.on_outbox is not None and any(a.outbox for a in audit):
            self.on_outbox()

    def atomic(self) -> contextlib.AbstractContextManager[object]:
        return self.inner.atomic()

    def begin_turn(self, chat: str, holder: str, user: str, now: float, lease_until: float) -> TurnStart:
        return self._timed("begin_turn", self.inner.begin_turn, chat, holder, user, now, lease_until)

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
        audit = self._outboxed(audit)
        ok = self._timed(
            "end_turn", self.inner.end_turn, chat, holder, now=now, pointer=pointer, audit=audit, session=session
        )
        if ok and pointer is not None:
            self._m.open.add(pointer.card_id, pointer.expires_at)
            self._notify(audit)
        return ok

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
        # outbox ids sort in append order: fill them in the order the events are written
        before = self._outboxed(before)
        changes = [dataclasses.replace(c, audit=self._outboxed([c.audit])[0]) for c in changes]
        after = self._outboxed(after)
        won = self._timed(
            "claim_grants",
            self.inner.claim_grants,
            read,
            worker=worker,
            now=now,
            lease_until=lease_until,
            resume_deadline=resume_deadline,
            changes=changes,
            before=before,
            after=after,
        )
        self._m.claims.labels("won" if won is not None else "lost").inc()
        if won is not None:
            self._notify([*before, *after, *(c.audit for c in changes)])
        return won

    # --- history, sweep ----------------------------------------------------------------
    def put_session(self, chat: str, key: str, seq: float, ttl: float) -> bool:
        return self._timed("put_session", self.inner.put_session, chat, key, seq, ttl)

    def get_session(self, chat: str) -> str | None:
        return self._timed("get_session", self.inner.get_session, chat)

    def sweep(self, now: float) -> int:
        return self._timed("sweep", self.inner.sweep, now)

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:  # backend extras a test may reach for (e.g. `client`)
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)


class ObservedObjects(_Timed, ObjectStore):
    def __init__(self, objects: ObjectStore, metrics: Metrics) -> None:
        super().__init__(metrics, backend_name(objects))
        self.inner = objects

    def put(self, key: str, data: bytes) -> ObjectRef:
        return self._timed("put", self.inner.put, key, data)

    def get(self, ref: ObjectRef) -> bytes:
        return self._timed("get", self.inner.get, ref)

    def get_key(self, key: str) -> bytes | None:
        return self._timed("get_key", self.inner.get_key, key)

    def sweep(self, older_than: float) -> int:
        return self._timed("sweep", self.inner.sweep, older_than)

    def __getattr__(self, name: str) -> Any:  # backend extras a test may reach for (e.g. `root`)
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)
