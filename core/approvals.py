"""The facade every front end calls. Front ends never touch the store or the agent directly.

Thin: each call goes to one service built in `core.bootstrap`, the composition root, which
hands the facade its services; no service refers back here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import chat_approvals.core.observe.tracing as tracing
import chat_approvals.core.protocol.wording as wording
from chat_approvals.core.agent.strands_compat import carry_thread_context_if_recorded
from chat_approvals.core.ids import hash_secret, is_card_id, mint_secret, secret_matches
from chat_approvals.core.models import (
    Answer,
    ApprovalCard,
    AuditEvent,
    CardOffer,
    Clock,
    Grant,
    Refusal,
    ResumeResult,
    SubjectKind,
    TurnResult,
)
from chat_approvals.core.observe.metrics import Metrics
from chat_approvals.core.ports import InstallationRecords
from chat_approvals.core.protocol.events import Claimed, Subscriber
from chat_approvals.core.protocol.policy import ApproverCheck, Policy
from chat_approvals.core.protocol.timers import TimerFired, TimerRunner, longest_life
from chat_approvals.core.sandbox.egress.backend import GrantsBackend
from chat_approvals.core.services import Services
from chat_approvals.core.settings import Settings

log = logging.getLogger("chat_approvals.approvals")

READY_PROBE_CHAT = "\x7freadyz"  # a key no front end can name (DEL; not NUL, which PostgreSQL refuses)


class Approvals:
    """Built by the composition root (core/bootstrap.py), which hands it its services."""

    def __init__(
        self,
        services: Services,
        *,
        settings: Settings,
        clock: Clock,
        metrics: Metrics,
        worker_id: str,
        policy: Policy | None = None,
        approvers: ApproverCheck | None = None,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.metrics = metrics  # counted here, at the boundary (docs/operating.md)
        self.worker_id = worker_id
        self.policy = policy
        self.approvers = approvers
        self._rows, self._objects = services.rows, services.objects
        self.trail = services.trail
        self._grants = services.grants
        self._pauser = services.pauser
        self.turns = services.turns
        self.resumes = services.resumes
        # issue 33: the durable timers (reminders, escalation, expiry); the server's loop ticks them
        self.timers = TimerRunner(self._rows, self.trail, settings, clock, worker_id, self.resumes.deny_unanswered)

    @property
    def gate_backend(self) -> GrantsBackend:
        """What the egress gate asks (is a subject granted; record a refusal): the grant book."""
        return self._grants

    async def run_turn(
        self,
        *,
        chat: str,
        user: str,
        text: str,
        platform: str,
        unattended: bool = False,
        user_name: str | None = None,
    ) -> TurnResult:
        carry_thread_context_if_recorded()  # a tracer provider installed since: threads carry its context again
        with tracing.span("chat_approvals.turn") as span:
            span.set_attribute("chat_approvals.platform", platform)
            turn = await self.turns.run(
                chat=chat, user=user, text=text, platform=platform, unattended=unattended, user_name=user_name
            )
            span.set_attribute("chat_approvals.status", turn.status)
        self.metrics.inc(self.metrics.turns, platform, turn.status)
        card_id = None
        if turn.offer is not None:
            card_id = turn.offer.card.card_id
            kind = "reoffered" if turn.text == wording.REOFFERED else "new"
            self.metrics.inc(self.metrics.cards, platform, kind)
        extra = {"chat": chat, "platform": platform, "outcome": turn.status, "card_id": card_id}
        log.info("turn %s", turn.status, extra=extra)
        return turn

    async def record_card_location(self, *, chat: str, card_id: str, location: dict[str, str]) -> bool:
        return await self._rows.set_card_location(chat=chat, card_id=card_id, location=location)

    async def resume(
        self,
        *,
        card_id: str,
        user: str,
        secret: str,
        answer: Answer | None,
        platform: str | None = None,
    ) -> ResumeResult:
        """`platform` is the front end the click came through, for metrics and logs only (the
        protocol does not depend on it); without it, the card's platform where the click proved
        it knows the card."""
        started = time.perf_counter()
        carry_thread_context_if_recorded()
        with tracing.span("chat_approvals.resume") as span:
            # the resume service links this span to the paused turn's once it holds the claim
            res = await self.resumes.resume(card_id=card_id, user=user, secret=secret, answer=answer)
            known = res.card  # set only when the caller proved it knows the card's secret
            via = platform or (known.platform if known else "unknown")
            span.set_attribute("chat_approvals.platform", via)
            span.set_attribute("chat_approvals.outcome", res.outcome)
        m = self.metrics
        m.resume_seconds.observe(time.perf_counter() - started)
        m.inc(m.resumes, via, res.outcome)
        if res.result is not None and res.result.offer is not None:
            m.inc(m.cards, via, "chained" if res.outcome == "resumed" else "reoffered")
        where = {"chat": known.chat, "card_id": known.card_id} if known else {}
        log.info("resume %s", res.outcome, extra={"platform": via, "outcome": res.outcome, **where})
        return res

    async def reissue(self, *, chat: str, card_id: str) -> CardOffer | None:
        """The open card again with a fresh secret (R19: rotated, one conditional write), for a
        front end that shows it to more people (an escalation, issue 33) and re-renders every copy.
        None when the card is no longer answerable."""
        now = self.clock.now()
        p = await self._rows.pointer(chat=chat)
        if p is None or p.card_id != card_id:
            return None
        secret = mint_secret()
        if not await self._rows.rotate_secret(p, new_hash=hash_secret(secret), now=now):
            return None
        return CardOffer(card=p.card, secret=secret, votes=p.votes, replaces=p.card_location)

    def on_timer(self, subscriber: Subscriber[TimerFired]) -> Callable[[], None]:
        """Subscribe a front end to fired timers (reminders, escalation, expiry); returns the unsubscribe."""
        return self.timers.fired.subscribe(subscriber)

    async def fire_timers(self) -> int:
        """Fire the due timers, if this replica holds their lease (the server's timer loop)."""
        return await self.timers.tick()

    async def card_to_edit(self, *, card_id: str, secret: str) -> ApprovalCard | None:
        """The open card to show in an edit form (issue 32, Slack's modal): only with its secret,
        only while it is answerable; who may edit is checked when the edit is sent."""
        if not is_card_id(card_id):
            return None
        p = await self._rows.pointer_by_card(card_id)
        if p is None or not secret_matches(secret, p.secret_hash) or p.state not in ("pending", "claimed"):
            return None
        return p.card if p.expires_at > self.clock.now() else None

    def on_claimed(self, subscriber: Subscriber[Claimed]) -> Callable[[], None]:
        """Subscribe a front end to won claims (core/protocol/events.py); returns the unsubscribe."""
        return self.resumes.claimed.subscribe(subscriber)

    async def withdraw(self, *, chat: str, card_id: str, why: str) -> bool:
        """Take back a request whose card could not be shown (one conditional write: the card is
        expired unless it is being resumed or was answered). The chat is free for a new turn."""
        now = self.clock.now()
        if not await self._rows.expire(chat=chat, card_id=card_id, now=now):
            return False
        trail = self.trail
        await trail.record(
            trail.event(chat=chat, at=now, kind="withdrawn", actor="system", card_id=card_id, detail={"why": why})
        )
        return True

    async def grants(self, *, user: str, chat: str | None = None) -> list[Grant]:
        return await self._grants.live(user, chat)

    async def revoke(self, *, user: str, chat: str | None, subject: str) -> list[Grant]:
        return await self._grants.revoke(user, chat, subject)

    async def is_allowed(
        self, *, user: str, chat: str, kind: SubjectKind, name: str, turn_id: str | None = None
    ) -> bool:
        return await self._grants.is_allowed(user=user, chat=chat, kind=kind, name=name, turn_id=turn_id)

    async def probe(self) -> None:
        """One cheap read of the store (readiness): raises what the store raises."""
        await self._rows.pointer(chat=READY_PROBE_CHAT)

    async def audit(self, chat: str) -> list[AuditEvent]:
        return await self._rows.audit(chat=chat)

    async def audit_since(self, since: float) -> list[AuditEvent]:
        """Every chat's events from `since` on (an export)."""
        return await self._rows.audit_since(since=since)

    async def first_delivery(self, key: str, *, keep: float | None = None) -> bool:
        """True once per `key` while it is kept (`keep` seconds; default the event-dedupe TTL)."""
        now = self.clock.now()
        return await self._rows.claim_event(key, now=now, ttl=now + (keep or self.settings.event_dedupe_ttl))

    @property
    def installations(self) -> InstallationRecords:
        """The Slack installations' records (issue 31): opaque strings by key, kept in this store."""
        return self._rows

    async def record_refusal(self, refusal: Refusal) -> bool:
        return await self._grants.record_refusal(refusal)

    async def refusals(self, chat: str, turn_id: str) -> list[Refusal]:
        return await self._grants.refusals(chat, turn_id)

    def sweep_horizon(self) -> float:
        """Objects (and kept run results) older than this are past every card's life and resume."""
        life = longest_life(self.policy, self.settings)  # a policy's cards may live longer than card_expiry
        return self.clock.now() - (life + self.settings.resume_deadline + self.settings.retention)

    async def sweep(self) -> int:
        rows = await self._rows.sweep(now=self.clock.now())
        return rows + await self._objects.sweep(older_than=self.sweep_horizon())
