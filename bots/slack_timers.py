"""What Slack shows when a card's timer fires (issue 33): a reminder as a thread reply under
each copy of the card, mentioning those who have not answered; an expired card updated in place
on every copy. Called from the front end's timer subscription (bots/slack_app.py), after the
timer was fired once (core/protocol/timers.py), so each reminder is posted once."""

from __future__ import annotations

import logging

from chat_approvals.bots.slack_web import SlackWeb
from chat_approvals.cards import slack_blocks as sb
from chat_approvals.cards.slack_chat import SlackCardLocation
from chat_approvals.core.protocol.timers import TimerFired

log = logging.getLogger("chat_approvals.slack")


async def show_timer(web: SlackWeb, event: TimerFired) -> None:
    if event.card.platform != "slack":
        return
    loc = SlackCardLocation.parse(event.location)
    if loc is None:
        log.info("slack: card %s has no recorded location; its %s is not shown", event.card.card_id, event.kind)
        return
    if event.kind == "expire":
        await web.update(loc, sb.expired_unanswered_message(event.card))
    elif event.kind == "remind":
        msg = sb.reminder_message(event.card, event.votes)
        for copy in (loc.here, loc.routed):
            if copy is not None:  # a reply in the card's own thread (the card itself starts one in a channel)
                await web.post(copy.channel, copy.thread_ts or copy.ts, msg)
