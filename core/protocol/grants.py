"""R14: grants, one row per approved site or package, for one user in one chat; and the turn's
refusals (written by the egress gate, read by the approval tool). This is the gate's backend."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict

from chat_approvals.core.models import (
    Answer,
    Clock,
    Grant,
    GrantChange,
    Pointer,
    Refusal,
    SubjectKind,
)
from chat_approvals.core.ports import Rows
from chat_approvals.core.protocol.audit import AuditTrail
from chat_approvals.core.protocol.card_kinds import grant_plan
from chat_approvals.core.protocol.subjects import subject_matches
from chat_approvals.core.settings import Settings

log = logging.getLogger(__name__)


def live_in_turn(grants: list[Grant], turn_id: str | None) -> list[Grant]:
    """What counts in this turn: every grant but a `once` grant of another turn (or of an
    unknown one)."""
    return [g for g in grants if g.turn_id is None or g.turn_id == turn_id]


class UnrefusedTurns:
    """Turns whose every step so far ran in this process, with no refusal recorded for them yet:
    their refusals are known to be none without a read (issue 34: one store read on the event loop
    per approval request). Every refusal is recorded through the grant book that holds this (the
    gate's backend and the tools' access both are it), and a turn leaves as soon as one is, before
    it is written; a turn also leaves when its run ends, paused or not, so a resumed run (perhaps of
    a turn another process started) always reads the store. Bounded: a turn pushed out reads the store."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._turns: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()  # the gate may record from another thread's loop

    def enter(self, turn_id: str) -> None:
        with self._lock:
            self._turns[turn_id] = None
            while len(self._turns) > self.size:
                self._turns.popitem(last=False)

    def leave(self, turn_id: str) -> None:
        with self._lock:
            self._turns.pop(turn_id, None)

    def __contains__(self, turn_id: object) -> bool:
        return turn_id in self._turns


class GrantBook:
    def __init__(self, rows: Rows, trail: AuditTrail, settings: Settings, clock: Clock) -> None:
        self.rows = rows
        self.trail = trail
        self.settings = settings
        self.clock = clock
        self.unrefused = UnrefusedTurns()  # the turn runner enters each new turn's first run

    def changes(self, p: Pointer, user: str, answer: Answer, now: float) -> list[GrantChange]:
        """What answering the card does to its subjects' grants, in the card's order: approve
        writes a row per approved subject stamped with the card id; what the answer does not
        approve has its stored row removed. A tool card approved once writes nothing."""
        writes, approved_once = grant_plan(p.card, answer)  # a batch card: per item (issue 32)
        policy, s = p.card.policy, self.settings
        out: list[GrantChange] = []
        for kind, name in dict.fromkeys(p.card.subjects()):  # a batch may name one tool twice
            if (kind, name) in writes:
                chosen = writes[(kind, name)]
                lasts = policy.grant_seconds(chosen, s.grant_ttl) if policy is not None else s.grant_ttl
                once = lasts <= 0  # `once`: this turn only, and no longer than a resume may run
                grant = Grant(
                    user=p.owner,
                    chat=p.chat,
                    kind=kind,
                    name=name,
                    card_id=p.card_id,
                    created_at=now,
                    expires_at=now + (s.resume_deadline if once else lasts),
                    turn_id=p.turn_id if once else None,
                )
                audit = self.trail.grant(grant, at=now, actor=user, revoke=False)
                out.append(GrantChange(grant, grant.expires_at + s.retention, False, audit))
            elif (kind, name) in approved_once:
                continue  # approved once: this call runs; nothing to write, nothing to take back
            else:
                gone = Grant(
                    user=p.owner, chat=p.chat, kind=kind, name=name, card_id=p.card_id, created_at=now, expires_at=now
                )
                audit = self.trail.grant(gone, at=now, actor=user, revoke=True)
                out.append(GrantChange(gone, 0.0, True, audit))
        return out

    async def apply(self, p: Pointer, user: str, answer: Answer, now: float) -> None:
        """The changes above, one call each (the paths that answer a card without a claim)."""
        for c in self.changes(p, user, answer, now):
            g = c.grant
            if not c.delete:
                await self.rows.put_grant(g, ttl=c.ttl)
                await self.trail.append(c.audit)
            elif await self.rows.delete_grant(user=g.user, chat=g.chat, kind=g.kind, name=g.name):
                await self.trail.append(c.audit)

    async def live(self, user: str, chat: str | None) -> list[Grant]:
        return await self.rows.grants(user=user, chat=chat, now=self.clock.now())

    async def revoke(self, user: str, chat: str | None, subject: str) -> list[Grant]:
        """Revoke `subject` (a host, a package, or "all") in `chat`, or in every chat of the user."""
        now = self.clock.now()
        removed = []
        for g in await self.live(user, chat):
            if subject_matches(g, subject) and await self.rows.delete_grant(
                user=g.user, chat=g.chat, kind=g.kind, name=g.name
            ):
                removed.append(g)
                await self.trail.append(self.trail.grant(g, at=now, actor=user, revoke=True))
        return removed

    # --- the gate's backend (core.egress.backend.GrantsBackend) -------------------------
    async def is_allowed(
        self, *, user: str, chat: str, kind: SubjectKind, name: str, turn_id: str | None = None
    ) -> bool:
        return any(g.kind == kind and g.name == name for g in live_in_turn(await self.live(user, chat), turn_id))

    async def granted_names(self, *, user: str, chat: str, kind: SubjectKind, turn_id: str | None = None) -> list[str]:
        return sorted({g.name for g in live_in_turn(await self.live(user, chat), turn_id) if g.kind == kind})

    async def record_refusal(self, refusal: Refusal) -> bool:
        s = self.settings
        self.unrefused.leave(refusal.turn_id)  # before the write: from now on its refusals are read
        return await self.rows.record_refusal(refusal, ttl=refusal.at + s.card_expiry + s.resume_deadline + s.retention)

    async def refusals(self, chat: str, turn_id: str) -> list[Refusal]:
        if turn_id in self.unrefused:  # a new turn's first run, here, nothing refused: no read
            return []
        return await self.rows.refusals(chat=chat, turn_id=turn_id)
