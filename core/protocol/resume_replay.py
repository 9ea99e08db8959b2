"""After the answer: a click on a card that is done replays its stored answer byte for byte, and
a click on a card a chained card replaced re-offers that chained card with a fresh secret (R19)."""

from __future__ import annotations

from typing import Any, Protocol

from chat_approvals.core.ids import hash_secret, mint_secret, secret_matches
from chat_approvals.core.models import AnswerRecord, AuditKind, CardOffer, Clock, Pointer, ResumeResult, TurnResult
from chat_approvals.core.ports import Objects, Rows
from chat_approvals.core.protocol.policy import ApproverCheck
from chat_approvals.core.protocol.resume_checks import EXPIRED, UNKNOWN, expired, who_may_answer
from chat_approvals.core.protocol.turns import is_answerable


class Audit(Protocol):
    """Record one audit event about a card (the resume service's, written through the trail)."""

    async def __call__(self, p: Pointer, kind: AuditKind, actor: str, at: float, detail: dict[str, Any]) -> None: ...


class Replays:
    def __init__(self, *, rows: Rows, objects: Objects, clock: Clock, approvers: ApproverCheck, audit: Audit) -> None:
        self.rows = rows
        self.objects = objects
        self.clock = clock
        self.approvers = approvers
        self.audit = audit

    async def replay(self, p: Pointer, key: str | None) -> ResumeResult:
        raw = await self.objects.get_key(key) if key else None
        if raw is None:
            return expired(p, EXPIRED)
        doc = AnswerRecord.model_validate_json(raw)
        await self.audit(p, "replayed", doc.answered_by, self.clock.now(), {})
        return self.from_doc(doc, p.card_location)

    @staticmethod
    def from_doc(doc: AnswerRecord, location: dict[str, str] | None) -> ResumeResult:
        return ResumeResult(
            outcome="replayed",
            result=TurnResult.model_validate_json(doc.result_json),
            result_json=doc.result_json,
            answer=doc.answer,
            answered_by=doc.answered_by,
            answered_at=doc.answered_at,
            owner=doc.owner,
            card=doc.card,
            card_location=location,
        )

    async def answered_elsewhere(self, card_id: str, user: str, secret: str) -> ResumeResult:
        """A card that is no longer the chat's current one: replaced by a chained card."""
        raw = await self.objects.get_key(f"answers/{card_id}.json")
        if raw is None:
            return ResumeResult(outcome="unknown", message=UNKNOWN)
        doc = AnswerRecord.model_validate_json(raw)
        if not secret_matches(secret, doc.secret_hash):
            return ResumeResult(outcome="unknown", message=UNKNOWN)
        refused = await who_may_answer(self.approvers, doc.card, doc.owner, user)
        if refused is not None:
            return refused.model_copy(update={"card": None})
        res = self.from_doc(doc, None)
        offer = await self.reoffer(doc.chained_card_id) if doc.chained_card_id is not None else None
        if offer is None or res.result is None:
            return res  # the chained card was answered or is gone: the stored result as it is
        result = res.result.model_copy(update={"offer": offer})
        return res.model_copy(update={"result": result, "result_json": result.model_dump_json()})

    async def reoffer(self, card_id: str) -> CardOffer | None:
        """R19: the chained card's secret was never stored; give its owner a new one (one
        conditional write; the secret handed out before stops working)."""
        now = self.clock.now()
        p = await self.rows.pointer_by_card(card_id)
        if p is None or not is_answerable(p, now):
            return None
        secret = mint_secret()
        if not await self.rows.rotate_secret(p, new_hash=hash_secret(secret), now=now):
            return None
        await self.audit(p, "reoffered", p.owner, now, {"via": "replay"})
        return CardOffer(card=p.card, secret=secret, votes=p.votes, replaces=p.card_location)
