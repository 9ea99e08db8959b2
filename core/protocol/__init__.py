"""The protocol: turns, pauses, claims and resumes, grants, the approval policy, the audit trail.

The names below are this room's public face, for `bots/` and embedders; they load on first use, so
importing one module of the room does not import the rest (and no import cycle runs through here).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chat_approvals.core.protocol.audit import AuditTrail
    from chat_approvals.core.protocol.events import Claimed
    from chat_approvals.core.protocol.grants import GrantBook
    from chat_approvals.core.protocol.policy import Policy, PolicyError, load_policy
    from chat_approvals.core.protocol.resume import UNKNOWN, ResumeService
    from chat_approvals.core.protocol.turns import TurnRunner

_WHERE = {
    "Policy": "chat_approvals.core.protocol.policy",
    "PolicyError": "chat_approvals.core.protocol.policy",
    "load_policy": "chat_approvals.core.protocol.policy",
    "UNKNOWN": "chat_approvals.core.protocol.resume",
    "ResumeService": "chat_approvals.core.protocol.resume",
    "TurnRunner": "chat_approvals.core.protocol.turns",
    "GrantBook": "chat_approvals.core.protocol.grants",
    "AuditTrail": "chat_approvals.core.protocol.audit",
    "Claimed": "chat_approvals.core.protocol.events",
}
__all__ = [
    "UNKNOWN",
    "AuditTrail",
    "Claimed",
    "GrantBook",
    "Policy",
    "PolicyError",
    "ResumeService",
    "TurnRunner",
    "load_policy",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
