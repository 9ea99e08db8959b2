"""The resume service: R9-R13, the same for every front end.

parse (done by the caller) -> load pointer -> id -> secret hash (constant time) -> owner ->
done? replay -> past expiry? expire -> claim (one conditional write) -> grants -> resume the
stored run with the heartbeat renewing the lease -> done (answer stored) or chained card.

At the resume deadline the run is cancelled and the card is answered as a deny (its grants
removed, the claim finished). R19: a stored answer never holds a card secret; the replay of a
card that chained to a still-open card re-offers that card with a freshly rotated secret.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

from strands.types import Snapshot
from strands.types.interrupt import InterruptResponseContent
from strands.types.session import decode_bytes_values

import chat_approvals.core.observe.tracing as tracing
import chat_approvals.core.protocol.wording as wording
from chat_approvals.core.agent.context import RequestContext, ToolAccess, invocation_state
from chat_approvals.core.agent.factory import AgentFactory
from chat_approvals.core.agent.paused_agents import PausedAgents
from chat_approvals.core.ids import hash_secret, is_card_id, mint_secret, secret_matches
from chat_approvals.core.models import (
    Answer,
    AnswerRecord,
    ApprovalCard,
    AuditKind,
    CardOffer,
    Clock,
    Fence,
    Pointer,
    ResumeResult,
    TurnResult,
    Vote,
    duration_seconds,
)
from chat_approvals.core.ports import Claim, Loaded, Objects, Rows, Steps
from chat_approvals.core.protocol.card_kinds import answer_problem, binds, interrupt_response
from chat_approvals.core.protocol.claim_release import NOT_STORED, UNSTORABLE, release_unstorable
from chat_approvals.core.protocol.events import Claimed, Subscribers
from chat_approvals.core.protocol.grants import GrantBook
from chat_approvals.core.protocol.history import History, HistoryWrite
from chat_approvals.core.protocol.lease import Heartbeat, LeaseKeeper
from chat_approvals.core.protocol.pause import ClaimLost, Pauser, final_text
from chat_approvals.core.protocol.policy import ApproverCheck, NoApprovers, may_answer
from chat_approvals.core.protocol.turns import approved_sets, approved_tools, is_answerable
from chat_approvals.core.settings import BUILT_IN_AGENT, Settings

log = logging.getLogger(__name__)

UNKNOWN = "Unknown approval card: it may have been replaced, or the link is wrong."
IN_PROGRESS = "This approval is already being resumed."
EXPIRED = "This approval card has expired; ask the agent again."
CAP_REACHED = "This approval was denied and expired: resuming it failed too many times."
INVALID = "Invalid answer: send exactly one response entry with a well-formed payload."
INVALID_PACKAGES = "Invalid answer: the packages chosen are not all on the card."
INVALID_DURATION = "Invalid answer: that duration is not one this card offers."
APPROVER_MUST_ANSWER = "An approver must answer this: the person who asked may not approve their own request."
APPROVER_ONLY = "An approver must answer this, and you are not one of the approvers."
OWNER_OR_APPROVER = "Only the person who asked, or an approver, may answer this approval."
NOT_BOUND = "This approval no longer matches the call it shows; nothing ran. Ask the agent again."


class NotBound(Exception):
    """A tool card whose stored run does not hold the call the card shows (card_kinds.binds)."""


def answered_detail(card: ApprovalCard, answer: Answer) -> dict[str, Any]:
    """The audit trail's record of an answer: what was answered, and how (with the deny reason)."""
    detail: dict[str, Any] = {"kind": card.kind, "approved": answer.approved, "packages": answer.packages}
    if card.tool is not None:
        detail.update(tool=card.tool.name, fingerprint=card.tool.fingerprint)
    if card.question is not None:
        detail.update(question=card.question.name)
    if answer.duration is not None:
        detail["duration"] = answer.duration
    if answer.reason is not None:
        detail["reason"] = answer.reason
    return detail


def forbidden_message(owner: str) -> str:
    return f"Only {owner}, whose turn this is, may answer this approval."


def quorum_answer(card: ApprovalCard, votes: list[Vote], last: Answer) -> Answer:
    """The approval a quorum gives: the packages every voter left chosen, the shortest duration
    any of them chose (a voter who chose none takes the card's default)."""
    chosen: set[str] | None = None
    for v in votes:
        if v.packages is not None:
            chosen = set(v.packages) if chosen is None else chosen & set(v.packages)
    default = card.policy.default_duration if card.policy is not None else None
    durations = [d for d in (v.duration or default for v in votes) if d is not None]
    return Answer(
        approved=True,
        packages=None if chosen is None else [p for p in card.packages if p in chosen],
        duration=min(durations, key=duration_seconds) if durations else last.duration,
    )


def answer_doc(p: Pointer, user: str, answer: Answer, at: float, result: TurnResult) -> bytes:
    """The stored answer. `result_json` is kept as a string so a replay returns it byte for byte.
    R19: a chained card's offer (its secret) is never stored, only which card it was."""
    chained = result.offer.card.card_id if result.offer is not None else None
    return (
        AnswerRecord(
            card_id=p.card_id,
            secret_hash=p.secret_hash,
            owner=p.owner,
            card=p.card,
            answer=answer,
            answered_by=user,
            answered_at=at,
            result_json=result.model_copy(update={"offer": None}).model_dump_json(),
            chained_card_id=chained,
        )
        .model_dump_json()
        .encode()
    )


def other_agent(p: Pointer, settings: Settings) -> str | None:
    """A turn resumes only on the agent factory that paused it: its snapshot holds that agent's
    conversation and tool calls, and another factory's tools would not match them. Refused before
    any claim, so the card stays answerable by a process with the right `--agent`."""
    if p.agent is None or p.agent == settings.agent_name:  # None: paused before this was recorded
        return None
    return (
        f"this card was paused by {_agent_label(p.agent)}, but this process runs {_agent_label(settings.agent_name)}: "
        "resume it with " + (f"--agent {p.agent}" if p.agent != BUILT_IN_AGENT else "no --agent")
    )


def _agent_label(name: str) -> str:
    return "the built-in agent (no --agent)" if name == BUILT_IN_AGENT else f"--agent {name}"


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
            return await self._answered_elsewhere(card_id, user, secret)
        if not secret_matches(secret, p.secret_hash):
            return ResumeResult(outcome="unknown", message=UNKNOWN)  # same as an unknown id
        refused = await self._who_may_answer(p.card, p.owner, user)
        if refused is not None:
            if p.card.policy is not None:  # who tried to answer a policy card, and why not
                await self._audit(p, "refused_answer", user, clock.now(), {"why": refused.message})
            return refused
        if p.state == "done":
            return await self._replay(p, p.answer_key)
        if p.state == "expired":
            return self._expired(p, EXPIRED)
        problem = answer_problem(p.card, answer) or other_agent(p, settings)
        if problem is not None:
            return ResumeResult(outcome="invalid", message=problem, card=p.card)
        now = clock.now()
        if p.state == "claimed" and p.lease_until is not None and p.lease_until >= now:
            return self._in_progress(p)
        if p.expires_at <= now:
            if await rows.expire(chat=p.chat, card_id=p.card_id, now=now):
                await self._audit(p, "expired", user, now, {"why": "past expiry"})
            return self._expired(p, EXPIRED)
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
                return await self._replay(latest, latest.answer_key)
            return self._in_progress(p)
        trail.written([*before, *(c.audit for c in changes), *after])
        claimed = loaded.claimed.pointer
        tracing.link_current(claimed.trace_context)  # this run continues the turn that paused (its span)
        await self.claimed.emit(Claimed(claimed.card, claimed.card_location, user, answer))
        return await self._run_claimed(claimed, user, answer, now, loaded)

    async def _who_may_answer(self, card: ApprovalCard, owner: str, user: str) -> ResumeResult | None:
        """None when `user` may answer the card, else the refusal (nothing changes)."""
        policy = card.policy
        if policy is None or policy.approvers == "owner":
            if user == owner:
                return None
            return ResumeResult(outcome="forbidden", message=forbidden_message(owner), owner=owner, card=card)
        approver = await self.approvers.is_approver(user)
        if may_answer(policy.approvers, owner=owner, user=user, approver=approver):
            return None
        if policy.approvers == "owner_or_approvers":
            message = OWNER_OR_APPROVER
        else:
            message = APPROVER_MUST_ANSWER if user == owner else APPROVER_ONLY
        return ResumeResult(outcome="forbidden", message=message, owner=owner, card=card)

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
            return await self._replay(latest, latest.answer_key)
        if latest.state == "expired" or latest.expires_at <= now:
            return self._expired(latest, EXPIRED)
        if latest.state == "claimed" and latest.lease_until is not None and latest.lease_until >= now:
            return self._in_progress(latest)
        if any(v.user == user for v in latest.votes) or len(latest.votes) >= (
            latest.card.policy.quorum if latest.card.policy else 1
        ):
            return latest  # a repeated vote counts once; a quorum whose claimer died may be claimed again
        return self._in_progress(latest)

    # --- the winner's path -------------------------------------------------------------
    async def _run_claimed(self, p: Pointer, user: str, answer: Answer, now: float, loaded: Loaded) -> ResumeResult:
        rows, clock, settings = self.rows, self.clock, self.settings
        token = p.claim_count
        fence = Fence(chat=p.chat, card_id=p.card_id, worker=self.worker, token=token)
        deadline = p.resume_deadline or (now + settings.resume_deadline)

        def renew(at: float, until: float) -> bool:
            return rows.renew_now(fence, now=at, lease_until=until)

        keeper = self.keeper
        heartbeat = keeper.hold(Heartbeat(renew, clock, settings.lease, deadline))
        history: HistoryWrite | None = None
        try:
            if loaded.error is not None or loaded.claimed is None:
                raise loaded.error or RuntimeError("claim not read")
            held = self.paused.take(p.card_id, p.snapshot.sha256)  # only the bytes the pointer names
            raw = held.snapshot if held is not None else loaded.snapshot
            if raw is None:  # expected here but gone meanwhile: the store is the truth
                raw = await self.objects.get(p.snapshot)
            snap = decode_bytes_values(json.loads(raw))
            if not binds(p.card, p.tool_use_id, p.sdk_interrupt_id, snap):
                raise NotBound(p.card_id)
            if held is not None:
                agent = held.agent
            else:
                agent = self.factory()
                agent.load_snapshot(Snapshot.from_dict(snap))
            grants = list(loaded.claimed.grants)  # read in the claim's own round trip
            sites, packages = approved_sets(grants, p.turn_id)
            ctx = RequestContext(
                user=p.owner,
                chat=p.chat,
                platform=p.card.platform,
                turn_id=p.turn_id,
                can_ask_human=True,
                approved_sites=sites,
                approved_packages=packages,
                approved_tools=approved_tools(grants, p.turn_id),
                resume_card=p.card,
                resume_attempt=token,
            )
            response = interrupt_response(p.card, answer)  # never null (null re-raises)
            reply: list[InterruptResponseContent] = [
                {"interruptResponse": {"interruptId": p.sdk_interrupt_id, "response": response}}
            ]
            state = invocation_state(ctx, self.tool_access)
            run = asyncio.ensure_future(agent.invoke_async(reply, invocation_state=state))
            if not await self._until_deadline(run, deadline):
                answer = Answer(approved=False)  # the card is answered as a deny: take back its grants
                at = clock.now()
                await self.grants.apply(p, "system", answer, at)
                await self._audit(p, "answered", "system", at, {"approved": False, "why": "resume deadline"})
                turn = TurnResult(status="answered", text=wording.RESUME_TOO_LONG)
            elif (result := run.result()).stop_reason == "interrupt":
                turn = await self.pauser.offer(agent, result, ctx, holding=fence)
            else:
                turn = TurnResult(status="answered", text=final_text(result))
                history = self.history.to_save(p.chat, agent, p.created_at)
        except ClaimLost:
            return self._in_progress(p)
        except NotBound:
            # The stored run does not hold the call this card shows: answer nothing, run nothing.
            log.warning("card %s does not match its stored call: expired", p.card_id)
            at = clock.now()
            await self.grants.apply(p, "system", Answer(approved=False), at)
            await rows.finish(fence, answer_key="")
            await self._audit(p, "expired", "system", at, {"why": "the stored call does not match the card"})
            return self._expired(p, NOT_BOUND)
        finally:
            keeper.release(heartbeat)

        done_at = clock.now()
        try:
            doc = answer_doc(p, user, answer, done_at, turn)
            if turn.status == "awaiting_approval":
                # The chain already replaced the pointer (R13): keep the old card's answer for replays.
                key = f"answers/{p.card_id}.json"
                await self.objects.put(key, doc)
            else:
                key = f"answers/{p.card_id}/{token}.json"
                if not await self.steps.complete(fence, answer_key=key, answer=doc, history=history):
                    return self._in_progress(p)  # the lease lapsed and another worker took over
        except UNSTORABLE as e:  # never a held claim another click could run again (claim_release.py)
            if turn.status != "awaiting_approval":
                await release_unstorable(p, fence, e, rows=rows, grants=self.grants, audit=self._audit, at=done_at)
            return self._expired(p, NOT_STORED)
        return ResumeResult(
            outcome="resumed",
            result=turn,
            result_json=turn.model_dump_json(),
            answer=answer,
            answered_by=user,
            answered_at=done_at,
            owner=p.owner,
            card=p.card,
            card_location=p.card_location,
        )

    async def _give_up(self, p: Pointer, user: str, now: float) -> ResumeResult:
        """R11: a card that keeps killing its workers is denied and expired."""
        denied = Answer(approved=False)
        if await self.rows.expire(chat=p.chat, card_id=p.card_id, now=now):
            await self.grants.apply(p, "system", denied, now)
            await self._audit(p, "expired", "system", now, {"why": "claim cap", "claims": p.claim_count})
        return self._expired(p, CAP_REACHED, answer=denied)

    async def _until_deadline(self, run: asyncio.Future[Any], deadline: float) -> bool:
        """Wait for the run; at the deadline (by the injected clock, looked at every heartbeat
        period) cancel it. True when it finished in time."""
        clock, every = self.clock, self.settings.heartbeat_every
        while not run.done():
            left = deadline - clock.now()
            if left <= 0:
                run.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await run
                log.warning("resume past its deadline: the run was cancelled")
                return False
            try:
                await asyncio.wait({run}, timeout=min(every, left))
            except asyncio.CancelledError:  # our caller went away: the run must not outlive its claim
                run.cancel()
                raise
        return True

    # --- refusals and replays ----------------------------------------------------------
    async def _replay(self, p: Pointer, key: str | None) -> ResumeResult:
        raw = await self.objects.get_key(key) if key else None
        if raw is None:
            return self._expired(p, EXPIRED)
        doc = AnswerRecord.model_validate_json(raw)
        await self._audit(p, "replayed", doc.answered_by, self.clock.now(), {})
        return self._from_doc(doc, p.card_location)

    @staticmethod
    def _from_doc(doc: AnswerRecord, location: dict[str, str] | None) -> ResumeResult:
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

    async def _answered_elsewhere(self, card_id: str, user: str, secret: str) -> ResumeResult:
        """A card that is no longer the chat's current one: replaced by a chained card."""
        raw = await self.objects.get_key(f"answers/{card_id}.json")
        if raw is None:
            return ResumeResult(outcome="unknown", message=UNKNOWN)
        doc = AnswerRecord.model_validate_json(raw)
        if not secret_matches(secret, doc.secret_hash):
            return ResumeResult(outcome="unknown", message=UNKNOWN)
        refused = await self._who_may_answer(doc.card, doc.owner, user)
        if refused is not None:
            return refused.model_copy(update={"card": None})
        res = self._from_doc(doc, None)
        offer = await self._reoffer(doc.chained_card_id) if doc.chained_card_id is not None else None
        if offer is None or res.result is None:
            return res  # the chained card was answered or is gone: the stored result as it is
        result = res.result.model_copy(update={"offer": offer})
        return res.model_copy(update={"result": result, "result_json": result.model_dump_json()})

    async def _reoffer(self, card_id: str) -> CardOffer | None:
        """R19: the chained card's secret was never stored; give its owner a new one (one
        conditional write; the secret handed out before stops working)."""
        now = self.clock.now()
        p = await self.rows.pointer_by_card(card_id)
        if p is None or not is_answerable(p, now):
            return None
        secret = mint_secret()
        if not await self.rows.rotate_secret(p, new_hash=hash_secret(secret), now=now):
            return None
        await self._audit(p, "reoffered", p.owner, now, {"via": "replay"})
        return CardOffer(card=p.card, secret=secret, votes=p.votes, replaces=p.card_location)

    @staticmethod
    def _in_progress(p: Pointer) -> ResumeResult:
        return ResumeResult(outcome="in_progress", message=IN_PROGRESS, owner=p.owner, card=p.card)

    @staticmethod
    def _expired(p: Pointer, message: str, answer: Answer | None = None) -> ResumeResult:
        return ResumeResult(
            outcome="expired", message=message, owner=p.owner, card=p.card, card_location=p.card_location, answer=answer
        )

    async def _audit(self, p: Pointer, kind: AuditKind, actor: str, at: float, detail: dict[str, Any]) -> None:
        trail = self.pauser.trail
        await trail.record(trail.on_card(p, kind, actor, at, detail))
