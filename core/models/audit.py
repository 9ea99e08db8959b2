"""The audit trail's shapes: an event, its outbox items, and the two written together."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, model_validator

from chat_approvals.core.models.base import Strict, StrictShape
from chat_approvals.core.text import scalar_json

AuditKind = Literal[
    "card_created",
    "claim_won",
    "claim_lost",
    "answered",
    "replayed",
    "expired",
    "grant",
    "revoke",
    "refused",
    "turn",
    "reoffered",
    "withdrawn",
    "vote",
    "refused_answer",
    "card.reminder",  # issue 33: a reminder went to those who have not answered
    "card.escalated",  # issue 33: the card went to the escalation approvers
]


class AuditEvent(StrictShape):
    chat: str
    at: float
    kind: AuditKind
    actor: str
    card_id: str | None = None
    detail: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _readable(cls, data: Any) -> Any:
        """The trail stays readable (R20): a lone surrogate an older version stored reads as U+FFFD.
        One walk over the whole input makes every string it holds valid text, so the event needs
        no check per field after it (Strict's): StrictShape (issue 34)."""
        return scalar_json(data)


class OutboxItem(Strict):
    """One audit event waiting to be delivered to one audit sink (a webhook), written in the same
    write as the event itself. `id` is stable across retries (receivers dedupe by it) and sorts in
    append order; `body` is the exact JSON that is sent (and signed)."""

    sink: str
    id: str
    chat: str
    body: str


@dataclass(frozen=True)
class AuditWrite:
    """An audit event written with the state change it records (store/base.py's compound steps):
    its physical expiry and its outbox items (built in core/protocol/audit.py, one per sink)."""

    event: AuditEvent
    ttl: float
    outbox: tuple[OutboxItem, ...] = ()
