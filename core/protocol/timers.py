"""Durable timers (issue 33): no card waits in silence.

Every card gets an expiry timer (just before its expiry); a card whose policy asks for them also gets
reminders (`remind_after`) and an escalation (`escalate_after` + `escalate_to`). They are
stored before the card's pointer (core/protocol/pause.py), so a card never exists without
them; a timer whose card never got its pointer, or was answered, finds nothing to do.

`TimerRunner.tick` is what the server's timer loop calls on every replica: one replica at a
time holds the timers' lease (`claim_timers`) and gets the due ones; each is fired by one
conditional write (`fire_timer`) before anything is said, so a reminder is posted at most
once even when a replica dies between the two (a lost reminder, never a repeated one). A dead
replica's lease lapses and the next one carries on.

What a fired timer does:
- expire (due a little before the card's expiry, EXPIRY_LEAD): the system denies the card under
  the same claim a click takes (R10), so the paused turn is told (R16's deny) and its reply
  reaches the chat; the front ends update every copy in place ("expired without an answer; the
  agent was told"). A timer that fires too late to claim marks the card expired instead (the
  conditional write a late click makes). Either way the trail records `expired` once.
- remind: while the card is still answerable, the trail records `card.reminder` (the HTTP
  front end's webhook delivery) and the front ends remind those who have not answered.
- escalate: the trail records `card.escalated`; the front ends post the card to the escalation
  approvers, who may answer it from then on (core/protocol/resume_checks.py).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from chat_approvals.core.models import (
    ApprovalCard,
    AuditKind,
    Clock,
    Pointer,
    ResumeResult,
    Timer,
    TimerKind,
    TurnResult,
    Vote,
    duration_seconds,
)
from chat_approvals.core.ports import Rows
from chat_approvals.core.protocol.audit import AuditTrail
from chat_approvals.core.protocol.events import Subscribers
from chat_approvals.core.protocol.policy import Policy
from chat_approvals.core.settings import DAY, Settings

log = logging.getLogger(__name__)

Deny = Callable[[Pointer, float], Awaitable[ResumeResult | None]]

BATCH = 50  # timers fired per tick at most; the rest on the next one
# The expiry timer fires this long before the expiry shown on the card (a tenth of a short card's
# life): the card is then denied by the system under the normal claim (R10), which needs the card
# not yet past its expiry, and the paused turn is told. A timer that fires late only expires it.
EXPIRY_LEAD = 10.0


def card_life(card: ApprovalCard, settings: Settings) -> float:
    """How long a card may be answered: its policy's `expires_after`, capped by the server's
    maximum, else the server's `card_expiry`."""
    asked = card.policy.expires_after if card.policy is not None else None
    return settings.card_expiry if asked is None else min(asked, settings.max_card_life)


def longest_life(policy: Policy | None, settings: Settings) -> float:
    """The longest any card may live under this policy (the objects' sweep waits for it)."""
    asked = [] if policy is None else [policy.defaults.expires_after, *(r.expires_after for r in policy.rule)]
    longest = max((duration_seconds(a) for a in asked if a is not None), default=0.0)
    return max(settings.card_expiry, min(longest, settings.max_card_life))


def card_timers(card: ApprovalCard, ttl: float) -> list[Timer]:
    """The timers of a new card: its expiry, and those its policy asks for before it."""

    def at(name: str, due: float) -> Timer:
        return Timer(chat=card.chat, card_id=card.card_id, name=name, due_at=due, ttl=ttl)

    life = card.expires_at - card.created_at
    out = [at("expire", card.expires_at - min(EXPIRY_LEAD, life / 10))]  # just before: a deny can still claim
    policy = card.policy
    if policy is None:
        return out
    for i, after in enumerate(policy.remind_after):
        if card.created_at + after < card.expires_at:
            out.append(at(f"remind:{i}", card.created_at + after))
    escalate = policy.escalate_after
    if escalate is not None and policy.escalate_to and card.created_at + escalate < card.expires_at:
        out.append(at("escalate", card.created_at + escalate))
    return out


def is_escalated(card: ApprovalCard, now: float) -> bool:
    """Has the card's escalation time come (its escalation approvers may answer)?"""
    p = card.policy
    return (
        p is not None
        and bool(p.escalate_to)
        and p.escalate_after is not None
        and now >= card.created_at + p.escalate_after
    )


def _waiting(p: Pointer, now: float) -> bool:
    """Still waiting for an answer: pending (or a dead worker's claim) and not past its expiry
    (as core/protocol/turns.py's is_answerable; turns imports pause, which imports this module)."""
    lapsed = p.state == "claimed" and (p.lease_until is None or p.lease_until < now)
    return (p.state == "pending" or lapsed) and p.expires_at > now


@dataclass(frozen=True)
class TimerFired:
    """A timer fired on `card` (a front end posts or updates from it). `location` is where the
    card was posted; `votes` the approvals so far (a reminder skips those who gave one)."""

    kind: TimerKind
    card: ApprovalCard
    location: dict[str, str] | None
    at: float
    votes: list[Vote] = field(default_factory=list)
    after: float = 0.0  # seconds since the card was created
    result: TurnResult | None = None  # expire: what the turn told of the deny did next (its reply, a new card)


_AUDIT: dict[TimerKind, AuditKind] = {"remind": "card.reminder", "escalate": "card.escalated", "expire": "expired"}


class TimerRunner:
    def __init__(
        self,
        rows: Rows,
        trail: AuditTrail,
        settings: Settings,
        clock: Clock,
        worker_id: str,
        deny: Deny | None = None,
    ) -> None:
        self.deny = deny  # the resume service's system deny of an unanswered card
        self.rows = rows
        self.trail = trail
        self.settings = settings
        self.clock = clock
        self.worker_id = worker_id
        self.fired: Subscribers[TimerFired] = Subscribers()

    async def tick(self) -> int:
        """Fire what is due (when this replica holds the timers' lease); returns how many fired."""
        now = self.clock.now()
        since = now - self.settings.max_card_life - DAY  # no card's timer is older than its longest life
        due = await self.rows.claim_timers(
            holder=self.worker_id, now=now, lease_until=now + self.settings.lease, since=since, limit=BATCH
        )
        fired = 0
        for t in due:
            if not await self.rows.fire_timer(t, now=now):
                continue  # fired already (by a replica that held the lease before us)
            fired += 1
            try:
                await self._fire(t, now)
            except Exception as e:  # one card's fault must not stop the others' timers
                log.warning("timer %s of card %s failed after firing: %s", t.name, t.card_id, e)
        return fired

    async def _fire(self, t: Timer, now: float) -> None:
        p = await self.rows.pointer(chat=t.chat)
        if p is None or p.card_id != t.card_id:
            return  # answered and replaced, or never offered: nothing to say
        detail: dict[str, Any] = {"timer": t.name, "after": round(now - p.card.created_at)}
        if t.kind == "expire":
            denied = await self.deny(p, now) if self.deny is not None else None
            if denied is not None:  # claimed, denied, the turn told; the trail has it (with the claim)
                log.info("card %s denied at its expiry", p.card_id, extra={"chat": p.chat, "card_id": p.card_id})
                await self.fired.emit(
                    TimerFired(
                        "expire", p.card, p.card_location, now, list(p.votes), now - p.card.created_at, denied.result
                    )
                )
                return
            if not await self.rows.expire(chat=p.chat, card_id=p.card_id, now=now):
                return  # answered, already expired, or being resumed under a live lease
            detail["why"] = "no answer in time"
        elif not _waiting(p, now):
            return
        if t.kind == "escalate" and p.card.policy is not None:
            detail["escalated_to"] = list(p.card.policy.escalate_to)
        await self.trail.record(self.trail.on_card(p, _AUDIT[t.kind], "system", now, detail))
        log.info("timer %s fired on card %s", t.name, p.card_id, extra={"chat": p.chat, "card_id": p.card_id})
        await self.fired.emit(
            TimerFired(t.kind, p.card, p.card_location, now, list(p.votes), after=now - p.card.created_at)
        )
