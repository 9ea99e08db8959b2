"""The Slack Web API calls the front end makes, each one logged and survived on failure (the
answer is already stored by then), and the one auth.test per process Bolt and the front end share.

One workspace (SLACK_BOT_TOKEN): every call carries that token. Many (OAuth, issue 31): each call
carries the token of the workspace it is for (`workspace=`; a card's location names its own), from
`tokens` (bots/slack_oauth.py); a workspace without one gets no call at all.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp
from slack_bolt.authorization import AuthorizeResult
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from chat_approvals.bots.slack_config import SlackConfig, web_client
from chat_approvals.cards import slack_blocks as sb
from chat_approvals.cards.slack_chat import SlackCardLocation

log = logging.getLogger("chat_approvals.slack")


@dataclass(frozen=True)
class Workspace:
    """A Slack workspace, or (enterprise alone) the Enterprise Grid org of an org-wide install."""

    team: str | None
    enterprise: str | None = None

    @classmethod
    def of(cls, loc: SlackCardLocation | None) -> Workspace | None:
        return cls(loc.team, loc.enterprise) if loc is not None and (loc.team or loc.enterprise) else None


def payload_workspace(body: Mapping[str, Any]) -> Workspace:
    """The workspace an interactivity payload came from, as far as it says: `team: null` (an
    org-wide install) leaves the enterprise alone."""

    def part(name: str) -> Mapping[str, Any]:
        value = body.get(name)
        return value if isinstance(value, dict) else {}

    team, enterprise = part("team").get("id"), part("enterprise").get("id") or part("team").get("enterprise_id")
    return Workspace(team if isinstance(team, str) else None, enterprise if isinstance(enterprise, str) else None)


class NoToken(Exception):
    """No token for the workspace: not installed (or uninstalled), or its refresh failed."""


class TokenSource(Protocol):
    async def bot_token(self, workspace: Workspace | None) -> str:
        """The workspace's bot token, refreshed if it is about to expire; NoToken if there is none."""
        ...


class SlackWeb:
    def __init__(
        self, cfg: SlackConfig, client: AsyncWebClient | None = None, tokens: TokenSource | None = None
    ) -> None:
        self.cfg = cfg
        self.tokens = tokens  # None: the one bot token the client carries
        self.client = client or web_client(cfg, None if tokens is not None else cfg.bot_token)
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
        if self.tokens is not None:
            return  # many workspaces: no one token to test
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
        except (SlackApiError, aiohttp.ClientError, TimeoutError, NoToken) as e:
            log.warning("slack %s failed: %s", what, e)
            return None

    async def _web(self, method: str, **args: Any) -> Any:
        """A chat.* Web API method through slack_sdk's client: its retries, rate-limit handling and
        errors, as the method's own wrapper (`chat_update` …) would call it. Those wrappers only
        look for Block Kit models to turn into dicts and drop None values, and these bodies hold
        plain JSON values only (12 us a call less)."""
        return await self.client.api_call(method, json=args)

    async def token(self, workspace: Workspace | None) -> dict[str, Any]:
        """The `token=` argument for a call in `workspace` (none in single-token mode); NoToken."""
        if self.tokens is None:
            return {}
        return {"token": await self.tokens.bot_token(workspace)}

    async def _api(self, what: str, fn: Callable[..., Awaitable[Any]], workspace: Workspace | None, **kw: Any) -> Any:
        try:
            kw.update(await self.token(workspace))
        except NoToken as e:
            log.warning("slack %s not sent: %s", what, e)
            return None
        return await self.call(what, fn, **kw)

    async def post(
        self, channel: str, thread_ts: str | None, msg: sb.SlackMessage, *, workspace: Workspace | None = None
    ) -> str | None:
        kwargs: dict[str, Any] = {"channel": channel, "text": msg.text, "blocks": msg.block_dicts()}
        if thread_ts:
            kwargs["thread_ts"] = thread_ts
        r = await self._api("chat.postMessage", functools.partial(self._web, "chat.postMessage"), workspace, **kwargs)
        return str(r["ts"]) if r is not None else None

    async def update(
        self,
        loc: SlackCardLocation | None,
        msg: sb.SlackMessage,
        *,
        or_post: bool = False,
        workspace: Workspace | None = None,
    ) -> bool:
        """chat.update in place; with `or_post`, a message that is gone gets a new one in its thread.
        A card also posted to the approvers' channel (routing) has that copy updated too. The token:
        `workspace`'s, else the one the location names (the workspace the card was posted in)."""
        if loc is None:
            return False
        workspace = workspace or Workspace.of(loc)
        if loc.escalated is not None:  # issue 33: the copy posted to the escalation approvers
            await self.update(loc.escalated, msg, workspace=workspace)
        if loc.routed is not None:
            await self.update(loc.routed, msg, workspace=workspace)
            loc = loc.here
        try:
            token = await self.token(workspace)
        except NoToken as e:
            log.warning("slack chat.update not sent: %s", e)
            return False
        try:
            kwargs: dict[str, Any] = {
                "channel": loc.channel,
                "ts": loc.ts,
                "text": msg.text,
                "blocks": msg.block_dicts(),
            }
            await self._web("chat.update", **kwargs, **token)
            return True
        except SlackApiError as e:
            log.warning("slack chat.update failed: %s", e.response.get("error"))
            if or_post and e.response.get("error") in ("message_not_found", "cant_update_message"):
                await self.post(loc.channel, loc.thread_ts, msg, workspace=workspace)
        except (aiohttp.ClientError, TimeoutError) as e:
            log.warning("slack chat.update failed: %s", e)
        return False

    async def ephemeral(
        self,
        channel: str | None,
        user: str,
        thread_ts: str | None,
        msg: sb.SlackMessage,
        *,
        workspace: Workspace | None = None,
    ) -> None:
        if not channel:
            return
        kwargs: dict[str, Any] = {"channel": channel, "user": user, "text": msg.text, "blocks": msg.block_dicts()}
        if thread_ts:
            kwargs["thread_ts"] = thread_ts
        await self._api("chat.postEphemeral", functools.partial(self._web, "chat.postEphemeral"), workspace, **kwargs)

    async def respond(self, response_url: str | None, msg: sb.SlackMessage) -> None:
        """An ephemeral answer through an interaction's response_url: it needs no token, so it reaches
        a clicker whose workspace has none (an uninstalled app)."""
        if not response_url:
            return
        hook = AsyncWebhookClient(response_url, session=self.client.session)
        await self.call(
            "response_url", hook.send, text=msg.text, blocks=msg.block_dicts(), response_type="ephemeral",
            replace_original=False,
        )  # fmt: skip

    async def permalink(self, channel: str, ts: str, *, workspace: Workspace | None = None) -> str | None:
        link = await self._api(
            "chat.getPermalink", self.client.chat_getPermalink, workspace, channel=channel, message_ts=ts
        )
        return str(link["permalink"]) if link is not None and link.get("permalink") else None

    async def open_view(self, trigger_id: str, view: dict[str, Any], *, workspace: Workspace | None = None) -> None:
        """views.open: the Approve with edits modal (issue 32); the trigger id lasts 3 s."""
        await self._api("views.open", self.client.views_open, workspace, trigger_id=trigger_id, view=view)
