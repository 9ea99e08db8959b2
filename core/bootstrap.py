"""Wiring: the one place the core's services are built and handed what each one uses.

`build_services` is called by the `Approvals` facade's constructor; `bots.server.build_approvals`
(used by `serve` and the CLI) opens the store from the configuration and calls the facade. No
service holds the facade: each gets the narrow ports and values it needs.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from chat_approvals.core.agent_factory import AgentFactory
from chat_approvals.core.audit import AuditTrail
from chat_approvals.core.context import ScopedAccess, ToolAccess
from chat_approvals.core.grants import GrantBook
from chat_approvals.core.history import History
from chat_approvals.core.lease import LeaseKeeper
from chat_approvals.core.models import Clock
from chat_approvals.core.pause import Pauser
from chat_approvals.core.paused_agents import PausedAgents
from chat_approvals.core.policy import ApproverCheck, Policy
from chat_approvals.core.ports import Objects, Rows, Store
from chat_approvals.core.resume import ResumeService
from chat_approvals.core.settings import Settings
from chat_approvals.core.turns import TurnRunner


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class Services:
    rows: Rows
    objects: Objects
    trail: AuditTrail
    keeper: LeaseKeeper
    pauser: Pauser
    history: History
    grants: GrantBook
    tool_access: ToolAccess
    turns: TurnRunner
    resumes: ResumeService


def build_services(
    store: Store,
    *,
    settings: Settings,
    clock: Clock,
    factory: AgentFactory,
    worker_id: str,
    policy: Policy | None = None,
    approvers: ApproverCheck | None = None,
    audit_sinks: Sequence[str] = (),
) -> Services:
    """`policy`: the approval policy file (None: only the owner answers, fixed grant TTL);
    `approvers`: who counts as an approver, per front end (bots/approvers.py); `audit_sinks`:
    the audit webhooks' ids (each audit event is written with one outbox item per sink)."""
    ports = store.ports()
    rows, objects, steps = ports.rows, ports.objects, ports.steps
    trail = AuditTrail(steps, retention=settings.retention, sinks=audit_sinks)  # every audit event
    keeper = LeaseKeeper(settings.heartbeat_every)  # renews claims and turn leases
    paused = PausedAgents()  # the Agents this process paused, for a click that reaches it
    pauser = Pauser(rows, steps, trail, settings, clock, policy, paused)
    history = History(settings, clock)
    grants = GrantBook(rows, trail, settings, clock)
    access = ScopedAccess(grants)  # what the model-facing tools may do, and nothing more
    turns = TurnRunner(
        rows=rows,
        steps=steps,
        settings=settings,
        clock=clock,
        keeper=keeper,
        history=history,
        pauser=pauser,
        factory=factory,
        tool_access=access,
        worker_id=worker_id,
    )
    resumes = ResumeService(
        rows=rows,
        objects=objects,
        steps=steps,
        settings=settings,
        clock=clock,
        keeper=keeper,
        grants=grants,
        history=history,
        pauser=pauser,
        factory=factory,
        tool_access=access,
        worker_id=worker_id,
        approvers=approvers,
        paused=paused,
    )
    return Services(rows, objects, trail, keeper, pauser, history, grants, access, turns, resumes)
