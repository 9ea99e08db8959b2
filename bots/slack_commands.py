"""`/approvals` (list, revoke) and the Revoke buttons of its ephemeral list: a user's grants in
this workspace only (a user's other workspaces are never listed or touched)."""

from __future__ import annotations

import logging
from collections.abc import Coroutine
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncRespond

import chat_approvals.core.protocol.wording as wording
from chat_approvals.bots.slack_oauth import SlackOAuth
from chat_approvals.bots.slack_web import SlackWeb, payload_workspace
from chat_approvals.cards import slack_blocks as sb
from chat_approvals.cards.slack_answer import (
    SlackPayloadError,
    command_actor,
    parse_command,
    parse_revoke_click,
    read_block_actions,
)
from chat_approvals.cards.slack_chat import in_workspace
from chat_approvals.core.approvals import Approvals
from chat_approvals.core.models import Grant, StoreFault

log = logging.getLogger("chat_approvals.slack")

UNAVAILABLE = f":warning: {wording.STORE_UNAVAILABLE}"


class SlackCommands:
    def __init__(self, approvals: Approvals, web: SlackWeb, oauth: SlackOAuth | None = None) -> None:
        self.approvals = approvals
        self.web = web
        self.oauth = oauth  # many workspaces: an org-wide install's person is the enterprise's (R17)

    async def _person(self, strict: str | None, enterprise: object, user: object) -> str | None:
        return strict if self.oauth is None else await self.oauth.person(strict, enterprise, user)

    async def answer_at_once(
        self, ack: AsyncAck, command: dict[str, Any], respond: AsyncRespond
    ) -> Coroutine[Any, Any, None] | None:
        """Ack the command: help and usage in the ack itself; otherwise the work to run after it."""
        cmd = parse_command(command.get("text"))
        if cmd.verb in ("usage", "help"):
            msg = sb.help_message() if cmd.verb == "help" else sb.usage_message()
            await ack(text=msg.text, blocks=msg.block_dicts(), response_type="ephemeral")
            return None
        await ack()
        return self.command(command, cmd.verb, cmd.subject, respond)

    async def _workspace_grants(self, user: str, team: str) -> list[Grant]:
        return [g for g in await self.approvals.grants(user=user) if in_workspace(g.chat, team)]

    async def _revoke_here(self, user: str, team: str, subject: str) -> list[Grant]:
        """Revoke in every chat of this workspace (a user's other workspaces are not touched)."""
        chats = sorted({g.chat for g in await self._workspace_grants(user, team)})
        revoked: list[Grant] = []
        for chat in chats:
            revoked += await self.approvals.revoke(user=user, chat=chat, subject=subject)
        return revoked

    async def command(self, command: dict[str, Any], verb: str, subject: str | None, respond: AsyncRespond) -> None:
        team = str(command.get("team_id") or "")
        try:
            user = await self._person(command_actor(command), command.get("enterprise_id"), command.get("user_id"))
            if user is None:  # no full identity: nothing of anyone's can be listed or revoked
                msg = sb.reply_message("Your workspace could not be told from this command; nothing was changed.")
            elif verb == "revoke" and subject:
                msg = sb.revoked_message(subject, await self._revoke_here(user, team, subject))
            else:
                msg = sb.grants_message(await self._workspace_grants(user, team))
        except StoreFault as e:
            log.warning("slack /approvals: store fault: %s", e)
            msg = sb.reply_message(UNAVAILABLE)
        await self.web.call("response_url", respond, text=msg.text, blocks=msg.block_dicts(), response_type="ephemeral")

    async def revoke_click(self, body: dict[str, Any], respond: AsyncRespond) -> None:
        try:
            r = parse_revoke_click(body)
        except SlackPayloadError as e:
            log.info("slack revoke refused: %s", e)
            await self.web.call("response_url", respond, text=sb.refusal_invalid().text, response_type="ephemeral",
                                replace_original=False)  # fmt: skip
            return
        team = r.team or read_block_actions(body).team_id or ""
        try:
            ws = payload_workspace(body)
            user = await self._person(r.user, ws.enterprise, (body.get("user") or {}).get("id")) or r.user
            if not in_workspace(r.chat, team):
                revoked: list[Grant] = []
            else:
                revoked = await self.approvals.revoke(user=user, chat=r.chat, subject=r.subject)
            notice = sb.revoked_message(r.subject, revoked).text
            msg = sb.grants_message(await self._workspace_grants(user, team), notice=sb.escape(notice))
        except StoreFault as e:
            log.warning("slack revoke: store fault: %s", e)
            msg = sb.reply_message(UNAVAILABLE)
        # The list is ephemeral: only its response_url can replace it.
        await self.web.call("response_url", respond, text=msg.text, blocks=msg.block_dicts(), replace_original=True)
