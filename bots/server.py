"""The aiohttp server: one process serving every configured front end over one facade."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web

from chat_approvals.bots.admission import Admission
from chat_approvals.bots.approvers import ApproverDirectory, SlackLookup
from chat_approvals.bots.config import ServerConfig
from chat_approvals.bots.gate import build_gate, kept_results_dir, mount_gate, sandbox_tools
from chat_approvals.bots.http_api import mount_http_api
from chat_approvals.bots.logs import say
from chat_approvals.bots.readiness import WriteProbe
from chat_approvals.bots.slack_app import mount_slack
from chat_approvals.bots.slack_config import SlackConfig
from chat_approvals.bots.teams_auth import TokenValidator
from chat_approvals.bots.teams_bot import ROUTE as TEAMS_ROUTE
from chat_approvals.bots.teams_bot import TeamsConfig, mount_teams
from chat_approvals.bots.text_edge import may_see_details
from chat_approvals.bots.webhooks import Backoff, Deliverer, mount_webhooks, sink_id
from chat_approvals.core.agent import AgentFactory, default_factory, gated_factory, user_factory
from chat_approvals.core.approvals import Approvals
from chat_approvals.core.bootstrap import GateBuilder, Root, bootstrap
from chat_approvals.core.clock import Clock, SystemClock
from chat_approvals.core.models import StoreFault
from chat_approvals.core.observe import Metrics, observe
from chat_approvals.core.ports import Outbox
from chat_approvals.core.protocol import load_policy
from chat_approvals.core.sandbox import sweep_kept
from chat_approvals.core.sandbox.egress import Gate, GrantsBackend
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.open import open_objects, open_rows, shown_url

log = logging.getLogger("chat_approvals")

CONFIG: web.AppKey[ServerConfig] = web.AppKey("config", ServerConfig)
FACADE: web.AppKey[Approvals] = web.AppKey("facade", Approvals)
GATE: web.AppKey[Gate] = web.AppKey("gate", Gate)
ROOT: web.AppKey[Root[StoreIO]] = web.AppKey("root", Root)
T = TypeVar("T")


def build_factory(cfg: ServerConfig, gate: Gate | None = None) -> AgentFactory:
    """The agent of every turn and resume; `--confirm-tools` is checked against its tools here
    (ConfirmToolsError, a ValueError: the server does not start)."""
    base = (
        user_factory(cfg.agent)
        if cfg.agent
        else default_factory(cfg.model, sandbox_tools(gate, cfg), notes_dir=cfg.notes_dir)
    )
    return gated_factory(base, cfg.confirm_tools)


def open_root(
    cfg: ServerConfig,
    clock: Clock | None = None,
    factory: AgentFactory | None = None,
    gate: Callable[[GrantsBackend | None], Gate | None] | None = None,
) -> Root[StoreIO]:
    """The one call that builds a process's core from its configuration (serve, the CLI's store
    commands, the embedding API): what can be refused is refused before the store opens, then
    `core.bootstrap` builds the grant book, the gate on it, the agent, the services and the facade.
    `factory`: the agent (None: `--agent`, else the default agent on `--model`); `gate`: makes
    the egress gate on a backend (None: `--sandbox`'s)."""
    clock = clock or SystemClock()
    # The policy first: a bad file stops start-up (PolicyError names the line) before anything opens.
    policy = load_policy(cfg.policy) if cfg.policy else None
    on_grants = checked_gate(gate or (lambda backend: build_gate(cfg, clock, backend=backend)))
    metrics = Metrics(clock.now)
    rows = _opening(cfg.store, "--store", lambda: open_rows(cfg.store))
    objects = _opening(cfg.objects_url(), "--objects", lambda: open_objects(cfg.objects_url(), clock))
    store = StoreIO(observe(rows, metrics), observe(objects, metrics))
    # The policy's Slack workspace and user groups (installed by OAuth: each workspace's token, from the store).
    slack = SlackLookup.of(SlackConfig.from_env(), clock, store.ports().rows)
    approvers = ApproverDirectory(policy, teams_tenant=_teams_tenant(), slack=slack) if policy is not None else None
    return bootstrap(
        store,
        settings=cfg.protocol(),
        clock=clock,
        gate=on_grants,
        factory_on_gate=(lambda _gate: factory) if factory else (lambda built: build_factory(cfg, built)),
        policy=policy,
        approvers=approvers,
        metrics=metrics,
        audit_sinks=[sink_id(u) for u in cfg.audit_webhook],
    )


def checked_gate(make: Callable[[GrantsBackend | None], Gate | None]) -> GateBuilder | None:
    """The gate the root builds on the grant book, from `make` (None: no gate). A trial build,
    then dropped, checks its values and the sandbox's confinement now, before the store opens."""
    if make(None) is None:
        return None

    def on(backend: GrantsBackend | None) -> Gate:
        built = make(backend)
        assert built is not None  # the trial build made one
        return built

    return on


def serve_app(root: Root[StoreIO], cfg: ServerConfig, **kw: Any) -> web.Application:
    """`build_app` on what the root built: its facade, its gate and its outbox; the root itself is
    kept as `app[ROOT]` (its `close()` closes the store)."""
    app = build_app(root.approvals, cfg, gate=root.gate, outbox=root.outbox, **kw)
    app[ROOT] = root
    return app


def _opening(url: str, flag: str, opener: Callable[[], T]) -> T:
    """A store path that cannot be opened (a folder, a missing or read-only place) is a
    configuration mistake: one line naming the flag, not a traceback from sqlite3."""
    try:
        return opener()
    except (OSError, sqlite3.Error) as e:
        why = str(e)
        if isinstance(e, OSError) and e.strerror:
            why = f"{e.strerror}: {e.filename}" if e.filename else e.strerror
        raise ValueError(f"{flag} {url}: cannot open it ({why}); it must be a file in a folder you can write") from None


def _teams_tenant() -> str | None:
    """The app's own tenant, for bare Entra object ids in the policy (SingleTenant apps only)."""
    env = os.environ
    single = env.get("CHAT_APPROVALS_TEAMS_APP_TYPE", "").lower() == "singletenant"
    return env.get("CHAT_APPROVALS_TEAMS_TENANT_ID") if single else None


@web.middleware
async def store_faults(request: web.Request, handler: object) -> web.StreamResponse:
    """A store fault that outlasted its retries: say so plainly; the card stays answerable."""
    try:
        resp: web.StreamResponse = await handler(request)  # type: ignore[operator]
        return resp
    except StoreFault as e:
        log.warning("store fault on %s: %s", request.path, e)
        return web.json_response(
            {
                "outcome": "unavailable",
                "status": "unavailable",
                "message": f"the store is unavailable ({e}); try again",
            },
            status=503,
        )


WRITE_PROBE: web.AppKey[WriteProbe] = web.AppKey("write_probe", WriteProbe)


async def healthz(request: web.Request) -> web.Response:
    """Liveness: the process answers. Readiness (the store, the gate) is /readyz. Unauthenticated,
    so the details (the store's path) only for a loopback client or one with an API token."""
    cfg = request.app[CONFIG]
    if not may_see_details(request, cfg.tokens()):
        return web.json_response({"ok": True})
    return web.json_response({"ok": True, "store": shown_url(cfg.store), "http_api": bool(cfg.tokens())})


async def readyz(request: web.Request) -> web.Response:
    """200 only when the store answers a cheap read in time and (with --sandbox) the gate
    listens; otherwise 503 with the reason."""
    app, cfg = request.app, request.app[CONFIG]
    try:
        await asyncio.wait_for(app[FACADE].probe(), timeout=cfg.readyz_timeout)
    except TimeoutError:
        return _not_ready(f"the store did not answer within {cfg.readyz_timeout:g} s")
    except Exception as e:
        return _not_ready(f"the store is unavailable: {type(e).__name__}: {e}")
    problem = await app[WRITE_PROBE].problem(app[FACADE], cfg.readyz_timeout)  # reads alone are not enough
    if problem is not None:
        return _not_ready(problem)
    gate = app.get(GATE)
    if gate is not None and not gate.listening():
        return _not_ready("the egress gate is not listening")
    return web.json_response({"ready": True})


def _not_ready(reason: str) -> web.Response:
    log.warning("not ready: %s", reason)
    return web.json_response({"ready": False, "reason": reason}, status=503)


async def metrics_endpoint(request: web.Request) -> web.Response:
    body, content_type = request.app[FACADE].metrics.exposition()
    resp = web.Response(body=body)
    resp.headers["Content-Type"] = content_type  # carries its own version parameter
    return resp


def _click_platform(request: web.Request, body: bytes | None) -> str | None:
    """Which front end's click this request is, if it is one (for ack_seconds)."""
    if request.method != "POST":
        return None
    path = request.path
    if path.startswith("/v1/interrupts/") and path.endswith("/resume"):
        return "http"
    if body is None:
        return None
    if path == TEAMS_ROUTE and b'"invoke"' in body:
        return "teams"
    if body.startswith(b"payload="):  # Slack interactivity (form-encoded), on the Slack events path
        return "slack"
    return None


def ack_timer(metrics: Metrics, slack_path: str) -> Any:
    """Click to acknowledgement: from the request arriving to the response being ready. Slack and
    Teams acknowledge at once and resume after; the HTTP front end answers with the result."""

    @web.middleware
    async def mw(request: web.Request, handler: object) -> web.StreamResponse:
        body = await request.read() if request.method == "POST" and request.path in (slack_path, TEAMS_ROUTE) else None
        platform = _click_platform(request, body)
        started = time.perf_counter()
        try:
            resp: web.StreamResponse = await handler(request)  # type: ignore[operator]
            return resp
        finally:
            if platform is not None:
                metrics.ack_seconds.labels(platform).observe(time.perf_counter() - started)

    return mw


def build_app(
    approvals: Approvals,
    cfg: ServerConfig,
    *,
    sweep: bool = True,
    teams: TeamsConfig | None = None,
    gate: Gate | None = None,
    outbox: Outbox | None = None,
    teams_validator: TokenValidator | None = None,
    timers: bool | None = None,
) -> web.Application:
    """`gate`, `outbox`: the root's (`serve_app` passes them); the outbox is needed only with
    --audit-webhook. `teams_validator` is for tests only (a validator pointed at a local OpenID
    configuration); with an app id the server builds its own, on Bot Framework's endpoints.
    `timers`: run the durable timers' loop (reminders, escalation, expiry); None: with `sweep`."""
    metrics = approvals.metrics
    app = web.Application(middlewares=[ack_timer(metrics, "/slack/events"), store_faults])
    app[CONFIG] = cfg
    app[FACADE] = approvals
    app[WRITE_PROBE] = WriteProbe()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    if cfg.metrics:
        app.router.add_get("/metrics", metrics_endpoint)
    if cfg.tokens():
        mount_http_api(app, approvals, cfg.tokens())
    else:
        log.debug("no API token set: the HTTP front end (/v1) is off")  # the banner says so
    # One queue of resume work for every chat front end (bots/admission.py); closed after they are.
    admission = Admission(
        metrics,
        workers=cfg.resume_workers,
        capacity=cfg.resume_queue,
        patience=cfg.resume_patience,
        hold_max=cfg.resume_hold,
    )
    app.cleanup_ctx.append(_closing(admission))
    mount_slack(app, approvals, admission=admission)  # SLACK_* env: HTTP at /slack/events or Socket Mode
    teams_cfg = teams or TeamsConfig.from_env(os.environ)
    mount_teams(app, approvals, teams_cfg, host=cfg.host, say=say, validator=teams_validator, admission=admission)
    if gate is not None:
        app[GATE] = gate
        gate.on_decision = lambda allowed: metrics.gate.labels("allowed" if allowed else "refused").inc()
        mount_gate(app, gate)  # the sandbox's egress gate starts and stops with the app
    if cfg.audit_webhook:
        if outbox is None:
            raise ValueError("--audit-webhook needs the root's outbox (build the app with serve_app)")
        mount_webhooks(app, audit_deliverers(approvals, outbox, cfg))
    if sweep:
        kept = kept_results_dir(cfg) if gate is not None else None
        app.cleanup_ctx.append(_sweeper(approvals, cfg.sweep_every, kept))
    if sweep if timers is None else timers:
        app.cleanup_ctx.append(_timer_loop(approvals, cfg.timer_every))
    return app


def freeze_heap_at_startup(app: web.Application) -> None:
    """Once `app` has started (after every cleanup context's start-up: the store opened, Slack's
    auth.test), move every object alive then into the collector's permanent generation.

    Why: the process holds about 130,000 objects after its imports (Strands, botbuilder, Bolt,
    boto3, pydantic), all alive until it exits, and every full collection walked them all: about
    80 ms of CPU each time, on the event loop, in whatever request allocated past the threshold.
    In a 100-click Slack burst one such pause held up every ack behind it (bench.bench_slack,
    docs/benchmarks.md). Frozen, they are never walked again; objects made later are collected as before."""

    async def freeze(_: web.Application) -> None:
        log.debug("heap frozen at start-up: %d objects left out of later collections", freeze_heap())

    app.on_startup.append(freeze)


def freeze_heap() -> int:
    """Collect, then freeze what is left (see freeze_heap_at_startup). Returns the frozen count."""
    gc.collect()  # garbage from start-up is freed, not frozen
    gc.freeze()
    return gc.get_freeze_count()


def _closing(admission: Admission) -> Callable[[web.Application], AsyncIterator[None]]:
    async def ctx(_app: web.Application) -> AsyncIterator[None]:
        yield
        await admission.close()  # refuse new clicks, work off the queued ones (bounded)

    return ctx


def audit_deliverers(approvals: Approvals, outbox: Outbox, cfg: ServerConfig) -> list[Deliverer]:
    if not cfg.audit_webhook_secret:
        raise ValueError("--audit-webhook needs --audit-webhook-secret (the receiver verifies the signature with it)")
    deliverers = [
        Deliverer(
            url,
            cfg.audit_webhook_secret,
            outbox,
            approvals.clock,
            approvals.metrics,
            poll=cfg.audit_webhook_poll,
            backoff=Backoff(cap=cfg.audit_webhook_backoff_cap),
        )
        for url in dict.fromkeys(cfg.audit_webhook)  # named twice: delivered once
    ]

    def nudge() -> None:
        for d in deliverers:
            d.nudge()

    approvals.trail.on_outbox = nudge
    if not approvals.trail.sinks:  # the events would never reach the outbox: say so, not deliver nothing silently
        log.warning("audit webhooks: the facade was built without them as sinks; no event will be delivered")
    return deliverers


def _every(
    every: float, work: Callable[[], Awaitable[object]], failed: str
) -> Callable[[web.Application], AsyncIterator[None]]:
    """A cleanup context that runs `work` every `every` seconds while the app runs; a failure
    (a store fault) is logged as `failed` and tried again on the next round."""

    async def ctx(app: web.Application) -> AsyncIterator[None]:
        async def loop() -> None:
            while True:
                try:
                    await work()
                except Exception as e:
                    log.warning("%s: %s", failed, e)
                await asyncio.sleep(every)

        task = asyncio.create_task(loop())
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    return ctx


def _sweeper(
    approvals: Approvals, every: float, kept: Path | None = None
) -> Callable[[web.Application], AsyncIterator[None]]:
    """`kept`: run_script's kept results (issue 27.5), swept on the objects' horizon: a result is
    worth keeping only while its card can still be claimed again."""

    async def sweep() -> None:
        removed = await approvals.sweep()
        if kept is not None:
            removed += await asyncio.to_thread(sweep_kept, kept, older_than=approvals.sweep_horizon())
        if removed:
            log.info("sweep removed %d expired rows/objects", removed)

    return _every(every, sweep, "sweep failed")


def _timer_loop(approvals: Approvals, every: float) -> Callable[[web.Application], AsyncIterator[None]]:
    """Issue 33: every replica looks for due timers every `every` seconds; the one holding the
    timers' lease fires them (core/protocol/timers.py), the others find the lease taken."""
    return _every(every, approvals.fire_timers, "timers failed")
