"""The turn runner: one agent turn for one chat, with the request context set by the server.

One turn per chat across every replica: a turn first takes the chat's durable turn lease (one
conditional write), renewed by the lease keeper while the agent runs and released at the end;
a process that dies mid-turn leaves a lease that lapses on its own. A message that finds the
lease held is answered "busy" and runs nothing. No per-chat state is kept in the process.

A chat with an open request answers "waiting", except to the request's owner, who gets that
request back (re-offered with a new secret: the card may never have reached them).
"""

from __future__ import annotations

import logging
import os

import chat_approvals.core.protocol.wording as wording
from chat_approvals.core.agent.context import RequestContext, ToolAccess, invocation_state
from chat_approvals.core.agent.factory import AgentFactory
from chat_approvals.core.ids import hash_secret, mint_secret
from chat_approvals.core.models import CardOffer, Clock, Grant, Pointer, TurnResult
from chat_approvals.core.ports import Rows, Started, Steps
from chat_approvals.core.protocol.grants import UnrefusedTurns
from chat_approvals.core.protocol.history import History
from chat_approvals.core.protocol.lease import Heartbeat, LeaseKeeper
from chat_approvals.core.protocol.pause import Pauser, TurnHold, final_text
from chat_approvals.core.settings import Settings

log = logging.getLogger(__name__)


def is_open(p: Pointer | None, now: float) -> bool:
    """Does the chat have a request that is still answerable or being resumed?"""
    if p is None or p.state in ("done", "expired"):
        return False
    if p.state == "claimed" and p.lease_until is not None and p.lease_until >= now:
        return True
    return p.expires_at > now


def is_answerable(p: Pointer, now: float) -> bool:
    """Can a click claim it now (pending, or a dead worker's claim), before its expiry?"""
    lapsed = p.state == "claimed" and (p.lease_until is None or p.lease_until < now)
    return (p.state == "pending" or lapsed) and p.expires_at > now


def approved_sets(grants: list[Grant], turn_id: str | None = None) -> tuple[frozenset[str], frozenset[str]]:
    """What the tool may treat as approved in this turn (a `once` grant counts only in its own)."""
    grants = [g for g in grants if g.turn_id is None or g.turn_id == turn_id]
    return (
        frozenset(g.name for g in grants if g.kind == "site"),
        frozenset(g.name for g in grants if g.kind == "package"),
    )


def approved_tools(grants: list[Grant], turn_id: str | None = None) -> frozenset[str]:
    """Gated tools with a live grant in this chat: they run without a card (core/agent/tool_gate.py).
    A `once` grant (a policy's default duration) counts only in its own turn."""
    return frozenset(g.name for g in grants if g.kind == "tool" and (g.turn_id is None or g.turn_id == turn_id))


class TurnRunner:
    def __init__(
        self,
        *,
        rows: Rows,
        steps: Steps,
        settings: Settings,
        clock: Clock,
        keeper: LeaseKeeper,
        history: History,
        pauser: Pauser,
        factory: AgentFactory,
        tool_access: ToolAccess,
        worker_id: str,
        unrefused: UnrefusedTurns | None = None,
    ) -> None:
        """`unrefused`: the grant book's (core/protocol/grants.py), which each new turn's run enters."""
        self.unrefused = unrefused
        self.rows = rows
        self.steps = steps
        self.settings = settings
        self.clock = clock
        self.keeper = keeper
        self.history = history
        self.pauser = pauser
        self.factory = factory
        self.tool_access = tool_access
        self.worker_id = worker_id

    async def run(
        self, *, chat: str, user: str, text: str, platform: str, unattended: bool, user_name: str | None = None
    ) -> TurnResult:
        """Store steps of a turn: take the lease with what the turn reads (one round trip), the
        run, then one write that ends the turn (the card's pointer, or the history) and releases
        the lease; if that write did not happen, the lease is released on its own."""
        clock, settings, rows = self.clock, self.settings, self.rows
        holder = f"{self.worker_id}:turn:{os.urandom(6).hex()}"
        now = clock.now()
        started = await self.steps.start_turn(
            chat=chat, holder=holder, user=user, now=now, lease_until=now + settings.lease, history=self.history.enabled
        )
        if not started.turn.taken:
            return TurnResult(status="busy", text=wording.BUSY)

        def renew(at: float, until: float) -> bool:
            return rows.renew_turn_now(chat=chat, holder=holder, now=at, lease_until=until)

        beat = self.keeper.hold(Heartbeat(renew, clock, settings.lease, now + settings.resume_deadline))
        turn = TurnHold(chat, holder)
        try:
            return await self._run_holding(
                turn, started, user=user, text=text, platform=platform, unattended=unattended, user_name=user_name
            )
        finally:
            self.keeper.release(beat)
            if not turn.ended:
                try:
                    await rows.release_turn(chat=chat, holder=holder)
                except Exception as e:  # the lease lapses by itself
                    log.warning("turn lease release failed for %s: %s", chat, e)

    async def _run_holding(
        self,
        turn: TurnHold,
        started: Started,
        *,
        user: str,
        text: str,
        platform: str,
        unattended: bool,
        user_name: str | None = None,
    ) -> TurnResult:
        chat, now = turn.chat, self.clock.now()
        pointer = started.turn.pointer
        if pointer is not None and is_open(pointer, now):
            if wording.typed_answer(text) and not unattended:
                return TurnResult(status="waiting", text=wording.USE_THE_BUTTONS)
            if user == pointer.owner and not unattended:
                again = await self.reoffer(pointer, now)
                if again is not None:
                    return again
            return TurnResult(status="waiting", text=wording.WAITING)
        grants = list(started.turn.grants)
        turn_id = os.urandom(16).hex()  # opaque, 128 random bits (uuid4's, without a UUID object)
        sites, packages = approved_sets(grants, turn_id)
        ctx = RequestContext(
            user=user,
            chat=chat,
            platform=platform,
            turn_id=turn_id,
            can_ask_human=not unattended,
            approved_sites=sites,
            approved_packages=packages,
            approved_tools=approved_tools(grants, turn_id),
            user_name=user_name,
        )
        agent = self.factory()
        self.history.restore(chat, agent, started.history)
        unrefused = self.unrefused
        if unrefused is not None:  # the turn starts here: a refusal can only come through the grant book
            unrefused.enter(turn_id)
        try:
            result = await agent.invoke_async(text, invocation_state=invocation_state(ctx, self.tool_access))
        finally:
            if unrefused is not None:  # paused or not, a later run of this turn reads its refusals
                unrefused.leave(turn_id)
        if result.stop_reason == "interrupt":
            if unattended:  # R6: nobody can answer, so no card, whatever raised the interrupt
                return TurnResult(status="answered", text=wording.unattended_deny([], []))
            return await self.pauser.offer(agent, result, ctx, turn=turn)  # the snapshot carries the history
        history = self.history.to_save(chat, agent, now)
        try:
            await self.steps.end_turn(chat=chat, holder=turn.holder, now=self.clock.now(), history=history)
            turn.ended = True
        except Exception as e:  # the history is best effort; the lease is released in run()
            log.warning("turn end of %s not written: %s", chat, e)
        return TurnResult(status="answered", text=final_text(result))

    async def reoffer(self, p: Pointer, now: float) -> TurnResult | None:
        """The owner's open request, shown again (R19: with a new secret, one conditional write;
        the old secret stops working). None when it cannot be answered now (being resumed)."""
        if not is_answerable(p, now):
            return None
        secret = mint_secret()
        if not await self.rows.rotate_secret(p, new_hash=hash_secret(secret), now=now):
            return None  # claimed, answered or replaced meanwhile
        await self.pauser.trail.record(self.pauser.trail.on_card(p, "reoffered", p.owner, now, {}))
        return TurnResult(
            status="awaiting_approval",
            text=wording.REOFFERED,
            offer=CardOffer(card=p.card, secret=secret, votes=p.votes, replaces=p.card_location),
        )
