"""What the composition root (core/bootstrap.py) hands the facade: the built services and the
ports its thin calls read. Its own module so the facade and the root do not import each other."""

from __future__ import annotations

from dataclasses import dataclass

from chat_approvals.core.audit import AuditTrail
from chat_approvals.core.context import ToolAccess
from chat_approvals.core.grants import GrantBook
from chat_approvals.core.history import History
from chat_approvals.core.lease import LeaseKeeper
from chat_approvals.core.pause import Pauser
from chat_approvals.core.ports import Objects, Rows
from chat_approvals.core.resume import ResumeService
from chat_approvals.core.turns import TurnRunner


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
