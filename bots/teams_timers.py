"""What Teams shows when a card's timer fires (issue 33): a reminder as a message in each copy's
conversation with @mentions of those who have not answered (by Entra object id, named as Teams
knows them); an escalation as the card posted to the escalation approvers' conversation with
@mentions, every copy saying so; an expired card replaced in place on every copy, then the agent's
answer to the deny. Called from the front end's timer subscription (bots/teams_front.py) after the
timer fired once (core/protocol/timers.py)."""

from __future__ import annotations

import asyncio
import functools
import html
import logging
from dataclasses import replace

from botbuilder.core import TurnContext
from botbuilder.core.teams import TeamsInfo
from botbuilder.schema import ChannelAccount, Mention

from chat_approvals.bots.teams_activity import card_activity, text_activity
from chat_approvals.bots.teams_compat import TeamsCardLocation
from chat_approvals.bots.teams_post import TeamsPoster
from chat_approvals.cards import adaptive
from chat_approvals.cards import wording as words
from chat_approvals.core.approvals import Approvals
from chat_approvals.core.models import ApprovalCard, Vote
from chat_approvals.core.protocol.timers import TimerFired, is_escalated

log = logging.getLogger(__name__)


async def show_timer(post: TeamsPoster, event: TimerFired, approvals: Approvals | None = None) -> None:
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
        await post.replace_in(loc.escalated, card)
        result = event.result
        if result is not None:  # the agent's answer to the deny, in the requesting conversation
            here = loc.here

            async def deliver(turn: TurnContext) -> None:
                await post.deliver(turn, event.card.chat, result, here)

            try:
                await post.in_conversation(here, deliver)
            except Exception as e:
                log.warning("teams: the reply after card %s expired was not posted: %s", event.card.card_id, e)
    elif event.kind == "escalate" and approvals is not None:
        await _escalate(post, approvals, event, loc)
    elif event.kind == "remind":
        for copy in (loc.here, loc.routed, loc.escalated):
            if copy is None:
                continue
            try:
                await post.in_conversation(
                    copy, functools.partial(_remind, card=event.card, votes=event.votes, where=copy, at=event.at)
                )
            except Exception as e:  # one copy's failure must not stop the other's
                log.warning("teams: reminder for card %s not posted: %s", event.card.card_id, e)


async def _escalate(post: TeamsPoster, approvals: Approvals, event: TimerFired, loc: TeamsCardLocation) -> None:
    """The card goes to the escalation approvers (their conversation, else the requester's), with
    @mentions of them, and every copy says it was escalated and to whom. Its buttons need the
    secret the server never holds (R19): the card is reissued with a fresh one and every copy
    replaced."""
    card, policy = event.card, event.card.policy
    if policy is None:
        return
    offer = await approvals.reissue(chat=card.chat, card_id=card.card_id)
    if offer is None:
        return  # answered or being resumed meanwhile
    line, secret = adaptive.escalated_text(card), offer.secret
    await post.replace_in(loc.here, adaptive.with_notice(adaptive.approval_card(card, secret), line))
    linked = adaptive.with_notice(adaptive.approval_card(card, secret, link=loc.deep_link), line)
    await post.replace_in(loc.routed, linked)
    conversation = policy.escalate_conversation
    target = loc.in_conversation(conversation) if conversation else loc.here.posted_as("")
    sent: list[str] = []

    async def work(turn: TurnContext) -> None:
        r = await turn.send_activity(card_activity(linked if conversation else adaptive.with_notice(
            adaptive.approval_card(card, secret), line)))  # fmt: skip
        if r is not None and r.id:
            sent.append(str(r.id))
        await _mention(turn, card, [], list(policy.escalate_to), target, "Escalated to you: {who}. The card is above.")

    try:
        await post.in_conversation(target, work)
    except Exception as e:  # the other copies stand, and say so
        log.warning("teams: card %s not posted to its escalation approvers: %s", card.card_id, e)
        return
    if sent:
        stored = replace(loc, escalated=target.posted_as(sent[0])).stored()
        if not await approvals.record_card_location(chat=card.chat, card_id=card.card_id, location=stored):
            log.info("teams: card %s answered while it was escalated; its new copy is not recorded", card.card_id)


async def _remind(
    turn: TurnContext, *, card: ApprovalCard, votes: list[Vote], where: TeamsCardLocation, at: float
) -> None:
    escalated = is_escalated(card, at)
    people, entries = words.waiting_for(card, votes, escalated)
    await _mention(turn, card, people, entries, where, None, votes, escalated)


async def _mention(
    turn: TurnContext,
    card: ApprovalCard,
    people: list[str],
    entries: list[str],
    where: TeamsCardLocation,
    template: str | None,
    votes: list[Vote] | None = None,
    escalated: bool = False,
) -> None:
    """A message @mentioning people (identities) and approver entries (Entra ids), named as Teams
    knows them: a reminder (`template` None) or `template` with `{who}`."""
    names: dict[str, tuple[str, str]] = {}  # identity or approver entry -> (object id, name)
    for who in [*people, *entries]:
        oid = who.rsplit(":", 1)[-1]
        name = card.owner_name if who == card.owner and card.owner_name else await _member_name(turn, oid)
        names[who] = (oid, name or "an approver")
    mentions: list[Mention] = []

    def mention(who: str) -> str:
        oid, name = names.get(who, ("", who))
        text = f"<at>{html.escape(name)}</at>"
        if oid:
            mentions.append(Mention(mentioned=ChannelAccount(id=oid, name=name), text=text, type="mention"))
        return text

    if template is None:
        text = adaptive.reminder_text(card, votes or [], mention, escalated)
    else:
        text = template.format(who=", ".join(mention(w) for w in [*people, *entries]))
    msg = text_activity(text)
    msg.entities = list(mentions)
    await turn.send_activity(msg)


async def _member_name(turn: TurnContext, object_id: str) -> str | None:
    """A member's name as Teams knows them, by Entra object id (a failure only costs the name)."""
    if turn.activity.channel_data is None:  # a proactive turn has none; TeamsInfo reads it for a team id
        turn.activity.channel_data = {}
    try:
        member = await asyncio.wait_for(TeamsInfo.get_member(turn, object_id), timeout=2.0)
        return str(member.name) if member.name else None
    except Exception as e:
        log.info("teams: member name lookup failed: %s", e)
        return None
