"""The turn runner: one agent turn for one chat, with the request context set by the server."""

from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict
from typing import TYPE_CHECKING

from core import wording
from core.agent_factory import AgentFactory
from core.context import RequestContext, invocation_state
from core.models import Grant, Pointer, TurnResult
from core.pause import Pauser, final_text

if TYPE_CHECKING:
    from core.approvals import Approvals


def is_open(p: Pointer | None, now: float) -> bool:
    """Does the chat have a request that is still answerable or being resumed?"""
    if p is None or p.state in ("done", "expired"):
        return False
    if p.state == "claimed" and p.lease_until is not None and p.lease_until >= now:
        return True
    return p.expires_at > now


def approved_sets(grants: list[Grant]) -> tuple[frozenset[str], frozenset[str]]:
    return (
        frozenset(g.name for g in grants if g.kind == "site"),
        frozenset(g.name for g in grants if g.kind == "package"),
    )


class TurnRunner:
    def __init__(self, approvals: Approvals, factory: AgentFactory, pauser: Pauser) -> None:
        self.approvals = approvals
        self.factory = factory
        self.pauser = pauser
        # One turn per chat at a time in this process; across processes the pointer's open
        # request turns a second message away ("waiting").
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)

    async def run(self, *, chat: str, user: str, text: str, platform: str, unattended: bool) -> TurnResult:
        store, clock = self.approvals.store, self.approvals.clock
        async with self._locks[chat]:
            now = clock.now()
            if is_open(await store.run(store.rows.get_pointer, chat), now):
                return TurnResult(status="waiting", text=wording.WAITING)
            grants = await store.run(store.rows.list_grants, user, chat, now)
            sites, packages = approved_sets(grants)
            ctx = RequestContext(
                user=user,
                chat=chat,
                platform=platform,
                turn_id=uuid.uuid4().hex,
                can_ask_human=not unattended,
                approved_sites=sites,
                approved_packages=packages,
            )
            agent = self.factory()
            await self.approvals.history.restore(chat, agent)
            result = await agent.invoke_async(text, invocation_state=invocation_state(ctx, self.approvals))
            if result.stop_reason == "interrupt":
                if unattended:  # R6: nobody can answer, so no card, whatever raised the interrupt
                    return TurnResult(status="answered", text=wording.unattended_deny([], []))
                return await self.pauser.offer(agent, result, ctx)  # the snapshot carries the history
            await self.approvals.history.save(chat, agent, now)
            return TurnResult(status="answered", text=final_text(result))
