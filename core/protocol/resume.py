"""The resume service: R9-R13, the same for every front end.

parse (done by the caller) -> load pointer -> id -> secret hash (constant time) -> owner ->
done? replay -> past expiry? expire -> claim (one conditional write) -> grants -> resume the
stored run with the heartbeat renewing the lease -> done (answer stored) or chained card.

At the resume deadline the run is cancelled and the card is answered as a deny (its grants
removed, the claim finished). R19: a stored answer never holds a card secret; the replay of a
card that chained to a still-open card re-offers that card with a freshly rotated secret.

The steps live in their own modules: the checks and refusals before a claim
(`resume_checks`), the claimed run and its finish (`resume_run`), replays and re-offers
(`resume_replay`). This one holds the order: checks -> vote -> claim -> run.
"""

from __future__ import annotations

from typing import Any

import chat_approvals.core.observe.tracing as tracing
from chat_approvals.core.agent.context import ToolAccess
from chat_approvals.core.agent.factory import AgentFactory
from chat_approvals.core.agent.paused_agents import PausedAgents
from chat_approvals.core.ids import is_card_id, secret_matches
from chat_approvals.core.models import Answer, AuditKind, Clock, Pointer, ResumeResult, Vote
from chat_approvals.core.ports import Claim, Objects, Rows, Steps
from chat_approvals.core.protocol.card_kinds import answer_problem
from chat_approvals.core.protocol.events import Claimed, Subscribers
from chat_approvals.core.protocol.grants import GrantBook
from chat_approvals.core.protocol.history import History
from chat_approvals.core.protocol.lease import LeaseKeeper
from chat_approvals.core.protocol.pause import Pauser
from chat_approvals.core.protocol.policy import ApproverCheck, NoApprovers
from chat_approvals.core.protocol.resume_checks import (
    APPROVER_MUST_ANSWER,
    APPROVER_ONLY,
    CAP_REACHED,
    EDIT_APPROVERS_ONLY,
    EXPIRED,
    IN_PROGRESS,
    INVALID,
    INVALID_DURATION,
    INVALID_PACKAGES,
    NOT_BOUND,
    OWNER_OR_APPROVER,
    UNKNOWN,
    NotBound,
    answered_detail,
    expired,
    forbidden_message,
    in_progress,
    other_agent,
    quorum_answer,
    who_may_answer,
)
from chat_approvals.core.protocol.resume_replay import Replays
from chat_approvals.core.protocol.resume_run import ClaimedRun, answer_doc
from chat_approvals.core.settings import Settings

__all__ = [  # the names this module held before its steps moved out
    "APPROVER_MUST_ANSWER",
    "APPROVER_ONLY",
    "CAP_REACHED",
    "EXPIRED",
    "INVALID",
    "INVALID_DURATION",
    "INVALID_PACKAGES",
    "IN_PROGRESS",
    "NOT_BOUND",
    "OWNER_OR_APPROVER",
    "UNKNOWN",
    "NotBound",
    "ResumeService",
    "answer_doc",
    "answered_detail",
    "forbidden_message",
    "other_agent",
    "quorum_answer",
]


SYSTEM = "system"  # the actor of what the server does on its own (a card denied at its expiry)


class ResumeService:
    def __init__(
        self,
        *,
        rows: Rows,
        objects: Objects,
        steps: Steps,
        settings: Settings,
        clock: Clock,
        keeper: LeaseKeeper,
        grants: GrantBook,
        history: History,
        pauser: Pauser,
        factory: AgentFactory,
        tool_access: ToolAccess,
        worker_id: str,
        approvers: ApproverCheck | None = None,
        paused: PausedAgents | None = None,
    ) -> None:
        self.paused = paused if paused is not None else PausedAgents(0)
        self.approvers: ApproverCheck = approvers or NoApprovers()
        self.rows = rows
        self.objects = objects
        self.steps = steps
        self.settings = settings
        self.clock = clock
        self.keeper = keeper
        self.grants = grants
        self.history = history
        self.pauser = pauser
        self.factory = factory
        self.tool_access = tool_access
        self.worker = worker_id
        self.claimed: Subscribers[Claimed] = Subscribers()  # a front end shows "resuming" on its card
        self.replays = Replays(rows=rows, objects=objects, clock=clock, approvers=self.approvers, audit=self._audit)
        self.run = ClaimedRun(self, self._audit)  # the winner's path reads its parts from here

    async def resume(
        self,
        *,
        card_id: str,
        user: str,
        secret: str,
        answer: Answer | None,
    ) -> ResumeResult:
        rows, clock, settings = self.rows, self.clock, self.settings
        if not is_card_id(card_id):  # never reaches a key or a lookup (`A/1` would name card A's answer)
            return ResumeResult(outcome="unknown", message=UNKNOWN)
        if answer is None:
            return ResumeResult(outcome="invalid", message=INVALID)
        p = await rows.pointer_by_card(card_id)
        if p is None:
            return await self.replays.answered_elsewhere(card_id, user, secret)
        if not secret_matches(secret, p.secret_hash):
            return ResumeResult(outcome="unknown", message=UNKNOWN)  # same as an unknown id
        refused = await who_may_answer(self.approvers, p.card, p.owner, user, now=clock.now())
        if refused is not None:
            if p.card.policy is not None:  # who tried to answer a policy card, and why not
                await self._audit(p, "refused_answer", user, clock.now(), {"why": refused.message})
            return refused
        if p.state == "done":
            return await self.replays.replay(p, p.answer_key)
        if p.state == "expired":
            return expired(p, EXPIRED)
        problem = answer_problem(p.card, answer) or other_agent(p, settings)
        if problem is not None:
            return ResumeResult(outcome="invalid", message=problem, card=p.card)
        refused = await self._may_edit(p, user, answer)
        if refused is not None:
            return refused
        now = clock.now()
        if p.state == "claimed" and p.lease_until is not None and p.lease_until >= now:
            return in_progress(p)
        if p.expires_at <= now:
            if await rows.expire(chat=p.chat, card_id=p.card_id, now=now):
                await self._audit(p, "expired", user, now, {"why": "past expiry"})
            return expired(p, EXPIRED)
        if p.claim_count >= settings.claim_cap:
            return await self._give_up(p, user, now)
        quorum = p.card.policy.quorum if p.card.policy is not None else 1
        if answer.approved and quorum > 1:  # a deny needs no quorum: any allowed deny vetoes
            counted = await self._vote(p, user, answer, now)
            if isinstance(counted, ResumeResult):
                return counted
            if len(counted.votes) < quorum:
                return ResumeResult(
                    outcome="vote_recorded",
                    message=f"Your approval is recorded: {len(counted.votes)} of {quorum}.",
                    owner=p.owner,
                    card=p.card,
                    card_location=counted.card_location,
                    votes=counted.votes,
                    needed=quorum,
                )
            p, answer = counted, quorum_answer(p.card, counted.votes, answer)  # this vote completes it: claim

        # R10's claim, the card's grants (R14) and their audit events in one write, then the
        # stored run read in the same hop.
        detail = answered_detail(p.card, answer)
        if p.card.policy is not None:
            detail.update(duration=answer.duration, votes=[v.user for v in p.votes])
        won = {"worker": self.worker, "claim": p.claim_count + 1}  # the claim sets count + 1
        trail = self.pauser.trail
        before = [trail.on_card(p, "claim_won", user, now, won)]  # built in the order they are written
        changes = self.grants.changes(p, user, answer, now)
        after = [trail.on_card(p, "answered", user, now, detail)]
        loaded = await self.steps.claim(
            Claim(
                p,
                worker=self.worker,
                now=now,
                lease_until=now + settings.lease,
                resume_deadline=now + settings.resume_deadline,
                changes=changes,
                before=before,
                after=after,
                load=not self.paused.matches(p.card_id, p.snapshot.sha256),  # held here: no snapshot GET
            )
        )
        if loaded.claimed is None:
            await self._audit(p, "claim_lost", user, now, {"worker": self.worker})
            latest = await rows.pointer_by_card(card_id)
            if latest is not None and latest.state == "done":
                return await self.replays.replay(latest, latest.answer_key)
            return in_progress(p)
        trail.written([*before, *(c.audit for c in changes), *after])
        claimed = loaded.claimed.pointer
        tracing.link_current(claimed.trace_context)  # this run continues the turn that paused (its span)
        await self.claimed.emit(Claimed(claimed.card, claimed.card_location, user, answer))
        return await self.run.run(claimed, user, answer, now, loaded)

    async def deny_unanswered(self, p: Pointer, now: float) -> ResumeResult | None:
        """Issue 33: a card nobody answered in time is denied by the system, so the paused turn
        is told (R16's deny) and its reply reaches the chat. The same claim as a click's (R10, one
        conditional write; its grants are a deny's), so a click at the same moment cannot also
        win. None when the card is not answerable now (answered, being resumed, past expiry):
        nothing was claimed."""
        if p.state not in ("pending", "claimed") or p.expires_at <= now:
            return None
        if p.state == "claimed" and p.lease_until is not None and p.lease_until >= now:
            return None
        if p.claim_count >= self.settings.claim_cap:  # R11: a card that kept killing its workers is not run again
            return None
        answer, trail = Answer(approved=False), self.pauser.trail
        before = [trail.on_card(p, "claim_won", SYSTEM, now, {"worker": self.worker, "claim": p.claim_count + 1})]
        changes = self.grants.changes(p, SYSTEM, answer, now)
        after = [
            trail.on_card(p, "expired", SYSTEM, now, {"why": "no answer in time"}),
            trail.on_card(p, "answered", SYSTEM, now, answered_detail(p.card, answer)),
        ]
        loaded = await self.steps.claim(
            Claim(
                p,
                worker=self.worker,
                now=now,
                lease_until=now + self.settings.lease,
                resume_deadline=now + self.settings.resume_deadline,
                changes=changes,
                before=before,
                after=after,
                load=not self.paused.matches(p.card_id, p.snapshot.sha256),
            )
        )
        if loaded.claimed is None:
            return None  # a click won it meanwhile
        trail.written([*before, *(c.audit for c in changes), *after])
        claimed = loaded.claimed.pointer
        tracing.link_current(claimed.trace_context)
        return await self.run.run(claimed, SYSTEM, answer, now, loaded)

    async def _vote(self, p: Pointer, user: str, answer: Answer, now: float) -> Pointer | ResumeResult:
        """One approver's vote: one conditional write, counted once per person. Returns the
        pointer with the votes so far, or what to answer when the card moved on meanwhile."""
        vote = Vote(user=user, at=now, duration=answer.duration, packages=answer.packages)
        if p.state == "pending":
            written = await self.rows.vote(p, vote=vote, now=now)
            if written is not None:
                await self._audit(p, "vote", user, now, {"duration": answer.duration, "packages": answer.packages})
                return written
        latest = await self.rows.pointer_by_card(p.card_id)  # already voted, or the card moved on
        if latest is None:
            return ResumeResult(outcome="unknown", message=UNKNOWN)
        if latest.state == "done":
            return await self.replays.replay(latest, latest.answer_key)
        if latest.state == "expired" or latest.expires_at <= now:
            return expired(latest, EXPIRED)
        if latest.state == "claimed" and latest.lease_until is not None and latest.lease_until >= now:
            return in_progress(latest)
        if any(v.user == user for v in latest.votes) or len(latest.votes) >= (
            latest.card.policy.quorum if latest.card.policy else 1
        ):
            return latest  # a repeated vote counts once; a quorum whose claimer died may be claimed again
        return in_progress(latest)

    async def _may_edit(self, p: Pointer, user: str, answer: Answer) -> ResumeResult | None:
        """Edits kept to approvers (`edits = "approvers"`): the requester and anyone not an approver
        may answer as the card allows, but not with edits (refused, nothing changes)."""
        edits = answer.edited_input is not None or any(a.edited_input is not None for a in answer.items or [])
        if not edits or p.card.policy is None or p.card.policy.edits != "approvers":
            return None
        if user != p.owner and await self.approvers.is_approver(user):
            return None
        await self._audit(p, "refused_answer", user, self.clock.now(), {"why": EDIT_APPROVERS_ONLY})
        return ResumeResult(outcome="forbidden", message=EDIT_APPROVERS_ONLY, owner=p.owner, card=p.card)

    async def _give_up(self, p: Pointer, user: str, now: float) -> ResumeResult:
        """R11: a card that keeps killing its workers is denied and expired."""
        denied = Answer(approved=False)
        if await self.rows.expire(chat=p.chat, card_id=p.card_id, now=now):
            await self.grants.apply(p, "system", denied, now)
            await self._audit(p, "expired", "system", now, {"why": "claim cap", "claims": p.claim_count})
        return expired(p, CAP_REACHED, answer=denied)

    async def _audit(self, p: Pointer, kind: AuditKind, actor: str, at: float, detail: dict[str, Any]) -> None:
        trail = self.pauser.trail
        await trail.record(trail.on_card(p, kind, actor, at, detail))
