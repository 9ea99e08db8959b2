"""What the composition root (core/bootstrap.py) hands the facade: the built services and the
ports its thin calls read. Its own module so the facade and the root do not import each other."""

from __future__ import annotations

from dataclasses import dataclass

from chat_approvals.core.agent.context import ToolAccess
from chat_approvals.core.ports import Objects, Rows
from chat_approvals.core.protocol.audit import AuditTrail
from chat_approvals.core.protocol.grants import GrantBook
from chat_approvals.core.protocol.history import History
from chat_approvals.core.protocol.lease import LeaseKeeper
from chat_approvals.core.protocol.pause import Pauser
from chat_approvals.core.protocol.resume import ResumeService
from chat_approvals.core.protocol.turns import TurnRunner


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
