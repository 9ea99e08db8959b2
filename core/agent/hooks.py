"""What every Agent of a turn or a resume gets from us, through Strands' public surface: the
approval tool in its tools, and `ApprovalHooks`, one `HookProvider` holding R5's batch rule.
Where we build the Agent they go in at construction (`Agent(tools=[...], hooks=[...])`); an
Agent from a user's factory is already built, so `equip` adds them with the public
`tool_registry.process_tools` and `hooks.add_hook`. The tool gate (`--confirm-tools`) is an
intervention; see core/agent/tool_gate.py and core/agent/strands_compat.py.
"""

from __future__ import annotations

from typing import Any

from strands import Agent
from strands.hooks import BeforeToolCallEvent, HookProvider, HookRegistry

from chat_approvals.core.agent.approval_tool import request_approval
from chat_approvals.core.agent.batch_rule import APPROVAL_TOOL, enforce_batch_rule


class ApprovalHooks(HookProvider):
    """R5: the approval call runs alone in its batch (core/agent/batch_rule.py)."""

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        registry.add_callback(BeforeToolCallEvent, enforce_batch_rule)


def approval_tools() -> list[Any]:
    """The tools every agent needs, for `Agent(tools=[*approval_tools(), ...])`."""
    return [request_approval]


def has_approval_tool(agent: Agent) -> bool:
    """Is the approval tool registered? The registry's own dict first (a lookup); `tool_names`
    (every tool's spec built and checked, per turn: issue 34) only when it is not there."""
    return APPROVAL_TOOL in agent.tool_registry.registry or APPROVAL_TOOL in agent.tool_names


def equip(agent: Agent) -> Agent:
    """An Agent built elsewhere (a user's factory): the approval tool, if it lacks it, and the hooks."""
    if not has_approval_tool(agent):
        agent.tool_registry.process_tools([request_approval])
    agent.hooks.add_hook(ApprovalHooks())
    return checked(agent)


def checked(agent: Agent) -> Agent:
    if not has_approval_tool(agent):
        raise RuntimeError("the approval tool could not be registered on the agent")
    return agent
