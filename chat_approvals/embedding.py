"""The aiohttp application of `chat-approvals serve`, built for a team's own aiohttp service.

`build_app` wires what `serve` wires (the store, the facade, the Slack, Teams and /v1 routes, the
resume queue, the sweeper, with `--sandbox` the egress gate) and adds what `serve` does after
`run_app` returns: closing the store. Mount it with `host.add_subapp(prefix, app)`: aiohttp then
runs its start-up and clean-up with the host's. See docs/embedding.md.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web
from strands import Agent

from chat_approvals.bots.config import ServerConfig
from chat_approvals.bots.server import FACADE, open_root, serve_app
from chat_approvals.core.agent import AgentFactory, gated_factory, prepare
from chat_approvals.core.approvals import Approvals
from chat_approvals.core.bootstrap import Root
from chat_approvals.store.aio import StoreIO

log = logging.getLogger("chat_approvals")


def build_app(config: ServerConfig | None = None, agent_factory: Callable[[], Agent] | None = None) -> web.Application:
    """The Slack (`/slack/events` or Socket Mode), Teams (`/api/messages`) and HTTP (`/v1/...`,
    with `config.api_token` set) routes, plus `/healthz`, `/readyz` and `/metrics`, as one aiohttp
    application to mount under a prefix of yours (`host.add_subapp("/approvals", app)`) or to run
    on its own (`web.run_app(app)`).

    `config`: `ServerConfig()` reads `CHAT_APPROVALS_*` variables, as the CLI does; pass fields to
    override them. `host`/`port` are not bound here (your service binds), but `host` still decides
    whether an unauthenticated Teams endpoint is served at all (loopback only).

    `agent_factory`: called with no arguments for every turn, and for every resume that continues
    from the store (another replica, a restart); it must return a fresh `strands.Agent` with the
    same tools each time (a resume whose agent lacks the paused turn's tool cannot continue it).
    The approval tool and the batch hook are added to what it returns, and `config.confirm_tools`
    is checked against its tools here (a name that matches none raises ValueError). None:
    `config.agent` (`module:function`) if set, else the default agent on `config.model`.

    Raises ValueError for a bad configuration (a bad policy file, model, `--confirm-tools` name, or
    a sandbox that cannot be confined) before anything is opened or started.
    """
    cfg = config if config is not None else ServerConfig()
    factory = gated_factory(_checked(agent_factory), cfg.confirm_tools) if agent_factory else None
    root = open_root(cfg, factory=factory)
    try:
        app = serve_app(root, cfg)
    except BaseException:
        root.close()  # nothing started: do not leave the store open behind the error
        raise
    app.on_cleanup.append(_close_store(root))  # after the cleanup contexts: the queue drained, the gate closed
    return app


def approvals_of(app: web.Application) -> Approvals:
    """The facade behind an application from `build_app`: run turns, resume cards, list and revoke
    grants, read the audit trail from your own code (the same calls the front ends make)."""
    return app[FACADE]


def _checked(fn: Callable[[], Agent]) -> AgentFactory:
    """A factory that returns something other than an Agent fails its turn with a clear error."""
    if not callable(fn):
        raise ValueError(f"agent_factory must be callable, not {type(fn).__name__}")

    def make() -> Agent:
        agent = fn()
        if not isinstance(agent, Agent):
            raise TypeError(f"agent_factory returned {type(agent).__name__}, not a strands Agent")
        return prepare(agent)

    return make


def _close_store(root: Root[StoreIO]) -> Callable[[web.Application], Awaitable[None]]:
    async def close(_app: web.Application) -> None:
        root.close()
        log.debug("store closed")

    return close
