"""The Teams ingress: `POST /api/messages` on the project's aiohttp server. With a Microsoft App
id every request's Bot Framework token is checked (bots/teams_auth.py); without one the endpoint
is served only on a loopback address, to loopback clients. The front end itself is
bots/teams_front.py; its settings, bots/teams_config.py."""

from __future__ import annotations

import contextlib
import ipaddress
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, NamedTuple

from aiohttp import web
from botbuilder.core import TurnContext
from botbuilder.integration.aiohttp import CloudAdapter
from botbuilder.schema import ActivityTypes

from chat_approvals.bots import teams_compat
from chat_approvals.bots.admission import Admission
from chat_approvals.bots.teams_activity import chat_key, parse_command, user_of
from chat_approvals.bots.teams_auth import TokenValidator
from chat_approvals.bots.teams_config import ROUTE, TeamsConfig
from chat_approvals.bots.teams_front import ApprovalsTeamsBot
from chat_approvals.bots.teams_token import TokenMetrics
from chat_approvals.core.approvals import Approvals

# Re-exported: the names the server, the CLI and the tests know the Teams front end by.
__all__ = ["ROUTE", "TEAMS", "TeamsConfig", "TeamsFrontEnd", "chat_key", "mount_teams", "parse_command", "user_of"]

log = logging.getLogger(__name__)


def _is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class TeamsFrontEnd(NamedTuple):
    bot: ApprovalsTeamsBot
    adapter: CloudAdapter
    startup_note: str


async def _on_error(context: TurnContext, error: Exception) -> None:
    log.error("teams: turn failed: %s", error, exc_info=error)
    if context.activity.type == ActivityTypes.message:
        with contextlib.suppress(Exception):
            await context.send_activity("Sorry: the app failed on that message.")


TEAMS: web.AppKey[TeamsFrontEnd] = web.AppKey("teams", TeamsFrontEnd)


def mount_teams(
    app: web.Application,
    approvals: Approvals,
    cfg: TeamsConfig,
    *,
    host: str,
    say: Callable[[str], Any] = print,
    validator: TokenValidator | None = None,
    admission: Admission | None = None,
) -> TeamsFrontEnd | None:
    """Add `POST /api/messages` to the server. With no Microsoft App id the endpoint would be
    unauthenticated, so it is served only when the server binds a loopback address (and it refuses
    non-loopback clients); it says which at start-up."""
    auth = cfg.auth
    auth.check()
    if not auth.enabled and not _is_loopback(host):
        say(
            f"Teams: {ROUTE} is OFF: no Microsoft App id is configured and {host} is not a loopback address "
            "(set CHAT_APPROVALS_TEAMS_APP_ID with its password or certificate, or bind to 127.0.0.1)"
        )
        return None
    if auth.enabled and validator is None:
        validator = TokenValidator(auth.app_id)  # Bot Framework's own OpenID configuration
    adapter = teams_compat.make_adapter(auth, validator if auth.enabled else None)
    adapter.on_turn_error = _on_error
    tokens = teams_compat.token_source(adapter)
    if tokens is not None:  # a slow or failing identity endpoint shows on /metrics
        tokens.metrics = TokenMetrics.on(approvals.metrics.registry)
    bot = ApprovalsTeamsBot(approvals, adapter, cfg, admission)

    async def messages(request: web.Request) -> web.StreamResponse:
        if not auth.enabled and not _is_loopback(request.remote):
            raise web.HTTPForbidden(text="unauthenticated Teams endpoint: local clients only")
        return await teams_compat.process(adapter, request, bot, auth_enabled=auth.enabled)

    async def drain(_app: web.Application) -> None:
        await bot.drain()

    async def close_clients(_app: web.Application) -> None:
        bot.unsubscribe()
        bot.unsubscribe_timers()
        await teams_compat.close_clients(adapter)  # on cleanup: after drain, so no turn still posts

    app.router.add_post(ROUTE, messages)
    app.on_shutdown.append(drain)
    app.on_cleanup.append(close_clients)
    if auth.enabled and validator is not None:
        keys = validator

        async def signing_keys(_app: web.Application) -> AsyncIterator[None]:
            await keys.start()  # bounded: a slow key endpoint delays start-up by fetch_timeout at most
            yield
            await keys.close()

        app.cleanup_ctx.append(signing_keys)
    if auth.enabled:
        tenant = f", tenant {auth.tenant_id}" if auth.app_type == "SingleTenant" else ""
        kind = "certificate" if auth.certificate_thumbprint else "password"
        note = f"Teams: {ROUTE} authenticated as Microsoft App {auth.app_id} ({auth.app_type}{tenant}, {kind})"
    else:
        note = f"Teams: {ROUTE} is UNAUTHENTICATED (no Microsoft App id): local clients on {host} only"
    say(note)
    front = TeamsFrontEnd(bot, adapter, note)
    app[TEAMS] = front
    return front
