"""Server wiring for the sandbox and its egress gate (core/sandbox/egress, core/sandbox/runner).

The composition root (core/bootstrap.py) builds the gate on the grant book, before the agent
factory (the run_script tool closes over it); it starts and stops with the aiohttp app.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from aiohttp import web

from chat_approvals.bots.config import ServerConfig
from chat_approvals.core.clock import Clock
from chat_approvals.core.sandbox import NotConfined, detect_confinement, make_run_script
from chat_approvals.core.sandbox.egress import Gate, GateConfig, GrantsBackend

log = logging.getLogger("chat_approvals.gate")


def gate_config(cfg: ServerConfig) -> GateConfig:
    return GateConfig(
        listen_host=cfg.gate_host,
        port=cfg.gate_port,
        allow=cfg.gate_allow,
        deny=cfg.gate_deny,
        resolve=cfg.gate_resolve,
        package_index=cfg.package_index or None,
        grant_recheck=cfg.gate_grant_recheck,
    )


def build_gate(cfg: ServerConfig, clock: Clock | None = None, backend: GrantsBackend | None = None) -> Gate | None:
    """None when the sandbox is off. Bad --gate-* values raise ValueError (the CLI prints it), and
    so does a sandbox that cannot be confined without --sandbox-unconfined (before anything is opened)."""
    if not cfg.sandbox:
        return None
    gate = Gate(gate_config(cfg), backend=backend, clock=clock)
    if not cfg.agent:
        require_confinement(cfg)
    return gate


def require_confinement(cfg: ServerConfig) -> None:
    conf = detect_confinement()
    if not conf.confined and not cfg.sandbox_unconfined:
        raise NotConfined(
            f"--sandbox: {conf.note}. Install bubblewrap (scripts/setup does), or start with "
            "--sandbox-unconfined to accept that"
        )


def kept_results_dir(cfg: ServerConfig) -> Path:
    """Where run_script keeps a resumed run's result for a repeat attempt; swept by the server."""
    return Path(cfg.notes_dir).parent / "runs"


def sandbox_tools(gate: Gate | None, cfg: ServerConfig) -> list[object]:
    """Raises NotConfined (a ValueError the CLI prints) when bubblewrap cannot confine the sandbox
    and the operator did not pass --sandbox-unconfined."""
    if gate is None:
        return []
    # Results kept for a repeat attempt of a resumed run (issue 27.5) live beside the notes.
    runs = kept_results_dir(cfg)
    return [
        make_run_script(gate, limits=cfg.sandbox_limits(), allow_unconfined=cfg.sandbox_unconfined, results_dir=runs)
    ]


def confinement_line(cfg: ServerConfig) -> str:
    """What the start-up output says about the sandbox."""
    if not cfg.sandbox:
        return "off (--sandbox)"
    return f"on; {detect_confinement().note}"


def mount_gate(app: web.Application, gate: Gate) -> None:
    app.cleanup_ctx.append(_lifecycle(gate))


def _lifecycle(gate: Gate) -> Callable[[web.Application], AsyncIterator[None]]:
    async def ctx(app: web.Application) -> AsyncIterator[None]:
        await gate.start()
        log.info("egress gate on %s:%d; package index %s", gate.cfg.listen_host, gate.port,
                 gate.cfg.package_index or "off")  # fmt: skip
        yield
        await gate.close()

    return ctx
