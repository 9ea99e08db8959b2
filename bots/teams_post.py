"""What the Teams front end sends: a turn's (or a resume's) message or card in its conversation,
the routed copy in the approvers' conversation, and a posted card replaced for everyone, from
any process (through the stored conversation reference); and what it asks Teams back (a name)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from botbuilder.core import TurnContext
from botbuilder.core.teams import TeamsInfo
from botbuilder.integration.aiohttp import CloudAdapter
from botbuilder.schema import ResourceResponse

import chat_approvals.core.protocol.wording as wording
from chat_approvals.bots import teams_compat
from chat_approvals.bots.teams_activity import WAITING, card_activity, name_of, text_activity, user_of
from chat_approvals.bots.teams_compat import TeamsCardLocation
from chat_approvals.cards import adaptive
from chat_approvals.cards import effects as fx
from chat_approvals.cards import wording as words
from chat_approvals.core.approvals import Approvals
from chat_approvals.core.identity import parse_teams_user
from chat_approvals.core.models import ApprovalCard, CardOffer, TurnResult

log = logging.getLogger(__name__)


class TeamsPoster:
    def __init__(self, approvals: Approvals, adapter: CloudAdapter, app_id: str, route_to: str | None) -> None:
        self.approvals = approvals
        self.adapter = adapter
        self.app_id = app_id
        self.route_to = route_to

    async def in_conversation(
        self, location: TeamsCardLocation, work: Callable[[TurnContext], Awaitable[None]]
    ) -> None:
        await teams_compat.continue_conversation(self.adapter, location, work, app_id=self.app_id)

    async def deliver(self, ctx: TurnContext, chat: str, result: TurnResult, location: TeamsCardLocation) -> None:
        """Send what a turn (or a resume) ended with. A new card's location is stored for later updates."""
        effect = fx.turn_effect(result)
        if isinstance(effect, fx.PostCard):
            await self._post_card(ctx, chat, effect.offer, location)
        elif isinstance(effect, fx.Waiting):
            await ctx.send_activity(text_activity(effect.hint or WAITING))
        else:  # answered, busy
            await ctx.send_activity(text_activity(effect.text or "(the agent gave no text)"))

    async def _post_card(self, ctx: TurnContext, chat: str, offer: CardOffer, location: TeamsCardLocation) -> None:
        try:
            sent: ResourceResponse | None = await ctx.send_activity(
                card_activity(adaptive.approval_card(offer.card, offer.secret), summary=words.preview(offer.card))
            )
        except Exception as e:  # not posted after retries: a card nobody sees must not hold the chat
            log.warning("teams: card %s could not be posted: %s", offer.card.card_id, e)
            await self.approvals.withdraw(chat=chat, card_id=offer.card.card_id, why="teams post failed")
            await ctx.send_activity(text_activity(wording.WITHDRAWN))
            return
        if sent is None or not sent.id:
            log.warning("teams: card %s posted without an activity id; it cannot be updated", offer.card.card_id)
            return
        posted = location.here.posted_as(str(sent.id))
        if offer.card.policy is not None and self.route_to and self.route_to != posted.conversation_id:
            posted = replace(posted, routed=await self._route(posted, offer.card, offer.secret))
        where = posted.stored()
        if not await self.approvals.record_card_location(chat=chat, card_id=offer.card.card_id, location=where):
            log.warning("teams: card %s location not recorded (no longer open)", offer.card.card_id)
        # A card shown again: its earlier copies (both, if routed) become read-only. After the
        # new post, so they never point "below" at a card that failed to appear.
        old = TeamsCardLocation.parse(offer.replaces)
        if old is not None:
            await self.replace_in(old.here, adaptive.shown_again_card(offer.card))
            await self.replace_in(old.routed, adaptive.shown_again_card(offer.card))

    async def _route(self, where: TeamsCardLocation, card: ApprovalCard, secret: str) -> TeamsCardLocation | None:
        """Post the card to the policy's approvers' conversation too, with a link to the requesting
        one; returns where it went (kept with the card's location, so both update in place)."""
        assert self.route_to is not None
        target = where.in_conversation(self.route_to)
        sent: list[str] = []

        async def work(turn: TurnContext) -> None:
            r = await turn.send_activity(card_activity(adaptive.approval_card(card, secret, link=where.deep_link)))
            if r is not None and r.id:
                sent.append(str(r.id))

        try:
            await self.in_conversation(target, work)
        except Exception as e:  # the requester's card stands; the approvers' copy is a convenience
            log.warning("teams: card %s not posted to the approvers' conversation: %s", card.card_id, e)
            return None
        return target.posted_as(sent[0]) if sent else None

    async def show_votes(
        self, ctx: TurnContext, votes: fx.ShowVotes, stored: dict[str, str] | None, secret: str
    ) -> dict[str, Any]:
        """A vote that did not complete the quorum: every copy shows the votes so far, re-rendered
        with the secret the click carried (the server never holds it, R19). Returns the copy for
        the conversation the click came from."""
        act, names = ctx.activity, []
        for v in votes.votes:
            if v.user == user_of(act):
                names.append(name_of(act))
            else:
                names.append(await display_name(ctx, v.user) or "an approver")
        location = TeamsCardLocation.parse(stored)
        card = adaptive.approval_card(votes.card, secret, voters=names)
        link = location.deep_link if location is not None else None
        routed_card = adaptive.approval_card(votes.card, secret, voters=names, link=link)
        if location is not None:
            await self.replace_in(location.here, card)
            await self.replace_in(location.routed, routed_card)
            await self.replace_in(location.escalated, routed_card)  # issue 33
        here = act.conversation.id if act.conversation else None
        return card if location is None or here == location.conversation_id else routed_card

    async def replace_in(self, location: TeamsCardLocation | None, card: dict[str, Any]) -> None:
        """Replace a posted card for everyone in its conversation (from any process)."""
        if location is None or not location.activity_id:
            return
        activity_id = location.activity_id

        async def work(turn: TurnContext) -> None:
            await turn.update_activity(card_activity(card, activity_id=activity_id))

        try:
            await self.in_conversation(location, work)
        except Exception as e:
            log.warning("teams: a card could not be updated: %s", e)


async def display_name(ctx: TurnContext, user: str) -> str | None:
    """Who may answer, as a name when Teams can tell us quickly (by Entra object id)."""
    who = parse_teams_user(user)
    if who is None:
        return None
    try:
        member = await asyncio.wait_for(TeamsInfo.get_member(ctx, who.aad_object_id), timeout=2.0)
        return str(member.name) if member.name else None
    except Exception as e:  # a lookup failure only costs the nicer wording
        log.info("teams: member name lookup failed: %s", e)
        return None


def is_personal(location: TeamsCardLocation | None) -> bool:
    """A one-to-one chat with the bot, read from the parsed conversation reference."""
    if location is None:
        return False
    try:
        return location.is_personal
    except ValueError as e:  # a stored reference we cannot read: treat the chat as shared
        log.warning("teams: stored conversation reference unreadable: %s", e)
        return False
