"""R7 and R13: turning a paused run into a durable, posted card.

Order: snapshot (confirmed PUT) -> pointer (conditional) -> card. If the snapshot cannot be
written or is too large, or the pointer's condition fails, no card is offered and the turn
ends with an ordinary message: the worst case is a missing offer, never a broken one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from strands import Agent
from strands.agent.agent_result import AgentResult

import chat_approvals.core.observe.tracing as tracing
import chat_approvals.core.protocol.wording as wording
from chat_approvals.core.agent.context import RequestContext
from chat_approvals.core.agent.paused_agents import PausedAgents
from chat_approvals.core.agent.snapshots import agent_bytes
from chat_approvals.core.ids import hash_secret, mint_card_id, mint_secret
from chat_approvals.core.models import (
    ApprovalCard,
    CardOffer,
    Clock,
    Fence,
    ObjectRef,
    Pointer,
    StoreUnavailable,
    TurnResult,
)
from chat_approvals.core.ports import Offer, Rows, Steps
from chat_approvals.core.protocol.audit import AuditTrail
from chat_approvals.core.protocol.card_kinds import Batch, Draft, Several, Unreadable, batch_items, draft_of
from chat_approvals.core.protocol.edge_wording import POINTER_NOT_SAVED
from chat_approvals.core.protocol.policy import Policy
from chat_approvals.core.protocol.timers import card_life, card_timers
from chat_approvals.core.settings import Settings
from chat_approvals.core.text import scalar_text

log = logging.getLogger(__name__)


class ClaimLost(Exception):
    """The worker no longer holds the claim: its result must not be written."""


@dataclass
class TurnHold:
    """The chat's turn lease a turn holds; `ended` once a step's write released it."""

    chat: str
    holder: str
    ended: bool = False


def final_text(result: AgentResult) -> str:
    content = (result.message or {}).get("content", [])
    text = "\n".join(b["text"] for b in content if isinstance(b, dict) and "text" in b).strip()
    return scalar_text(text)  # R20: a reply holding a lone surrogate must not fail the write after a claim


def snapshot_bytes(agent: Agent, app_data: dict[str, Any]) -> bytes:
    return agent_bytes(agent, preset="session", app_data=app_data)


def tool_schema(agent: Agent, name: str) -> dict[str, Any] | None:
    """The tool's own input schema, from its Strands spec (`inputSchema.json`), or None."""
    try:
        spec = agent.tool_registry.get_all_tools_config().get(name) or {}
    except Exception as e:  # a registry we cannot read: no edits, never a failed pause
        log.warning("tool specs unreadable: %s", e)
        return None
    schema = (spec.get("inputSchema") or {}).get("json")
    return schema if isinstance(schema, dict) else None


def with_edits(card: ApprovalCard, agent: Agent) -> ApprovalCard:
    """Approve with edits (issue 32) only on a tool card whose policy allows it and whose whole
    input and schema are known; the card then keeps the schema the edit is checked against."""
    policy = card.policy
    if policy is None or not policy.edits:
        return card
    if card.kind == "batch":  # each tool item keeps its schema (an item may be approved with edits)
        if policy.quorum > 1:
            return card.model_copy(update={"policy": policy.model_copy(update={"edits": False})})
        items = [
            i.model_copy(update={"tool": i.tool.model_copy(update={"input_schema": tool_schema(agent, i.tool.name)})})
            if i.tool is not None and not i.tool.truncated
            else i
            for i in card.items
        ]
        return card.model_copy(update={"items": items})
    schema = tool_schema(agent, card.tool.name) if card.kind == "tool" and card.tool is not None else None
    if card.tool is None or card.tool.truncated or schema is None or policy.quorum > 1:
        return card.model_copy(update={"policy": policy.model_copy(update={"edits": False})})
    return card.model_copy(update={"tool": card.tool.model_copy(update={"input_schema": schema})})


class Pauser:
    def __init__(
        self,
        rows: Rows,
        steps: Steps,
        trail: AuditTrail,
        settings: Settings,
        clock: Clock,
        policy: Policy | None = None,
        paused: PausedAgents | None = None,
    ) -> None:
        self.paused = paused if paused is not None else PausedAgents(0)
        self.rows = rows
        self.steps = steps
        self.trail = trail
        self.settings = settings
        self.clock = clock
        self.policy = policy  # None: no policy file, today's behaviour (only the owner, fixed grant TTL)

    async def offer(
        self,
        agent: Agent,
        result: AgentResult,
        ctx: RequestContext,
        holding: Fence | None = None,
        turn: TurnHold | None = None,
    ) -> TurnResult:
        """`holding`: a resumed run paused again, its card chained (R13). `turn`: the turn lease
        the pointer write also releases (one write ends the turn)."""
        draft = draft_of(list(result.interrupts or []))
        if isinstance(draft, Several):
            # Not offered half-way (issue 14): say so plainly; nothing is written.
            log.warning("paused on several interrupts at once: %s", list(draft.names))
            return TurnResult(status="answered", text=wording.CANNOT_ANSWER_SEVERAL)
        if isinstance(draft, Unreadable):
            log.warning("paused on an interrupt we cannot read: %s", draft.name)
            return TurnResult(status="answered", text=wording.SNAPSHOT_FAILED)
        now = self.clock.now()
        card_id = mint_card_id()
        items = batch_items(card_id, draft) if isinstance(draft, Batch) else []
        if isinstance(draft, Batch):  # one card for every interrupt of the step (issue 32)
            first = draft.items[0]
            draft = Draft(
                kind="batch",
                interrupt_id=first.interrupt_id,
                tool_use_id=first.tool_use_id,
                reason=f"answer {len(items)} requests",
            )
        card = ApprovalCard(
            card_id=card_id,
            chat=ctx.chat,
            owner=ctx.user,
            platform=ctx.platform,
            reason=draft.reason,
            sites=list(draft.sites),
            urls=list(draft.urls),
            packages=list(draft.packages),
            created_at=now,
            expires_at=now + self.settings.card_expiry,
            kind=draft.kind,
            tool=draft.tool,
            question=draft.question,
            items=items,
            owner_name=ctx.user_name,
            grant_seconds=self.settings.grant_ttl,
        )
        if self.policy is not None:  # the strictest rule over the card's subjects, fixed on the card
            decided = self.policy.decide(card.subjects(), self.settings.grant_ttl, card.platform)
            card = card.model_copy(update={"policy": decided})
            card = card.model_copy(update={"expires_at": now + card_life(card, self.settings)})  # issue 33
            card = with_edits(card, agent)
        secret = mint_secret()
        try:
            data = snapshot_bytes(agent, {"turn_id": ctx.turn_id, "chat": ctx.chat, "card_id": card.card_id})
        except (TypeError, ValueError) as e:
            log.warning("snapshot failed: %s", e)
            return TurnResult(status="answered", text=wording.SNAPSHOT_FAILED)
        if len(data) > self.settings.max_snapshot_bytes:
            log.warning("snapshot too large: %d bytes", len(data))
            return TurnResult(status="answered", text=wording.SNAPSHOT_FAILED)
        secret_hash = hash_secret(secret)
        trace_context = tracing.current_context()  # the resume's span links to this turn's

        def pointer_at(ref: ObjectRef) -> Pointer:
            return Pointer(
                chat=ctx.chat,
                card_id=card.card_id,
                secret_hash=secret_hash,
                owner=ctx.user,
                state="pending",
                expires_at=card.expires_at,
                ttl=card.expires_at + self.settings.resume_deadline + self.settings.retention,
                snapshot=ref,
                card=card,
                sdk_interrupt_id=draft.interrupt_id,
                tool_use_id=draft.tool_use_id,
                turn_id=ctx.turn_id,
                created_at=now,
                trace_context=trace_context,
                agent=self.settings.agent_name,
            )

        ttl = card.expires_at + self.settings.resume_deadline + self.settings.retention
        audit = [self.trail.card_created(card, at=now, chained_from=holding.card_id if holding else None)]
        done = await self.steps.offer(
            Offer(
                key=f"snapshots/{card.card_id}.json",
                data=data,
                pointer=pointer_at,
                now=now,
                audit=audit,
                turn=(turn.chat, turn.holder) if turn is not None else None,
                holding=holding,
                timers=card_timers(card, ttl),  # issue 33: in the same step (one commit on SQLite)
            )
        )
        if turn is not None and done.failed_at is None:
            turn.ended = True  # the pointer write ended the turn, written or not
        if done.failed_at == "snapshot":
            log.warning("snapshot PUT failed: %s", done.error)
            return TurnResult(status="answered", text=wording.SNAPSHOT_FAILED)
        if done.failed_at == "pointer":
            if holding is not None and isinstance(done.error, StoreUnavailable):
                raise done.error  # a store fault while writing a chained card is a store fault, not a lost claim
            log.warning("pointer write failed: %s", done.error)
        if not done.written:
            if holding is not None:
                raise ClaimLost(holding.card_id)
            if done.error is not None:  # the write failed, not lost to another open card
                return TurnResult(status="answered", text=POINTER_NOT_SAVED)
            return TurnResult(status="answered", text=wording.CANNOT_OFFER)
        self.trail.written(audit)
        self.paused.put(card.card_id, agent, data)  # this process may resume it without the store
        return TurnResult(
            status="awaiting_approval", text=final_text(result), offer=CardOffer(card=card, secret=secret)
        )
