"""Many workspaces (issue 31): Bolt's own OAuth flow (`/slack/install`, `/slack/oauth_redirect`, the
`state` check) on this project's store, and each workspace's bot token for every Web API call,
refreshed by slack_sdk's token rotator (the one Bolt uses) before it expires.

The pieces live in bots/slack_install.py (the stores); this module puts them together for the
front end: `SlackOAuth.build` from the configuration, the token source `SlackWeb` and Bolt's
`authorize` both use, and the two aiohttp routes of the install.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiohttp
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.oauth.async_oauth_flow import AsyncOAuthFlow
from slack_bolt.oauth.async_oauth_settings import AsyncOAuthSettings
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackTokenRotationError
from slack_sdk.oauth.installation_store import Bot
from slack_sdk.oauth.token_rotation.async_rotator import AsyncTokenRotator

from chat_approvals.bots.slack_config import SlackConfig, web_client
from chat_approvals.bots.slack_install import SignedStates, StoreInstallations, TokenBox, record_key
from chat_approvals.bots.slack_web import NoToken, Workspace
from chat_approvals.cards import wording as cw
from chat_approvals.core.approvals import Approvals
from chat_approvals.core.identity import SlackUser
from chat_approvals.core.models import StoreFault, StoreUnavailable
from chat_approvals.core.ports import InstallationRecords

log = logging.getLogger("chat_approvals.slack.oauth")

STATE_SECONDS = 600  # an install begun and not finished within ten minutes starts again


class NotInstalled(NoToken):
    """No installation for the workspace (never installed, uninstalled, or its token revoked)."""


class TokenUnreadable(NoToken, StoreUnavailable):
    """The store could not be read: the installation is not known to be gone (an outage to the
    front end, no call to Slack)."""


class RefreshFailed(NoToken):
    """The installation's token expires and Slack did not give a new one."""


class InstalledTokens:
    """The bot token of a workspace (or of its enterprise's org-wide install), from the store;
    refreshed through slack_sdk's `AsyncTokenRotator` when it expires within `minutes`, and the
    refreshed one saved. One refresh at a time per installation in this process."""

    def __init__(self, store: StoreInstallations, rotator: AsyncTokenRotator, minutes: int) -> None:
        self.store = store
        self.rotator = rotator
        self.minutes = minutes
        self._locks: dict[str, asyncio.Lock] = {}

    async def _find(self, ws: Workspace) -> Bot:
        try:
            bot = await self.store.async_find_bot(enterprise_id=ws.enterprise, team_id=ws.team)
        except StoreFault as e:
            raise TokenUnreadable(f"the installation could not be read: {e}") from e
        if bot is None:
            raise NotInstalled(f"not installed for team {ws.team} enterprise {ws.enterprise}")
        return bot

    async def bot(self, ws: Workspace | None) -> Bot:
        if ws is None:
            raise NotInstalled("no workspace named")
        bot = await self._find(ws)
        if bot.bot_refresh_token is None:
            return bot
        key = record_key(bot.enterprise_id, bot.team_id, bot.is_enterprise_install)
        async with self._locks.setdefault(key, asyncio.Lock()):
            bot = await self._find(ws)  # again: a call that held the lock may have refreshed it
            try:
                fresh = await self.rotator.perform_bot_token_rotation(bot=bot, minutes_before_expiration=self.minutes)
            except (SlackTokenRotationError, aiohttp.ClientError, TimeoutError) as e:
                log.warning("slack token refresh for %s failed: %s", key, e)
                raise RefreshFailed(f"refresh failed for {key}") from e
            if fresh is None:
                return bot
            try:
                await self.store.async_save_bot(fresh)
            except StoreFault as e:  # the new token works now; the next call refreshes again
                log.warning("slack refreshed token for %s not saved: %s", key, e)
            log.info("slack token for %s refreshed", key)
            return fresh

    async def bot_token(self, workspace: Workspace | None) -> str:
        token = (await self.bot(workspace)).bot_token
        if not token:
            raise NotInstalled("the installation holds no bot token")
        return token

    async def authorize(
        self, enterprise_id: str | None, team_id: str | None, is_enterprise_install: bool | None
    ) -> AuthorizeResult | None:
        """Bolt's `authorize` for events and commands: the stored bot, no auth.test round trip."""
        try:
            bot = await self.bot(Workspace(None if is_enterprise_install else team_id, enterprise_id))
        except NoToken as e:
            log.info("slack request not authorized: %s", e)
            return None
        return AuthorizeResult(
            enterprise_id=bot.enterprise_id or enterprise_id,
            team_id=team_id or bot.team_id,
            bot_token=bot.bot_token,
            bot_id=bot.bot_id,
            bot_user_id=bot.bot_user_id,
            bot_scopes=bot.bot_scopes,
        )


def installed_tokens(cfg: SlackConfig, records: InstallationRecords) -> InstalledTokens:
    """Each workspace's token from the installations in `records`, sealed with the configured key."""
    store = StoreInstallations(records, TokenBox.parse(cfg.token_key))
    rotator = AsyncTokenRotator(client_id=cfg.client_id, client_secret=cfg.client_secret, client=web_client(cfg))
    return InstalledTokens(store, rotator, cfg.token_rotation_minutes)


@dataclass
class SlackOAuth:
    """What OAuth mode adds to the front end."""

    cfg: SlackConfig
    installations: StoreInstallations
    states: SignedStates
    tokens: InstalledTokens
    settings: AsyncOAuthSettings

    @classmethod
    def build(cls, cfg: SlackConfig, approvals: Approvals) -> SlackOAuth:
        # The approver directory's tokens, when it has them: one refresher per installation here.
        shared = getattr(getattr(approvals.approvers, "slack", None), "tokens", None)
        tokens = shared if isinstance(shared, InstalledTokens) else installed_tokens(cfg, approvals.installations)
        installations = tokens.store
        # The state's MAC key: the client secret, which only this app and Slack hold.
        states = SignedStates(approvals, cfg.client_secret, approvals.clock, STATE_SECONDS)
        settings = AsyncOAuthSettings(
            client_id=cfg.client_id,
            client_secret=cfg.client_secret,
            scopes=cfg.scopes,
            user_scopes=[],
            redirect_uri=cfg.redirect_uri or None,
            install_path=cfg.install_path,
            redirect_uri_path=cfg.redirect_path,
            installation_store=installations,
            installation_store_bot_only=True,
            token_rotation_expiration_minutes=cfg.token_rotation_minutes,
            state_store=states,
            state_expiration_seconds=STATE_SECONDS,
            logger=log,
        )
        return cls(cfg, installations, states, tokens, settings)

    async def org_wide(self, enterprise: str) -> bool:
        """Is the app installed org-wide in this Enterprise Grid org?"""
        return await self.installations.records.installation(record_key(enterprise, None, True)) is not None

    async def person(self, strict: str | None, enterprise: object, user: object) -> str | None:
        """R17 under an org-wide install (issue 31): in an enterprise whose install is org-wide, a
        person is the enterprise and the user id, whatever workspace they write or click from (a
        click there may carry `team: null`); elsewhere `strict`, the payload's own identity."""
        if not isinstance(enterprise, str) or not enterprise or not await self.org_wide(enterprise):
            return strict
        across = SlackUser.across(enterprise, user)
        return across.key if across is not None else strict

    async def clicker(self, strict: str, ws: Workspace, user: str) -> tuple[str | None, str | None]:
        """A click's person (`person`) if its workspace has a usable installation; else (None, the
        sentence that tells the clicker why). StoreFault when the installations cannot be read."""
        actor = await self.person(strict, ws.enterprise, user) or strict
        try:
            await self.tokens.bot_token(ws)
        except TokenUnreadable:
            raise  # a StoreFault: the click is told the store is unavailable
        except NoToken as e:
            log.info("slack click refused: %s", e)
            return None, cw.TOKEN_REFRESH_FAILED if isinstance(e, RefreshFailed) else cw.NOT_INSTALLED
        return actor, None

    async def uninstalled(self, enterprise_id: str | None, team_id: str | None) -> None:
        """app_uninstalled, or the bot's token revoked: the installation is removed."""
        await self.installations.async_delete_all(enterprise_id=enterprise_id, team_id=team_id)

    def mount(self, app: web.Application, flow: AsyncOAuthFlow) -> None:
        """GET the install page and the redirect Slack sends the installer back to."""

        async def install(request: web.Request) -> web.StreamResponse:
            return await _guarded(flow.handle_installation, request)

        async def redirect(request: web.Request) -> web.StreamResponse:
            return await _guarded(flow.handle_callback, request)

        app.router.add_get(self.cfg.install_path, install)
        app.router.add_get(self.cfg.redirect_path, redirect)


async def _guarded(
    handler: Callable[[AsyncBoltRequest], Awaitable[BoltResponse]], request: web.Request
) -> web.StreamResponse:
    """Bolt's page, or a plain 503 when the store cannot be reached (never a 500)."""
    try:
        return await to_aiohttp_response(await handler(await to_bolt_request(request)))
    except StoreFault as e:
        log.warning("slack install: store fault: %s", e)
        return web.Response(status=503, text="The approvals store is unavailable; try the install again shortly.")
