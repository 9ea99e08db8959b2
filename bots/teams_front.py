"""The Teams front end: botbuilder-core's TeamsActivityHandler. A thin adapter: activity ->
`cards.adaptive` parser -> `Approvals` facade -> `cards.adaptive` renderer -> Teams. It never
touches the store or the agent. The house: `teams_config.py` (read once), `teams_bot.py` (the
ingress: token or loopback, the endpoint), `teams_activity.py` (what an activity says),
`teams_post.py` (what goes out), this module (messages, commands, card actions).

- A message runs one agent turn; a pause posts the approval card and records where it is (the
  conversation reference), so whichever process finishes the resume can update it. A turn longer
  than `message_budget` is answered at once (typing) and its end is posted from that reference.
- An `adaptiveCard/action` invoke (Action.Execute) is answered within Teams' limits with the card
  that replaces the clicked one: the outcome when the resume finishes inside `invoke_budget`,
  else the resolved ("resuming…") state, and the outcome later from the stored reference.
- Text commands: `approvals`, `revoke HOST_OR_PACKAGE`, `revoke all`, `help`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from botbuilder.core import InvokeResponse, TurnContext
from botbuilder.core.teams import TeamsActivityHandler
from botbuilder.integration.aiohttp import CloudAdapter
from botbuilder.schema import Activity, ActivityTypes

import chat_approvals.core.protocol.wording as wording
from chat_approvals.bots import teams_compat
from chat_approvals.bots.admission import Admission
from chat_approvals.bots.teams_activity import (
    HELP,
    NO_IDENTITY,
    PLATFORM,
    Command,
    SentActivity,
    card_activity,
    chat_key,
    name_of,
    parse_command,
    shown_name,
    text_activity,
    user_of,
)
from chat_approvals.bots.teams_compat import TeamsCardLocation
from chat_approvals.bots.teams_config import TeamsConfig
from chat_approvals.bots.teams_post import TeamsPoster, display_name, is_personal
from chat_approvals.bots.teams_timers import show_timer
from chat_approvals.bots.turn_limits import turn_refusal
from chat_approvals.cards import adaptive, adaptive_parse
from chat_approvals.cards import effects as fx
from chat_approvals.cards import wording as words
from chat_approvals.core.approvals import Approvals
from chat_approvals.core.identity import unverified
from chat_approvals.core.models import ApprovalCard, ResumeResult, StoreFault, TurnResult
from chat_approvals.core.protocol import Claimed
from chat_approvals.core.protocol.timers import TimerFired

log = logging.getLogger(__name__)


@dataclass
class _Click:
    """A card action of this front end's, between the resume call and its answer: set once the
    click won the claim, with the card the resolved ("resuming…") state repeats."""

    claimed: asyncio.Event = field(default_factory=asyncio.Event)
    asked: list[ApprovalCard] = field(default_factory=list)


class ApprovalsTeamsBot(TeamsActivityHandler):
    def __init__(
        self, approvals: Approvals, adapter: CloudAdapter, cfg: TeamsConfig, admission: Admission | None = None
    ) -> None:
        super().__init__()
        self.approvals = approvals
        self.adapter = adapter
        self.cfg = cfg
        self.admission = admission or Admission(approvals.metrics)
        self._background: set[asyncio.Task[None]] = set()
        self._clicks: dict[tuple[str, str], list[_Click]] = {}  # (card id, user) -> its clicks in flight
        policy = approvals.policy
        route_to = policy.routing.teams_conversation if policy is not None else None
        self.post = TeamsPoster(approvals, adapter, cfg.auth.app_id, route_to)
        self.unsubscribe = approvals.on_claimed(self._on_claimed)
        self.unsubscribe_timers = approvals.on_timer(self._on_timer)  # issue 33

    async def _on_timer(self, event: TimerFired) -> None:
        """A reminder or an expiry (bots/teams_timers.py), in the background: a Teams round trip
        must not hold the other timers up."""
        self._spawn(show_timer(self.post, event, self.approvals))

    async def _on_claimed(self, event: Claimed) -> None:
        """A click of this front end's won its claim: the invoke may answer with the resolved card."""
        for click in self._clicks.get((event.card.card_id, event.user), []):  # which one won is not told
            click.asked.append(event.card)  # what the resolved card repeats
            click.claimed.set()

    # --- messages -------------------------------------------------------------------
    async def on_message_activity(self, turn_context: TurnContext) -> None:
        try:
            await self._message(turn_context)
        except StoreFault as e:  # the one place a message maps a store fault: a card saying so
            log.warning("teams message: store fault: %s", e)
            await turn_context.send_activity(
                card_activity(adaptive.message_card("Store unavailable", wording.STORE_UNAVAILABLE))
            )

    async def _message(self, turn_context: TurnContext) -> None:
        act = turn_context.activity
        if act.value is not None and not act.text:
            await turn_context.send_activity("That card needs a Teams client with Universal Actions.")
            return
        text = (TurnContext.remove_recipient_mention(act) or act.text or "").strip()
        chat, user = chat_key(act), user_of(act)
        if user is None:
            await turn_context.send_activity(NO_IDENTITY)
            return
        if act.id and not await self.approvals.first_delivery(f"teams:activity:{chat}:{act.id}"):
            log.info("teams: redelivered activity %s ignored", act.id)
            return
        command = parse_command(text)
        if command is not None:
            await self._command(turn_context, command, chat, user)
            return
        refusal = turn_refusal(text)  # what a turn may carry, before it takes a lease (issue 27.2)
        if refusal is not None:
            await turn_context.send_activity(refusal)
            return
        location = TeamsCardLocation.of(act)
        task = asyncio.ensure_future(
            self.approvals.run_turn(chat=chat, user=user, text=text, platform=PLATFORM, user_name=shown_name(act))
        )
        await asyncio.wait({task}, timeout=self.cfg.message_budget)
        if task.done():
            await self.post.deliver(turn_context, chat, task.result(), location)
            return
        # Teams redelivers a message it got no answer to within ~15 s: answer now, post the end later.
        with contextlib.suppress(Exception):
            await turn_context.send_activity(Activity(type=ActivityTypes.typing))
        self._spawn(self._deliver_later(task, chat, location))

    async def _deliver_later(self, task: asyncio.Future[TurnResult], chat: str, location: TeamsCardLocation) -> None:
        result = await task

        async def work(turn: TurnContext) -> None:
            await self.post.deliver(turn, chat, result, location)

        await self.post.in_conversation(location, work)

    async def _command(self, ctx: TurnContext, command: Command, chat: str, user: str) -> None:
        if command.name == "help":
            await ctx.send_activity(card_activity(adaptive.message_card("Chat Approvals", HELP)))
        elif command.name == "approvals":
            grants = await self.approvals.grants(user=user, chat=chat)
            await ctx.send_activity(card_activity(adaptive.grants_card(grants)))
        elif not command.arg:
            await ctx.send_activity("Say what to revoke: `revoke HOST_OR_PACKAGE` or `revoke all`.")
        else:
            revoked = await self.approvals.revoke(user=user, chat=chat, subject=command.arg)
            remaining = await self.approvals.grants(user=user, chat=chat)
            await ctx.send_activity(card_activity(adaptive.revoked_card(revoked, remaining)))

    # --- invokes --------------------------------------------------------------------
    async def on_invoke_activity(self, turn_context: TurnContext) -> InvokeResponse | None:
        if turn_context.activity.name == "adaptiveCard/action":
            try:
                answer = await self._card_action(turn_context)
            except StoreFault as e:  # the one place an invoke maps a store fault
                log.warning("teams card action: store fault: %s", e)
                answer = teams_compat.invoke_response(503, adaptive.invoke_error_body(503, wording.STORE_UNAVAILABLE))
            except Exception:  # answer Teams with a clear error, not a hung card
                log.exception("teams: card action failed")
                failed = adaptive.invoke_error_body(500, "The app failed; try again.")
                answer = teams_compat.invoke_response(500, failed)
            # Sent here as botbuilder's ActivityHandler would send it, in an activity whose copy is
            # shallow (SentActivity); botbuilder then sends none of its own (its turn state has one).
            await turn_context.send_activity(SentActivity(type=ActivityTypes.invoke_response, value=answer))
            return answer
        result: InvokeResponse | None = await super().on_invoke_activity(turn_context)
        return result

    async def _card_action(self, ctx: TurnContext) -> InvokeResponse:
        act = ctx.activity
        try:
            click = adaptive_parse.parse_invoke(act.value)
        except adaptive_parse.InvalidInvoke as exc:
            self.approvals.metrics.resumes.labels(PLATFORM, "invalid").inc()  # never reaches the facade
            return teams_compat.invoke_response(400, adaptive.invoke_error_body(400, str(exc)))
        chat, user = chat_key(act), user_of(act) or unverified(PLATFORM)  # unverified: refused like a stranger
        if isinstance(click, adaptive_parse.RevokeClick):
            revoked = await self.approvals.revoke(user=user, chat=chat, subject=click.subject)
            remaining = await self.approvals.grants(user=user, chat=chat)
            return self._card(adaptive.revoked_card(revoked, remaining))

        key, mine = (click.card_id, user), _Click()
        claimed, asked = mine.claimed, mine.asked

        def resume() -> Coroutine[Any, Any, ResumeResult]:
            return self.approvals.resume(
                card_id=click.card_id,
                user=user,
                secret=click.secret,
                answer=click.answer,
                platform=PLATFORM,  # metrics and logs only
            )

        def forget(_: object = None) -> None:
            clicks = self._clicks.get(key, [])
            if mine in clicks:
                clicks.remove(mine)
            if not clicks:
                self._clicks.pop(key, None)

        self._clicks.setdefault(key, []).append(mine)
        # Queued behind the clicks before it (bots/admission.py); the wait counts in the budget.
        task = self.admission.submit(resume, platform=PLATFORM)
        if task is None:  # the queue is full: an error answer leaves the card in place, answerable
            forget()
            self.approvals.metrics.resumes.labels(PLATFORM, "busy").inc()
            return teams_compat.invoke_response(503, adaptive.invoke_error_body(503, wording.TOO_MANY_CLICKS))
        task.add_done_callback(forget)
        await asyncio.wait({task}, timeout=self.cfg.invoke_budget)
        if not task.done() and not claimed.is_set():
            # Not even claimed yet: give the claim (one store write) a little longer, within Teams' limit.
            waiter: asyncio.Future[Any] = asyncio.ensure_future(claimed.wait())
            await asyncio.wait({task, waiter}, timeout=self.cfg.invoke_budget, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
        if not task.done():
            self._finish_later(task, name_of(act))
            if not asked:
                return self._card(adaptive.message_card("Answer recorded", "Resuming the agent's turn…"))
            return self._card(adaptive.resolved_card(asked[0], click.answer, name_of(act)))
        r = task.result()
        if r.outcome == "invalid":
            return teams_compat.invoke_response(400, adaptive.invoke_error_body(400, r.message))
        effects = fx.resume_effects(r)
        for effect in effects:
            if isinstance(effect, fx.ShowVotes):
                return self._card(await self.post.show_votes(ctx, effect, r.card_location, click.secret))
            if isinstance(effect, fx.ShowTurn) and r.outcome == "resumed":
                await self._after_resume(ctx, r, name_of(act), in_invoke=True)
            elif isinstance(effect, fx.ShowTurn):  # a replay re-offered the still-open chained card: post it
                await self.post.deliver(ctx, effect.chat, effect.result, TeamsCardLocation.of(act))
        return self._card(await self._outcome_card(ctx, r, effects))

    def _card(self, card: dict[str, Any]) -> InvokeResponse:
        return teams_compat.invoke_response(200, adaptive.invoke_response_body(card))

    async def _outcome_card(self, ctx: TurnContext, r: ResumeResult, effects: list[fx.ClickEffect]) -> dict[str, Any]:
        """The card that replaces the clicked one: the outcome, or the refusal (cards/effects.py)."""
        by = name_of(ctx.activity) if r.answered_by == user_of(ctx.activity) else "someone else"
        refusal = next((e for e in effects if isinstance(e, fx.Refuse)), None)
        shown = next((e for e in effects if isinstance(e, fx.ShowOutcome)), None)
        if refusal is None and shown is not None:
            return adaptive.outcome_card(
                shown.card, shown.answer, by, r.answered_at or self.approvals.clock.now(), r.result
            )
        if refusal is None:
            return adaptive.refusal_card("unknown", r.message or "This card is not known here.")
        if refusal.kind == "answered" and refusal.card is not None and refusal.answer is not None:
            when = adaptive.format_time(refusal.at) if refusal.at else "earlier"
            verdict = "approved" if refusal.answer.approved else "denied"
            return adaptive.refusal_card("answered", f"It was {verdict} by {by} at {when}.", card=refusal.card)
        if refusal.kind == "forbidden":
            if refusal.policy_said is not None:  # the policy's own sentence says who may
                return adaptive.refusal_card("forbidden", refusal.policy_said, card=refusal.card)
            owner = await display_name(ctx, refusal.owner) if refusal.owner else None  # None: "the person who asked"
            return adaptive.refusal_card("forbidden", card=refusal.card, owner=owner)
        if refusal.kind in ("expired", "in_progress"):
            return adaptive.refusal_card(refusal.kind, r.message, card=r.card)
        return adaptive.refusal_card("unknown", r.message or "This card is not known here.")

    # --- after the resume: the card's outcome and the agent's reply --------------------
    async def _after_resume(self, ctx: TurnContext | None, r: ResumeResult, by: str, *, in_invoke: bool) -> None:
        """Post the agent's reply (or the chained card). When the click was answered earlier with
        "resuming…", or others share the conversation, also replace the card itself for everyone."""
        location = TeamsCardLocation.parse(r.card_location)
        if location is None and ctx is not None:
            location = TeamsCardLocation.of(ctx.activity)
        result = r.result or TurnResult(status="answered")
        chat = r.card.chat if r.card is not None else ""
        personal = is_personal(location)
        if ctx is not None and chat and chat_key(ctx.activity) != chat:
            # answered from the approvers' conversation: the reply belongs to the requesting one
            ctx, in_invoke = None, False
        asked, answer = r.card, r.answer

        @functools.cache
        def outcome() -> dict[str, Any]:  # built once, and only when a copy of the card is replaced
            assert asked is not None and answer is not None
            return adaptive.outcome_card(asked, answer, by, r.answered_at or 0.0, result)

        if asked is not None and answer is not None and location is not None:
            for other in (location.routed, location.escalated):  # the routed copy; issue 33: the escalated one
                if other is not None:
                    await self.post.replace_in(other, outcome())

        async def work(turn: TurnContext) -> None:
            here = location or TeamsCardLocation.of(turn.activity)
            replace_card = bool(here.activity_id) and (not in_invoke or not personal)
            if replace_card and asked is not None and answer is not None:
                await turn.update_activity(card_activity(outcome(), activity_id=here.activity_id))
            await self.post.deliver(turn, chat, result, here.here)

        if ctx is not None:
            await work(ctx)
        elif location is not None:
            await self.post.in_conversation(location, work)
        else:
            log.warning("teams: card %s resumed but has no stored location to answer in", r.card and r.card.card_id)

    def _finish_later(self, task: asyncio.Future[ResumeResult], by: str) -> None:
        async def finish() -> None:
            r = await task
            if r.outcome == "resumed":
                await self._after_resume(None, r, by, in_invoke=False)
            else:
                log.info("teams: late resume ended %s: %s", r.outcome, r.message)

        self._spawn(finish())

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        bg = asyncio.ensure_future(work)
        self._background.add(bg)
        bg.add_done_callback(self._done)

    def _done(self, bg: asyncio.Task[None]) -> None:
        self._background.discard(bg)
        if not bg.cancelled() and bg.exception() is not None:
            log.error("teams: finishing a resume failed", exc_info=bg.exception())

    async def drain(self, timeout: float = 30.0) -> None:
        """Wait for resumes still finishing after their click was answered (shutdown, tests)."""
        await self.admission.drain(timeout)
        if self._background:
            await asyncio.wait(set(self._background), timeout=timeout)

    # The bot added to a chat: a welcome with two example prompts. Nothing else on membership
    # events (botbuilder's member lookups are skipped); a redelivered one is not welcomed twice.
    async def on_conversation_update_activity(self, turn_context: TurnContext) -> None:
        act = turn_context.activity
        me = act.recipient.id if act.recipient is not None else None
        if not me or not any(m.id == me for m in act.members_added or []):
            return None
        if act.id and not await self.approvals.first_delivery(f"teams:activity:{chat_key(act)}:{act.id}"):
            return None
        await turn_context.send_activity(text_activity(words.WELCOME))
        return None

    async def on_installation_update(self, turn_context: TurnContext) -> None:
        return None
