"""Every access to a private part of Strands (strands-agents 1.62), in one place, numbered, each
with the reason no public surface serves. Everything else goes through the public API: the
approval tool, R5's batch rule and the tool gate reach an Agent as one hook provider
(core/agent/hooks.py), at construction where we build the Agent.

Upgrading Strands: run tests/bots/test_tool_cards.py and tests/bots/test_tool_approvals.py; each entry
below fails loudly (AttributeError) or safely (see its fallback) if the SDK changed.
"""

from __future__ import annotations

from typing import Any

from strands import Agent, ToolContext
from strands.interventions import InterventionHandler
from strands.interventions.registry import InterventionRegistry

GATE_MARK = "_chat_approvals_gate"


def answered_response(tool_context: ToolContext, name: str) -> tuple[bool, Any]:
    """1. Has THIS tool call's interrupt `name` been answered, and with what? 1.62 has no public
    accessor for the interrupt state (`ToolContext.interrupt` raises until answered, and cannot
    ask without raising). Reads `ToolContext._interrupt_id` and `Agent._interrupt_state`. The
    caller treats an exception as "answered" (R2's safe mistake)."""
    interrupt_id = tool_context._interrupt_id(name)
    found = tool_context.agent._interrupt_state.interrupts.get(interrupt_id)
    return found is not None and found.response is not None, None if found is None else found.response


def own_interventions(agent: Agent) -> list[InterventionHandler]:
    """2. The interventions an Agent was constructed with (`Agent(interventions=[...])`): 1.62
    keeps them only in `Agent._intervention_registry`. Read to refuse a second HumanInTheLoop
    (both would raise the same interrupt id for the same call). Missing: none."""
    registry = getattr(agent, "_intervention_registry", None)
    return registry.handlers if registry is not None else []


def add_interventions(agent: Agent, handlers: list[InterventionHandler]) -> InterventionRegistry:
    """3. Interventions for an Agent that was built without them (a user's `--agent` factory):
    1.62 takes interventions only at construction, so a second `InterventionRegistry` (public
    class) is wired onto the agent's public `hooks`, and kept on the agent under our own mark so
    the same agent is never given the gate twice."""
    registry = InterventionRegistry(handlers, agent.hooks)
    setattr(agent, GATE_MARK, registry)
    return registry


def added_interventions(agent: Agent) -> list[InterventionHandler]:
    """4. What `add_interventions` gave this agent (our own mark, read back)."""
    registry = getattr(agent, GATE_MARK, None)
    return registry.handlers if registry is not None else []
