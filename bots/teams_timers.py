"""What Teams shows when a card's timer fires (issue 33): a reminder as a message in each copy's
conversation with @mentions of those who have not answered (by Entra object id, named as Teams
knows them); an expired card replaced in place on every copy. Called from the front end's timer
subscription (bots/teams_front.py) after the timer fired once (core/protocol/timers.py)."""

from __future__ import annotations

import functools
import html
import logging

from botbuilder.core import MessageFactory, TurnContext
from botbuilder.schema import ChannelAccount, Mention

from chat_approvals.bots.teams_compat import TeamsCardLocation
from chat_approvals.bots.teams_post import TeamsPoster, display_name
from chat_approvals.cards import adaptive
from chat_approvals.cards import wording as words
from chat_approvals.core.models import ApprovalCard, Vote
from chat_approvals.core.protocol.timers import TimerFired

log = logging.getLogger(__name__)


async def show_timer(post: TeamsPoster, event: TimerFired) -> None:
    if event.card.platform != "teams":
        return
    loc = TeamsCardLocation.parse(event.location)
    if loc is None:
        log.info("teams: card %s has no recorded location; its %s is not shown", event.card.card_id, event.kind)
        return
    if event.kind == "expire":
        card = adaptive.expired_unanswered_card(event.card)
        await post.replace_in(loc.here, card)
        await post.replace_in(loc.routed, card)
        result = event.result
        if result is not None:  # the agent's answer to the deny, in the requesting conversation
            here = loc.here

            async def deliver(turn: TurnContext) -> None:
                await post.deliver(turn, event.card.chat, result, here)

            try:
                await post.in_conversation(here, deliver)
            except Exception as e:
                log.warning("teams: the reply after card %s expired was not posted: %s", event.card.card_id, e)
    elif event.kind == "remind":
        for copy in (loc.here, loc.routed):
            if copy is None:
                continue
            try:
                await post.in_conversation(
                    copy, functools.partial(_remind, card=event.card, votes=event.votes, where=copy)
                )
            except Exception as e:  # one copy's failure must not stop the other's
                log.warning("teams: reminder for card %s not posted: %s", event.card.card_id, e)


async def _remind(turn: TurnContext, *, card: ApprovalCard, votes: list[Vote], where: TeamsCardLocation) -> None:
    people, entries = words.waiting_for(card, votes)
    tenant = where.tenant
    names: dict[str, tuple[str, str]] = {}  # identity or approver entry -> (object id, name)
    for who in [*people, *entries]:
        oid = who.rsplit(":", 1)[-1]
        identity = who if who.startswith("teams:") else f"teams:{tenant}:{oid}"
        name = card.owner_name if who == card.owner and card.owner_name else await display_name(turn, identity)
        names[who] = (oid, name or "an approver")
    mentions: list[Mention] = []

    def mention(who: str) -> str:
        oid, name = names.get(who, ("", who))
        text = f"<at>{html.escape(name)}</at>"
        if oid:
            mentions.append(Mention(mentioned=ChannelAccount(id=oid, name=name), text=text, type="mention"))
        return text

    msg = MessageFactory.text(adaptive.reminder_text(card, votes, mention))
    msg.entities = list(mentions)
    await turn.send_activity(msg)
