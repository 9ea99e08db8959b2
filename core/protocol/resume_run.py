"""The winner's path (R10-R13): the claimed run resumed from its snapshot (or the Agent this
process still holds) with the lease renewed by the keeper, cancelled at the resume deadline; then
the answer stored and the claim finished, or the chained card the run paused on."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, Protocol

from strands.types import Snapshot
from strands.types.interrupt import InterruptResponseContent

import chat_approvals.core.protocol.wording as wording
from chat_approvals.core.agent.context import RequestContext, ToolAccess, invocation_state
from chat_approvals.core.agent.factory import AgentFactory
from chat_approvals.core.agent.paused_agents import PausedAgents
from chat_approvals.core.agent.snapshots import decode_doc, load_owned
from chat_approvals.core.models import Answer, AnswerRecord, Clock, Fence, Pointer, ResumeResult, TurnResult
from chat_approvals.core.ports import Loaded, Objects, Rows, Steps
from chat_approvals.core.protocol.card_kinds import binds, interrupt_responses, shows_calls
from chat_approvals.core.protocol.claim_release import NOT_STORED, UNSTORABLE, release_unstorable
from chat_approvals.core.protocol.grants import GrantBook
from chat_approvals.core.protocol.history import History, HistoryWrite
from chat_approvals.core.protocol.lease import Heartbeat, LeaseKeeper
from chat_approvals.core.protocol.pause import ClaimLost, Pauser, final_text
from chat_approvals.core.protocol.resume_checks import NOT_BOUND, NotBound, expired, in_progress
from chat_approvals.core.protocol.resume_replay import Audit
from chat_approvals.core.protocol.turns import approved_sets, approved_tools
from chat_approvals.core.settings import Settings

log = logging.getLogger(__name__)


def answer_doc(
    p: Pointer, user: str, answer: Answer, at: float, result: TurnResult, result_json: str | None = None
) -> bytes:
    """The stored answer. `result_json` is kept as a string so a replay returns it byte for byte.
    R19: a chained card's offer (its secret) is never stored, only which card it was. `result_json`:
    the result's JSON when the caller made it already (a result without an offer: the same text)."""
    chained = result.offer.card.card_id if result.offer is not None else None
    if result.offer is not None or result_json is None:
        kept = result if result.offer is None else result.model_copy(update={"offer": None})
        result_json = kept.model_dump_json()
    return (
        AnswerRecord(
            card_id=p.card_id,
            secret_hash=p.secret_hash,
            owner=p.owner,
            card=p.card,
            answer=answer,
            answered_by=user,
            answered_at=at,
            result_json=result_json,
            chained_card_id=chained,
        )
        .model_dump_json()
        .encode()
    )


class RunParts(Protocol):
    """What the claimed run reads of the resume service that holds it (ResumeService fits it;
    read at call time, so the service stays the one owner of its parts)."""

    clock: Clock
    factory: AgentFactory
    grants: GrantBook
    history: History
    keeper: LeaseKeeper
    objects: Objects
    paused: PausedAgents
    pauser: Pauser
    rows: Rows
    settings: Settings
    steps: Steps
    tool_access: ToolAccess
    worker: str


class ClaimedRun:
    def __init__(self, parts: RunParts, audit: Audit) -> None:
        self.parts = parts
        self.audit = audit

    async def run(self, p: Pointer, user: str, answer: Answer, now: float, loaded: Loaded) -> ResumeResult:
        rows, clock, settings = self.parts.rows, self.parts.clock, self.parts.settings
        token = p.claim_count
        fence = Fence(chat=p.chat, card_id=p.card_id, worker=self.parts.worker, token=token)
        deadline = p.resume_deadline or (now + settings.resume_deadline)

        def renew(at: float, until: float) -> bool:
            return rows.renew_now(fence, now=at, lease_until=until)

        keeper = self.parts.keeper
        heartbeat = keeper.hold(Heartbeat(renew, clock, settings.lease, deadline))
        history: HistoryWrite | None = None
        try:
            if loaded.error is not None or loaded.claimed is None:
                raise loaded.error or RuntimeError("claim not read")
            held = self.parts.paused.take(p.card_id, p.snapshot.sha256)  # only the bytes the pointer names
            if held is not None:
                # the held bytes are the stored ones (same checksum): decoded only when binds() reads them
                if shows_calls(p.card) and not binds(
                    p.card, p.tool_use_id, p.sdk_interrupt_id, decode_doc(held.snapshot)
                ):
                    raise NotBound(p.card_id)
                agent = held.agent
            else:
                raw = loaded.snapshot
                if raw is None:  # expected here but gone meanwhile: the store is the truth
                    raw = await self.parts.objects.get(p.snapshot)
                snap = decode_doc(raw)
                if not binds(p.card, p.tool_use_id, p.sdk_interrupt_id, snap):
                    raise NotBound(p.card_id)
                agent = self.parts.factory()
                load_owned(agent, Snapshot.from_dict(snap))  # snap was just decoded: nothing else holds it
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
                user_name=p.card.owner_name,  # a chained card names the same requester
            )
            # Never null (null re-raises); a batch card answers every interrupt of its step at once.
            reply: list[InterruptResponseContent] = [
                {"interruptResponse": {"interruptId": iid, "response": response}}
                for iid, response in interrupt_responses(p.card, answer, p.sdk_interrupt_id)
            ]
            state = invocation_state(ctx, self.parts.tool_access)
            run = asyncio.ensure_future(agent.invoke_async(reply, invocation_state=state))
            if not await self.until_deadline(run, deadline):
                answer = Answer(approved=False)  # the card is answered as a deny: take back its grants
                at = clock.now()
                await self.parts.grants.apply(p, "system", answer, at)
                await self.audit(p, "answered", "system", at, {"approved": False, "why": "resume deadline"})
                turn = TurnResult(status="answered", text=wording.RESUME_TOO_LONG)
            elif (result := run.result()).stop_reason == "interrupt":
                turn = await self.parts.pauser.offer(agent, result, ctx, holding=fence)
            else:
                turn = TurnResult(status="answered", text=final_text(result))
                history = self.parts.history.to_save(p.chat, agent, p.created_at)
        except ClaimLost:
            return in_progress(p)
        except NotBound:
            # The stored run does not hold the call this card shows: answer nothing, run nothing.
            log.warning("card %s does not match its stored call: expired", p.card_id)
            at = clock.now()
            await self.parts.grants.apply(p, "system", Answer(approved=False), at)
            await rows.finish(fence, answer_key="")
            await self.audit(p, "expired", "system", at, {"why": "the stored call does not match the card"})
            return expired(p, NOT_BOUND)
        finally:
            keeper.release(heartbeat)

        done_at = clock.now()
        try:
            # a result without an offer: its JSON is the stored answer's too, made once
            result_json = turn.model_dump_json() if turn.offer is None else None
            doc = answer_doc(p, user, answer, done_at, turn, result_json)
            if turn.status == "awaiting_approval":
                # The chain already replaced the pointer (R13): keep the old card's answer for replays.
                key = f"answers/{p.card_id}.json"
                await self.parts.objects.put(key, doc)
            else:
                key = f"answers/{p.card_id}/{token}.json"
                if not await self.parts.steps.complete(fence, answer_key=key, answer=doc, history=history):
                    return in_progress(p)  # the lease lapsed and another worker took over
        except UNSTORABLE as e:  # never a held claim another click could run again (claim_release.py)
            if turn.status != "awaiting_approval":
                await release_unstorable(p, fence, e, rows=rows, grants=self.parts.grants, audit=self.audit, at=done_at)
            return expired(p, NOT_STORED)
        return ResumeResult(
            outcome="resumed",
            result=turn,
            result_json=turn.model_dump_json() if result_json is None else result_json,
            answer=answer,
            answered_by=user,
            answered_at=done_at,
            owner=p.owner,
            card=p.card,
            card_location=p.card_location,
        )

    async def until_deadline(self, run: asyncio.Future[Any], deadline: float) -> bool:
        """Wait for the run; at the deadline (by the injected clock, looked at every heartbeat
        period) cancel it. True when it finished in time."""
        clock, every = self.parts.clock, self.parts.settings.heartbeat_every
        loop = asyncio.get_running_loop()
        while not run.done():
            left = deadline - clock.now()
            if left <= 0:
                run.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await run
                log.warning("resume past its deadline: the run was cancelled")
                return False
            # asyncio.wait({run}, timeout) without its sets and its checks of every awaitable: one
            # waiter woken by the run's end or the timer, whichever comes first (issue 34)
            waiter: asyncio.Future[None] = loop.create_future()

            def wake(_: object = None, waiter: asyncio.Future[None] = waiter) -> None:
                if not waiter.done():
                    waiter.set_result(None)

            timer = loop.call_later(min(every, left), wake)
            run.add_done_callback(wake)
            try:
                await waiter
            except asyncio.CancelledError:  # our caller went away: the run must not outlive its claim
                run.cancel()
                raise
            finally:
                timer.cancel()
                run.remove_done_callback(wake)
        return True
