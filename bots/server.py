"""The aiohttp server: one process serving every configured front end over one facade."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable

from aiohttp import web

from bots.config import ServerConfig
from bots.gate import mount_gate, sandbox_tools
from bots.http_api import mount_http_api
from bots.slack_app import mount_slack
from bots.teams_auth import TokenValidator
from bots.teams_bot import TeamsConfig, mount_teams
from core.agent_factory import AgentFactory, default_factory, gated_factory, user_factory
from core.approvals import Approvals
from core.clock import Clock, SystemClock
from core.egress import Gate
from store.aio import StoreIO
from store.base import StoreError
from store.open import open_objects, open_rows

log = logging.getLogger("chat_approvals")

CONFIG: web.AppKey[ServerConfig] = web.AppKey("config", ServerConfig)


def build_factory(cfg: ServerConfig, gate: Gate | None = None) -> AgentFactory:
    """The agent of every turn and resume; `--confirm-tools` is checked against its tools here
    (ConfirmToolsError, a ValueError: the server does not start)."""
    base = (
        user_factory(cfg.agent)
        if cfg.agent
        else default_factory(cfg.model, sandbox_tools(gate, cfg), notes_dir=cfg.notes_dir)
    )
    return gated_factory(base, cfg.confirm_tools)


def build_approvals(
    cfg: ServerConfig, clock: Clock | None = None, factory: AgentFactory | None = None, gate: Gate | None = None
) -> Approvals:
    clock = clock or SystemClock()
    store = StoreIO(open_rows(cfg.store), open_objects(cfg.objects, clock))
    return Approvals(store, settings=cfg.protocol(), clock=clock, agent_factory=factory or build_factory(cfg, gate))


@web.middleware
async def store_faults(request: web.Request, handler: object) -> web.StreamResponse:
    """A store fault that outlasted its retries: say so plainly; the card stays answerable."""
    try:
        resp: web.StreamResponse = await handler(request)  # type: ignore[operator]
        return resp
    except StoreError as e:
        log.warning("store fault on %s: %s", request.path, e)
        return web.json_response(
            {
                "outcome": "unavailable",
                "status": "unavailable",
                "message": f"the store is unavailable ({e}); try again",
            },
            status=503,
        )


async def healthz(request: web.Request) -> web.Response:
    cfg = request.app[CONFIG]
    return web.json_response({"ok": True, "store": cfg.store.split("?")[0], "http_api": bool(cfg.tokens())})


def build_app(
    approvals: Approvals,
    cfg: ServerConfig,
    *,
    sweep: bool = True,
    teams: TeamsConfig | None = None,
    gate: Gate | None = None,
    teams_validator: TokenValidator | None = None,
) -> web.Application:
    """`teams_validator` is for tests only (a validator pointed at a local OpenID configuration);
    with an app id the server builds its own, on Bot Framework's endpoints."""
    app = web.Application(middlewares=[store_faults])
    app[CONFIG] = cfg
    app.router.add_get("/healthz", healthz)
    if cfg.tokens():
        mount_http_api(app, approvals, cfg.tokens())
    else:
        log.info("no API token set: the HTTP front end (/v1) is off")
    mount_slack(app, approvals)  # SLACK_* env: HTTP at /slack/events or Socket Mode; off when unset
    teams_cfg = teams or TeamsConfig.from_env(os.environ)
    mount_teams(app, approvals, teams_cfg, host=cfg.host, validator=teams_validator)  # /api/messages
    if gate is not None:
        mount_gate(app, gate, approvals)  # the sandbox's egress gate starts and stops with the app
    if sweep:
        app.cleanup_ctx.append(_sweeper(approvals, cfg.sweep_every))
    return app


def _sweeper(approvals: Approvals, every: float) -> Callable[[web.Application], AsyncIterator[None]]:
    async def ctx(app: web.Application) -> AsyncIterator[None]:
        async def loop() -> None:
            while True:
                try:
                    removed = await approvals.sweep()
                    if removed:
                        log.info("sweep removed %d expired rows/objects", removed)
                except Exception as e:
                    log.warning("sweep failed: %s", e)
                await asyncio.sleep(every)

        task = asyncio.create_task(loop())
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    return ctx
