"""The Slack Web API calls the front end makes, each one logged and survived on failure (the
answer is already stored by then), and the one auth.test per process Bolt and the front end share."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from slack_bolt.authorization import AuthorizeResult
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from chat_approvals.bots.slack_config import SlackConfig, web_client
from chat_approvals.cards import slack_blocks as sb
from chat_approvals.cards.slack_chat import SlackCardLocation

log = logging.getLogger("chat_approvals.slack")


class SlackWeb:
    def __init__(self, cfg: SlackConfig, client: AsyncWebClient | None = None) -> None:
        self.cfg = cfg
        self.client = client or web_client(cfg, cfg.bot_token)
        self._session: aiohttp.ClientSession | None = None
        self._auth: dict[str, Any] | None = None
        self._auth_lock = asyncio.Lock()

    async def authorize(self, enterprise_id: str | None, team_id: str | None) -> AuthorizeResult:
        """One auth.test per process, behind a lock (Bolt's own has none), then cached."""
        if self._auth is None:
            async with self._auth_lock:
                if self._auth is None:
                    self._auth = dict((await self.client.auth_test()).data)  # type: ignore[arg-type]
        auth = self._auth
        return AuthorizeResult(
            enterprise_id=enterprise_id or auth.get("enterprise_id"),
            team_id=team_id or auth.get("team_id"),
            bot_token=self.cfg.bot_token,
            bot_id=auth.get("bot_id"),
            bot_user_id=auth.get("user_id"),
        )

    async def warm_up(self) -> None:
        """auth.test at startup, so the first request's ack does not wait for a round trip to Slack."""
        if self.client.session is None:
            # One pooled session for every Web API call: without it slack_sdk opens a new session, a
            # new connection (and a TLS handshake, against slack.com) for each call, and closes it.
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.client.timeout))
            self.client.session = self._session
        try:
            await self.authorize(None, None)
        except (SlackApiError, aiohttp.ClientError, TimeoutError) as e:
            log.warning("slack auth.test failed at startup (will retry on the first request): %s", e)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def call(self, what: str, fn: Callable[..., Awaitable[Any]], **kwargs: Any) -> Any:
        """A Web API call whose failure must not stop the rest (the answer is already stored)."""
        try:
            return await fn(**kwargs)
        except (SlackApiError, aiohttp.ClientError, TimeoutError) as e:
            log.warning("slack %s failed: %s", what, e)
            return None

    async def post(self, channel: str, thread_ts: str | None, msg: sb.SlackMessage) -> str | None:
        kwargs: dict[str, Any] = {"channel": channel, "text": msg.text, "blocks": msg.block_dicts()}
        if thread_ts:
            kwargs["thread_ts"] = thread_ts
        r = await self.call("chat.postMessage", self.client.chat_postMessage, **kwargs)
        return str(r["ts"]) if r is not None else None

    async def update(self, loc: SlackCardLocation | None, msg: sb.SlackMessage, *, or_post: bool = False) -> bool:
        """chat.update in place; with `or_post`, a message that is gone gets a new one in its thread.
        A card also posted to the approvers' channel (routing) has that copy updated too."""
        if loc is None:
            return False
        if loc.escalated is not None:  # issue 33: the copy posted to the escalation approvers
            await self.update(loc.escalated, msg)
        if loc.routed is not None:
            await self.update(loc.routed, msg)
            loc = loc.here
        try:
            await self.client.chat_update(channel=loc.channel, ts=loc.ts, text=msg.text, blocks=msg.block_dicts())
            return True
        except SlackApiError as e:
            log.warning("slack chat.update failed: %s", e.response.get("error"))
            if or_post and e.response.get("error") in ("message_not_found", "cant_update_message"):
                await self.post(loc.channel, loc.thread_ts, msg)
        except (aiohttp.ClientError, TimeoutError) as e:
            log.warning("slack chat.update failed: %s", e)
        return False

    async def ephemeral(self, channel: str | None, user: str, thread_ts: str | None, msg: sb.SlackMessage) -> None:
        if not channel:
            return
        kwargs: dict[str, Any] = {"channel": channel, "user": user, "text": msg.text, "blocks": msg.block_dicts()}
        if thread_ts:
            kwargs["thread_ts"] = thread_ts
        await self.call("chat.postEphemeral", self.client.chat_postEphemeral, **kwargs)

    async def permalink(self, channel: str, ts: str) -> str | None:
        link = await self.call("chat.getPermalink", self.client.chat_getPermalink, channel=channel, message_ts=ts)
        return str(link["permalink"]) if link is not None and link.get("permalink") else None
