"""The Strands side: the agent factory, the approval tool, the batch rule (R5), the tool gate, the offline model.

The names below are this room's public face, for `bots/` and embedders; they load on first use, so
importing one module of the room does not import the rest (and no import cycle runs through here).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chat_approvals.core.agent.approval_tool import request_approval
    from chat_approvals.core.agent.batch_rule import APPROVAL_TOOL
    from chat_approvals.core.agent.factory import (
        SYSTEM_PROMPT,
        AgentFactory,
        build_model,
        default_factory,
        gated_factory,
        prepare,
        user_factory,
    )
    from chat_approvals.core.agent.scripted_model import ScriptedModel

_WHERE = {
    "AgentFactory": "chat_approvals.core.agent.factory",
    "SYSTEM_PROMPT": "chat_approvals.core.agent.factory",
    "build_model": "chat_approvals.core.agent.factory",
    "default_factory": "chat_approvals.core.agent.factory",
    "gated_factory": "chat_approvals.core.agent.factory",
    "prepare": "chat_approvals.core.agent.factory",
    "user_factory": "chat_approvals.core.agent.factory",
    "request_approval": "chat_approvals.core.agent.approval_tool",
    "APPROVAL_TOOL": "chat_approvals.core.agent.batch_rule",
    "ScriptedModel": "chat_approvals.core.agent.scripted_model",
}
__all__ = [
    "APPROVAL_TOOL",
    "SYSTEM_PROMPT",
    "AgentFactory",
    "ScriptedModel",
    "build_model",
    "default_factory",
    "gated_factory",
    "prepare",
    "request_approval",
    "user_factory",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
