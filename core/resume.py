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
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from strands.types._snapshot import Snapshot
from strands.types.interrupt import InterruptResponseContent
from strands.types.session import decode_bytes_values

from core import wording
from core.agent_factory import AgentFactory
from core.card_kinds import answer_problem, binds, interrupt_response
from core.context import RequestContext, invocation_state
from core.ids import hash_secret, is_card_id, mint_secret, secret_matches
from core.lease import Heartbeat
from core.models import Answer, ApprovalCard, AuditEvent, CardOffer, Pointer, ResumeResult, TurnResult
from core.pause import ClaimLost, Holding, Pauser, final_text
from core.turns import approved_sets, approved_tools, is_answerable

if TYPE_CHECKING:
    from core.approvals import Approvals

log = logging.getLogger(__name__)

OnClaimed = Callable[[Pointer], Awaitable[None]]

UNKNOWN = "Unknown approval card: it may have been replaced, or the link is wrong."
IN_PROGRESS = "This approval is already being resumed."
EXPIRED = "This approval card has expired; ask the agent again."
CAP_REACHED = "This approval was denied and expired: resuming it failed too many times."
INVALID = "Invalid answer: send exactly one response entry with a well-formed payload."
INVALID_PACKAGES = "Invalid answer: the packages chosen are not all on the card."
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


def answer_doc(p: Pointer, user: str, answer: Answer, at: float, result: TurnResult) -> bytes:
    """The stored answer. `result_json` is kept as a string so a replay returns it byte for byte.
    R19: a chained card's offer (its secret) is never stored, only which card it was."""
    chained = result.offer.card.card_id if result.offer is not None else None
    return json.dumps(
        {
            "card_id": p.card_id,
            "secret_hash": p.secret_hash,
            "owner": p.owner,
            "card": p.card.model_dump(),
            "answer": answer.model_dump(),
            "answered_by": user,
            "answered_at": at,
            "result_json": result.model_copy(update={"offer": None}).model_dump_json(),
            "chained_card_id": chained,
        }
    ).encode()


class ResumeService:
    def __init__(self, approvals: Approvals, factory: AgentFactory, pauser: Pauser, worker_id: str) -> None:
        self.approvals = approvals
        self.factory = factory
        self.pauser = pauser
        self.worker = worker_id

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
        store, clock, settings = self.approvals.store, self.approvals.clock, self.approvals.settings
        if not is_card_id(card_id):  # never reaches a key or a lookup (`A/1` would name card A's answer)
            return ResumeResult(outcome="unknown", message=UNKNOWN)
        if answer is None:
            return ResumeResult(outcome="invalid", message=INVALID)
        p = await store.run(store.rows.get_pointer_by_card, card_id)
        if p is None:
            return await self._answered_elsewhere(card_id, user, secret)
        if not secret_matches(secret, p.secret_hash):
            return ResumeResult(outcome="unknown", message=UNKNOWN)  # same as an unknown id
        if user != p.owner:
            return ResumeResult(outcome="forbidden", message=forbidden_message(p.owner), owner=p.owner, card=p.card)
        if p.state == "done":
            return await self._replay(p, p.answer_key)
        if p.state == "expired":
            return self._expired(p, EXPIRED)
        problem = answer_problem(p.card, answer)
        if problem is not None:
            return ResumeResult(outcome="invalid", message=problem, card=p.card)
        now = clock.now()
        if p.state == "claimed" and p.lease_until is not None and p.lease_until >= now:
            return self._in_progress(p)
        if p.expires_at <= now:
            if await store.run(store.rows.expire, p.chat, p.card_id, now):
                await self._audit(p, "expired", user, now, {"why": "past expiry"})
            return self._expired(p, EXPIRED)
        if p.claim_count >= settings.claim_cap:
            return await self._give_up(p, user, now)

        claimed = await store.run(
            store.rows.claim,
            p.chat,
            p.card_id,
            p.secret_hash,
            p.claim_count,
            self.worker,
            now,
            now + settings.lease,
            now + settings.resume_deadline,
        )
        if claimed is None:
            await self._audit(p, "claim_lost", user, now, {"worker": self.worker})
            latest = await store.run(store.rows.get_pointer_by_card, card_id)
            if latest is not None and latest.state == "done":
                return await self._replay(latest, latest.answer_key)
            return self._in_progress(p)
        await self._audit(p, "claim_won", user, now, {"worker": self.worker, "claim": claimed.claim_count})
        if on_claimed is not None:
            try:
                await on_claimed(claimed)
            except Exception as e:  # a front end's display fault must not strand the claim
                log.warning("on_claimed failed: %s", e)
        return await self._run_claimed(claimed, user, answer, now)

    # --- the winner's path -------------------------------------------------------------
    async def _run_claimed(self, p: Pointer, user: str, answer: Answer, now: float) -> ResumeResult:
        store, clock, settings = self.approvals.store, self.approvals.clock, self.approvals.settings
        token = p.claim_count
        deadline = p.resume_deadline or (now + settings.resume_deadline)

        def renew(at: float, until: float) -> bool:
            return store.rows.renew(p.chat, p.card_id, self.worker, token, at, until)

        keeper = self.approvals.keeper
        heartbeat = keeper.hold(Heartbeat(renew, clock, settings.lease, deadline))
        try:
            await self.approvals.grant_book.apply(p, user, answer, now)
            await self._audit(p, "answered", user, now, answered_detail(p.card, answer))
            raw = await store.run(store.objects.get, p.snapshot)
            snap = decode_bytes_values(json.loads(raw))
            if not binds(p.card, p.tool_use_id, p.sdk_interrupt_id, snap):
                raise NotBound(p.card_id)
            agent = self.factory()
            agent.load_snapshot(Snapshot.from_dict(snap))
            grants = await store.run(store.rows.list_grants, p.owner, p.chat, clock.now())
            sites, packages = approved_sets(grants)
            ctx = RequestContext(
                user=p.owner,
                chat=p.chat,
                platform=p.card.platform,
                turn_id=p.turn_id,
                can_ask_human=True,
                approved_sites=sites,
                approved_packages=packages,
                approved_tools=approved_tools(grants),
                resume_card=p.card,
                resume_attempt=token,
            )
            response = interrupt_response(p.card, answer)  # never null (null re-raises)
            reply: list[InterruptResponseContent] = [
                {"interruptResponse": {"interruptId": p.sdk_interrupt_id, "response": response}}
            ]
            state = invocation_state(ctx, self.approvals)
            run = asyncio.ensure_future(agent.invoke_async(reply, invocation_state=state))
            if not await self._until_deadline(run, deadline):
                answer = Answer(approved=False)  # the card is answered as a deny: take back its grants
                at = clock.now()
                await self.approvals.grant_book.apply(p, "system", answer, at)
                await self._audit(p, "answered", "system", at, {"approved": False, "why": "resume deadline"})
                turn = TurnResult(status="answered", text=wording.RESUME_TOO_LONG)
            elif (result := run.result()).stop_reason == "interrupt":
                holding = Holding(card_id=p.card_id, worker=self.worker, token=token)
                turn = await self.pauser.offer(agent, result, ctx, holding=holding)
            else:
                turn = TurnResult(status="answered", text=final_text(result))
                await self.approvals.history.save(p.chat, agent, p.created_at)
        except ClaimLost:
            return self._in_progress(p)
        except NotBound:
            # The stored run does not hold the call this card shows: answer nothing, run nothing.
            log.warning("card %s does not match its stored call: expired", p.card_id)
            at = clock.now()
            await self.approvals.grant_book.apply(p, "system", Answer(approved=False), at)
            await store.run(store.rows.finish, p.chat, p.card_id, self.worker, token, "")
            await self._audit(p, "expired", "system", at, {"why": "the stored call does not match the card"})
            return self._expired(p, NOT_BOUND)
        finally:
            keeper.release(heartbeat)

        done_at = clock.now()
        doc = answer_doc(p, user, answer, done_at, turn)
        if turn.status == "awaiting_approval":
            # The chain already replaced the pointer (R13): keep the old card's answer for replays.
            key = f"answers/{p.card_id}.json"
            await store.run(store.objects.put, key, doc)
        else:
            key = f"answers/{p.card_id}/{token}.json"
            await store.run(store.objects.put, key, doc)
            if not await store.run(store.rows.finish, p.chat, p.card_id, self.worker, token, key):
                return self._in_progress(p)  # the lease lapsed and another worker took over
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
        store = self.approvals.store
        denied = Answer(approved=False)
        if await store.run(store.rows.expire, p.chat, p.card_id, now):
            await self.approvals.grant_book.apply(p, "system", denied, now)
            await self._audit(p, "expired", "system", now, {"why": "claim cap", "claims": p.claim_count})
        return self._expired(p, CAP_REACHED, answer=denied)

    async def _until_deadline(self, run: asyncio.Future[Any], deadline: float) -> bool:
        """Wait for the run; at the deadline (by the injected clock, looked at every heartbeat
        period) cancel it. True when it finished in time."""
        clock, every = self.approvals.clock, self.approvals.settings.heartbeat_every
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
        store = self.approvals.store
        raw = await store.run(store.objects.get_key, key) if key else None
        if raw is None:
            return self._expired(p, EXPIRED)
        doc = json.loads(raw)
        await self._audit(p, "replayed", doc["answered_by"], self.approvals.clock.now(), {})
        return self._from_doc(doc, p.card_location)

    def _from_doc(self, doc: dict[str, Any], location: dict[str, str] | None) -> ResumeResult:
        result_json = doc["result_json"]
        return ResumeResult(
            outcome="replayed",
            result=TurnResult.model_validate_json(result_json),
            result_json=result_json,
            answer=Answer.model_validate_json(json.dumps(doc["answer"])),
            answered_by=doc["answered_by"],
            answered_at=doc["answered_at"],
            owner=doc["owner"],
            card=ApprovalCard.model_validate_json(json.dumps(doc["card"])),
            card_location=location,
        )

    async def _answered_elsewhere(self, card_id: str, user: str, secret: str) -> ResumeResult:
        """A card that is no longer the chat's current one: replaced by a chained card."""
        store = self.approvals.store
        raw = await store.run(store.objects.get_key, f"answers/{card_id}.json")
        if raw is None:
            return ResumeResult(outcome="unknown", message=UNKNOWN)
        doc = json.loads(raw)
        if not secret_matches(secret, doc["secret_hash"]):
            return ResumeResult(outcome="unknown", message=UNKNOWN)
        if user != doc["owner"]:
            return ResumeResult(outcome="forbidden", message=forbidden_message(doc["owner"]), owner=doc["owner"])
        res = self._from_doc(doc, None)
        chained = doc.get("chained_card_id")
        offer = await self._reoffer(chained) if isinstance(chained, str) else None
        if offer is None or res.result is None:
            return res  # the chained card was answered or is gone: the stored result as it is
        result = res.result.model_copy(update={"offer": offer})
        return res.model_copy(update={"result": result, "result_json": result.model_dump_json()})

    async def _reoffer(self, card_id: str) -> CardOffer | None:
        """R19: the chained card's secret was never stored; give its owner a new one (one
        conditional write; the secret handed out before stops working)."""
        store, now = self.approvals.store, self.approvals.clock.now()
        p = await store.run(store.rows.get_pointer_by_card, card_id)
        if p is None or not is_answerable(p, now):
            return None
        secret = mint_secret()
        if not await store.run(store.rows.rotate_secret, p.chat, p.card_id, p.secret_hash, hash_secret(secret), now):
            return None
        await self._audit(p, "reoffered", p.owner, now, {"via": "replay"})
        return CardOffer(card=p.card, secret=secret)

    @staticmethod
    def _in_progress(p: Pointer) -> ResumeResult:
        return ResumeResult(outcome="in_progress", message=IN_PROGRESS, owner=p.owner, card=p.card)

    @staticmethod
    def _expired(p: Pointer, message: str, answer: Answer | None = None) -> ResumeResult:
        return ResumeResult(
            outcome="expired", message=message, owner=p.owner, card=p.card, card_location=p.card_location, answer=answer
        )

    async def _audit(self, p: Pointer, kind: Any, actor: str, at: float, detail: dict[str, Any]) -> None:
        await self.pauser.audit(
            AuditEvent(chat=p.chat, at=at, kind=kind, actor=actor, card_id=p.card_id, detail=detail)
        )
