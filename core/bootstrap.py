"""The composition root: the one place the core is built, in this order: the grant book, the
egress gate on it (when there is one), the agent factory (its tools may close over the gate), the
services, and the facade handed those services.

`bootstrap` is called once per process by `bots.server.open_root` (serve, the CLI and the
embedding API all go through it) and directly by tests and the bench. No service holds the
facade, and nothing is wired after construction: each part is handed what it uses when built.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from chat_approvals.core.agent.context import ScopedAccess
from chat_approvals.core.agent.factory import AgentFactory, default_factory
from chat_approvals.core.agent.paused_agents import PausedAgents
from chat_approvals.core.agent.strands_compat import (
    copy_model_call_inputs_directly,
    run_tool_calls_to_their_end,
    skip_empty_plugin_scans,
    skip_needless_message_copies,
    skip_unloaded_tool_folder,
    skip_unrecorded_serialisation,
    skip_unrecorded_spans,
    skip_unrecorded_thread_context,
)
from chat_approvals.core.approvals import Approvals
from chat_approvals.core.models import Clock, SystemClock
from chat_approvals.core.observe.metrics import Metrics
from chat_approvals.core.ports import Outbox, Ports, Store
from chat_approvals.core.protocol.audit import AuditTrail
from chat_approvals.core.protocol.grants import GrantBook
from chat_approvals.core.protocol.history import History
from chat_approvals.core.protocol.lease import LeaseKeeper
from chat_approvals.core.protocol.pause import Pauser
from chat_approvals.core.protocol.policy import ApproverCheck, Policy
from chat_approvals.core.protocol.resume import ResumeService
from chat_approvals.core.protocol.turns import TurnRunner
from chat_approvals.core.sandbox.egress import Gate, GrantsBackend
from chat_approvals.core.services import Services
from chat_approvals.core.settings import Settings

S = TypeVar("S", bound=Store)

GateBuilder = Callable[[GrantsBackend], Gate]
"""Builds the egress gate on its grants backend (the grant book)."""
FactoryBuilder = Callable[[Gate | None], AgentFactory]
"""Builds the agent factory once the gate exists (the sandbox tool closes over it)."""


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class Root(Generic[S]):
    """What the root built: the facade, the store it runs on (closed with `close()`, by whoever
    opened it), the outbox port (the audit webhooks' senders read it), and the gate, if any."""

    approvals: Approvals
    store: S
    outbox: Outbox
    gate: Gate | None = None

    def close(self) -> None:
        self.store.close()


def bootstrap(
    store: S,
    *,
    settings: Settings | None = None,
    clock: Clock | None = None,
    agent_factory: AgentFactory | None = None,
    gate: GateBuilder | None = None,
    factory_on_gate: FactoryBuilder | None = None,
    worker_id: str | None = None,
    policy: Policy | None = None,
    approvers: ApproverCheck | None = None,
    metrics: Metrics | None = None,
    audit_sinks: Sequence[str] = (),
    held_agents: int = 128,
) -> Root[S]:
    """`agent_factory`: the agent of every turn and resume (None: the default scripted agent), or
    `factory_on_gate`, called with the built gate (or None) for a factory whose tools use it.
    `gate`: builds the egress gate on the grant book. `policy`: the approval policy file (None:
    only the owner answers, fixed grant TTL); `approvers`: who counts as an approver, per front
    end (bots/approvers.py); `audit_sinks`: the audit webhooks' ids (each audit event is written
    with one outbox item per sink). `held_agents`: how many paused Agents this process keeps for
    a click that reaches it (0: every click resumes from the stored snapshot, as another
    process would; the bench and tests measure that path).

    The store is the caller's: if building fails after it was handed over, it is closed here."""
    settings = settings or Settings()
    clock = clock or SystemClock()
    skip_unrecorded_serialisation()  # Strands' span text, built only when a span records it
    skip_needless_message_copies()  # nor a second copy of the messages per model call
    skip_unrecorded_thread_context()  # nor OpenTelemetry's context carried into each store hop's thread
    skip_empty_plugin_scans()  # nor a scan of Strands' own two plugins per Agent, which hold no hooks
    skip_unrecorded_spans()  # nor the attributes of a span that records nothing
    copy_model_call_inputs_directly()  # and a model call's inputs copied without deepcopy's memo
    skip_unloaded_tool_folder()  # nor a look for ./tools per Agent when nothing is loaded from it
    run_tool_calls_to_their_end()  # nor a tool call's generators left for asyncio's finalizer
    try:
        ports = store.ports()
        trail = AuditTrail(ports.steps, retention=settings.retention, sinks=audit_sinks)  # every audit event
        grants = GrantBook(ports.rows, trail, settings, clock)
        built_gate = gate(grants) if gate is not None else None
        factory = factory_on_gate(built_gate) if factory_on_gate else agent_factory or default_factory()
        worker = worker_id or default_worker_id()
        services = build_services(
            ports, trail, grants, settings=settings, clock=clock, factory=factory, worker_id=worker,
            policy=policy, approvers=approvers, held_agents=held_agents,
        )  # fmt: skip
        approvals = Approvals(
            services,
            settings=settings,
            clock=clock,
            metrics=metrics or Metrics(clock.now),  # counted at the facade, the boundary (docs/operating.md)
            worker_id=worker,
            policy=policy,
            approvers=approvers,
        )
    except BaseException:
        store.close()  # nothing started: do not leave the store open behind the error
        raise
    return Root(approvals, store, ports.outbox, built_gate)


def build_services(
    ports: Ports,
    trail: AuditTrail,
    grants: GrantBook,
    *,
    settings: Settings,
    clock: Clock,
    factory: AgentFactory,
    worker_id: str,
    policy: Policy | None = None,
    approvers: ApproverCheck | None = None,
    held_agents: int = 128,
) -> Services:
    rows, objects, steps = ports.rows, ports.objects, ports.steps
    keeper = LeaseKeeper(settings.heartbeat_every)  # renews claims and turn leases
    paused = PausedAgents(held_agents)  # the Agents this process paused, for a click that reaches it
    pauser = Pauser(rows, steps, trail, settings, clock, policy, paused)
    history = History(settings, clock)
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
        unrefused=grants.unrefused,  # a new turn's refusals known to be none until one is recorded
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
