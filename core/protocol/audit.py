"""The one audit path: every audit event the core writes is built here, with its physical expiry
and its outbox items (one per audit webhook: the exact JSON that is sent and signed), and is
written by a unit of work (core/ports.py `Steps`), alone or with the state change it records.
After a write that carried outbox items, the webhook senders are nudged (`on_outbox`).

Outbox ids sort in append order, which keeps delivery in order per chat: build a step's events
in the order it writes them.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from chat_approvals.core.models import (
    ApprovalCard,
    AuditEvent,
    AuditKind,
    AuditWrite,
    CardItem,
    Grant,
    OutboxItem,
    Pointer,
)
from chat_approvals.core.ports import Steps

log = logging.getLogger(__name__)


class EventIds:
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


EVENT_IDS = EventIds()


def event_body(event_id: str, event: AuditEvent) -> str:
    """The webhook body: the audit event with its stable id, compact JSON (signed as sent)."""
    doc = {"id": event_id, **json.loads(event.model_dump_json())}
    return json.dumps(doc, separators=(",", ":"), sort_keys=True)


def card_created_detail(card: ApprovalCard, chained_from: str | None) -> dict[str, Any]:
    """What the trail keeps of a new card: its subjects, and the rule the policy fixed on it."""
    return {
        "kind": card.kind,
        "sites": card.sites,
        "packages": card.packages,
        **({"tool": card.tool.name, "fingerprint": card.tool.fingerprint} if card.tool else {}),
        **({"question": card.question.name} if card.question else {}),
        **({"items": [_item(i) for i in card.items]} if card.items else {}),
        "chained_from": chained_from,
        **({"policy": card.policy.model_dump()} if card.policy is not None else {}),
    }


def _item(item: CardItem) -> dict[str, Any]:
    """One item of a batch card, as the trail keeps it: its id, kind and call or question."""
    out: dict[str, Any] = {"item": item.item_id, "kind": item.kind}
    if item.tool is not None:
        out.update(tool=item.tool.name, fingerprint=item.tool.fingerprint)
    if item.question is not None:
        out["question"] = item.question.name
    return out


class AuditTrail:
    """Builds every audit event with its outbox items and writes the lone ones; `sinks` are the
    audit webhooks' ids (a webhook named twice is one sink)."""

    def __init__(self, steps: Steps, *, retention: float, sinks: Sequence[str] = (), ids: EventIds = EVENT_IDS):
        self._steps = steps
        self.retention = retention
        self.sinks = list(dict.fromkeys(sinks))
        self._ids = ids
        self.on_outbox: Callable[[], None] | None = None  # the webhook senders' nudge, if any

    # --- building ---------------------------------------------------------------------
    def event(
        self, *, chat: str, at: float, kind: AuditKind, actor: str, card_id: str | None, detail: dict[str, Any]
    ) -> AuditWrite:
        """One event as it is written: expiring `retention` after it happened, one outbox item a sink."""
        event = AuditEvent(chat=chat, at=at, kind=kind, actor=actor, card_id=card_id, detail=detail)
        outbox: tuple[OutboxItem, ...] = ()
        if self.sinks:
            event_id = self._ids.next()
            body = event_body(event_id, event)
            outbox = tuple(OutboxItem(sink=s, id=event_id, chat=chat, body=body) for s in self.sinks)
        return AuditWrite(event, at + self.retention, outbox)

    def on_card(self, p: Pointer, kind: AuditKind, actor: str, at: float, detail: dict[str, Any]) -> AuditWrite:
        """An event about a stored card."""
        return self.event(chat=p.chat, at=at, kind=kind, actor=actor, card_id=p.card_id, detail=detail)

    def card_created(self, card: ApprovalCard, *, at: float, chained_from: str | None) -> AuditWrite:
        return self.event(
            chat=card.chat,
            at=at,
            kind="card_created",
            actor=card.owner,
            card_id=card.card_id,
            detail=card_created_detail(card, chained_from),
        )

    def grant(self, g: Grant, *, at: float, actor: str, revoke: bool) -> AuditWrite:
        """A grant written or taken back (R14)."""
        kind: AuditKind = "revoke" if revoke else "grant"
        detail = {"kind": g.kind, "name": g.name}
        return self.event(chat=g.chat, at=at, kind=kind, actor=actor, card_id=g.card_id, detail=detail)

    # --- writing ----------------------------------------------------------------------
    async def append(self, write: AuditWrite) -> None:
        """One event on its own (a fault is raised)."""
        await self._steps.audit(write)
        self.written([write])

    async def record(self, write: AuditWrite) -> None:
        """One event on its own, best effort: the audit trail never blocks the protocol."""
        try:
            await self.append(write)
        except Exception as e:
            log.warning("audit append failed: %s", e)

    def written(self, writes: Iterable[AuditWrite]) -> None:
        """`writes` were written (alone or with a state change): nudge the webhook senders."""
        if self.on_outbox is not None and any(w.outbox for w in writes):
            self.on_outbox()
