"""What Slack shows when a card's timer fires (issue 33): a reminder as a thread reply under
each copy of the card, mentioning those who have not answered; an escalation as the card posted
to the escalation approvers, every copy saying so; an expired card updated in place on every copy,
then the agent's answer to the deny in the thread. Called from the front end's timer subscription
(bots/slack_app.py), after the timer was fired once (core/protocol/timers.py)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace

from chat_approvals.bots.slack_web import SlackWeb, Workspace
from chat_approvals.cards import slack_blocks as sb
from chat_approvals.cards.slack_chat import SlackCardLocation
from chat_approvals.core.approvals import Approvals
from chat_approvals.core.models import TurnResult
from chat_approvals.core.protocol.timers import TimerFired, is_escalated

log = logging.getLogger("chat_approvals.slack")


ShowTurn = Callable[[str, TurnResult, Workspace | None], Awaitable[None]]


async def show_timer(
    web: SlackWeb, event: TimerFired, approvals: Approvals | None = None, show_turn: ShowTurn | None = None
) -> None:
    """`show_turn(chat, result)`: how the front end shows a turn's end in its chat (the reply of a
    turn told of its deny at expiry)."""
    if event.card.platform != "slack":
        return
    loc = SlackCardLocation.parse(event.location)
    if loc is None:
        log.info("slack: card %s has no recorded location; its %s is not shown", event.card.card_id, event.kind)
        return
    ws = Workspace.of(loc)  # issue 31: every call for the card with the token of its workspace
    if event.kind == "expire":
        await web.update(loc, sb.expired_unanswered_message(event.card))
        if event.result is not None and show_turn is not None:  # the agent's answer to the deny
            await show_turn(event.card.chat, event.result, ws)
    elif event.kind == "remind":
        msg = sb.reminder_message(event.card, event.votes, is_escalated(event.card, event.at))
        for copy in (loc.here, loc.routed, loc.escalated):
            if copy is not None:  # a reply in the card's own thread (the card itself starts one in a channel)
                await web.post(copy.channel, copy.thread_ts or copy.ts, msg, workspace=ws)
    elif event.kind == "escalate" and approvals is not None:
        await _escalate(web, approvals, event, loc)


async def _escalate(web: SlackWeb, approvals: Approvals, event: TimerFired, loc: SlackCardLocation) -> None:
    """The card goes to the escalation approvers (their channel, else a reply in the requester's
    thread), and every copy says it was escalated and to whom. Buttons need the secret, which the
    server never holds (R19): the card is reissued with a fresh one and every copy re-rendered."""
    card, policy = event.card, event.card.policy
    if policy is None:
        return
    offer = await approvals.reissue(chat=card.chat, card_id=card.card_id)
    if offer is None:
        return  # answered or being resumed meanwhile
    ws = Workspace.of(loc)
    line = sb.escalated_line(card)
    routed = loc.routed
    here_msg = sb.card_message(card, offer.secret, offer.votes, routed_to=routed.channel if routed else None)
    await web.update(loc.here, sb.with_notice(here_msg, line))
    link = await web.permalink(loc.channel, loc.ts, workspace=ws)
    if routed is not None:
        await web.update(routed, sb.with_notice(sb.card_message(card, offer.secret, offer.votes, link=link), line))
    channel = policy.escalate_channel
    where = (channel, None) if channel else (loc.channel, loc.thread_ts or loc.ts)
    msg = sb.with_notice(sb.card_message(card, offer.secret, offer.votes, link=link if channel else None), line)
    ts = await web.post(where[0], where[1], msg, workspace=ws)
    escalated = SlackCardLocation.of(where[0], ts, where[1], team=loc.team, enterprise=loc.enterprise)
    if escalated is None:
        log.warning("slack: card %s not posted to its escalation approvers", card.card_id)
        return
    stored = replace(loc, escalated=escalated).stored()
    if not await approvals.record_card_location(chat=card.chat, card_id=card.card_id, location=stored):
        log.info("slack: card %s answered while it was escalated; its new copy is not recorded", card.card_id)
