"""The facade every front end calls. Front ends never touch the store or the agent directly."""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid

from core import tracing, wording
from core.agent_factory import AgentFactory, default_factory
from core.clock import Clock, SystemClock
from core.grants import GrantBook
from core.history import History
from core.lease import LeaseKeeper
from core.metrics import Metrics
from core.models import Answer, AuditEvent, Grant, Pointer, Refusal, ResumeResult, SubjectKind, TurnResult
from core.pause import Pauser
from core.resume import OnClaimed, ResumeService
from core.settings import Settings
from core.turns import TurnRunner
from store.aio import StoreIO

log = logging.getLogger("chat_approvals.approvals")


class Approvals:
    def __init__(
        self,
        store: StoreIO,
        *,
        settings: Settings | None = None,
        clock: Clock | None = None,
        agent_factory: AgentFactory | None = None,
        worker_id: str | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.store = store
        self.settings = settings or Settings()
        self.clock = clock or SystemClock()
        self.metrics = metrics or Metrics(self.clock.now)
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        factory = agent_factory or default_factory()
        self.keeper = LeaseKeeper(self.settings.heartbeat_every)  # renews claims and turn leases
        self.pauser = Pauser(store, self.settings, self.clock)
        self.history = History(store, self.settings, self.clock)
        self.grant_book = GrantBook(self)
        self.turns = TurnRunner(self, factory, self.pauser)
        self.resumes = ResumeService(self, factory, self.pauser, self.worker_id)

    async def run_turn(self, *, chat: str, user: str, text: str, platform: str, unattended: bool = False) -> TurnResult:
        with tracing.tracer().start_as_current_span("chat_approvals.turn") as span:
            span.set_attribute("chat_approvals.platform", platform)
            turn = await self.turns.run(chat=chat, user=user, text=text, platform=platform, unattended=unattended)
            span.set_attribute("chat_approvals.status", turn.status)
        self.metrics.turns.labels(platform, turn.status).inc()
        card_id = None
        if turn.offer is not None:
            card_id = turn.offer.card.card_id
            kind = "reoffered" if turn.text == wording.REOFFERED else "new"
            self.metrics.cards.labels(platform, kind).inc()
        extra = {"chat": chat, "platform": platform, "outcome": turn.status, "card_id": card_id}
        log.info("turn %s", turn.status, extra=extra)
        return turn

    async def record_card_location(self, *, chat: str, card_id: str, location: dict[str, str]) -> bool:
        return await self.store.run(self.store.rows.set_card_location, chat, card_id, location)

    async def resume(
        self,
        *,
        card_id: str,
        user: str,
        secret: str,
        answer: Answer | None,
        platform: str,
        on_claimed: OnClaimed | None = None,
    ) -> ResumeResult:
        started = time.perf_counter()
        with tracing.tracer().start_as_current_span("chat_approvals.resume") as span:
            span.set_attribute("chat_approvals.platform", platform)

            async def claimed(p: Pointer) -> None:
                # The run resumed here continues the turn that paused: link this span to it.
                tracing.add_link(span, p.trace_context)
                if on_claimed is not None:
                    await on_claimed(p)

            res = await self.resumes.resume(
                card_id=card_id, user=user, secret=secret, answer=answer, platform=platform, on_claimed=claimed
            )
            span.set_attribute("chat_approvals.outcome", res.outcome)
        m = self.metrics
        m.resume_seconds.observe(time.perf_counter() - started)
        m.resumes.labels(platform, res.outcome).inc()
        turn = res.result
        if turn is not None and turn.offer is not None:
            m.cards.labels(platform, "chained" if res.outcome == "resumed" else "reoffered").inc()
        known = res.card  # set only when the caller proved it knows the card's secret
        where = {"chat": known.chat, "card_id": known.card_id} if known else {}
        log.info("resume %s", res.outcome, extra={"platform": platform, "outcome": res.outcome, **where})
        return res

    async def withdraw(self, *, chat: str, card_id: str, why: str) -> bool:
        """Take back a request whose card could not be shown (one conditional write: the card is
        expired unless it is being resumed or was answered). The chat is free for a new turn."""
        now = self.clock.now()
        if not await self.store.run(self.store.rows.expire, chat, card_id, now):
            return False
        await self.pauser.audit(
            AuditEvent(chat=chat, at=now, kind="withdrawn", actor="system", card_id=card_id, detail={"why": why})
        )
        return True

    async def grants(self, *, user: str, chat: str | None = None) -> list[Grant]:
        return await self.grant_book.live(user, chat)

    async def revoke(self, *, user: str, chat: str | None, subject: str) -> list[Grant]:
        return await self.grant_book.revoke(user, chat, subject)

    async def is_allowed(self, *, user: str, chat: str, kind: SubjectKind, name: str) -> bool:
        return await self.grant_book.is_allowed(user, chat, kind, name)

    async def audit(self, chat: str) -> list[AuditEvent]:
        return await self.store.run(self.store.rows.list_audit, chat)

    async def audit_since(self, since: float) -> list[AuditEvent]:
        """Every chat's events from `since` on (an export)."""
        return await self.store.run(self.store.rows.list_audit_since, since)

    async def first_delivery(self, key: str) -> bool:
        now = self.clock.now()
        return await self.store.run(self.store.rows.claim_event, key, now, now + self.settings.event_dedupe_ttl)

    async def record_refusal(self, refusal: Refusal) -> bool:
        ttl = refusal.at + self.settings.card_expiry + self.settings.resume_deadline + self.settings.retention
        return await self.store.run(self.store.rows.record_refusal, refusal, ttl)

    async def refusals(self, chat: str, turn_id: str) -> list[Refusal]:
        return await self.store.run(self.store.rows.list_refusals, chat, turn_id)

    async def sweep(self) -> int:
        now = self.clock.now()
        rows = await self.store.run(self.store.rows.sweep, now)
        horizon = now - (self.settings.card_expiry + self.settings.resume_deadline + self.settings.retention)
        return rows + await self.store.run(self.store.objects.sweep, horizon)
