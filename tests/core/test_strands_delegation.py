"""Strands' agent-delegation plugin only where a tool delegates (core/agent/strands_compat.py, entry
15; issue 34). The built-in agent (built for every turn and every resume from the stored snapshot,
R9) gets `DelegationIfDelegating` under the plugin's name: without a delegating tool it registers no
hook and no middleware; with one it registers exactly what Strands' own does, and a turn runs the
same. Strands' plugin and the name check that lets ours stand in for it are pinned, so an upgrade
that changes them fails here first. No rule covers delegation: these check the behaviour the entry
keeps."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
from typing import Any

from strands import Agent, tool
from strands.agent._agent_delegation import AgentDelegation, _is_delegation_tool
from strands.middleware.stages import ExecuteToolStage

from chat_approvals.core.agent.factory import SYSTEM_PROMPT, default_factory
from chat_approvals.core.agent.hooks import ApprovalHooks, approval_tools
from chat_approvals.core.agent.scripted_model import ScriptedModel
from chat_approvals.core.agent.strands_compat import DelegationIfDelegating, LoneCallInPlace
from tests.support.agents import PolicyModel, results_of, text_of

# Strands 1.62's: when one changes, re-read it against entry 15, then the hash.
PINNED = {
    "AgentDelegation": (AgentDelegation, "4576eaa03471a986ac947d95beca1822a05fa6089d97733f65527be76bbcbca8"),
    "_is_delegation_tool": (_is_delegation_tool, "fff5ebc56e8efbf5e49543a982ba21b52072774ebaf6f86b0996f8279270d2fb"),
}
NAME_CHECK = 'has_agent_delegation = any(plugin.name == "strands:agent-delegation" for plugin in'


@tool
def lookup(name: str) -> str:
    """Look a name up.

    Args:
        name: a label
    """
    return f"found {name}"


def helper() -> Agent:
    model = PolicyModel(lambda messages: ("the helper's answer", []))
    return Agent(model=model, name="helper", description="Answers for the parent.", callback_handler=None)


def calls_then_answers(tool_name: str) -> Any:
    def policy(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        if results_of(messages):
            return "parent: " + ", ".join(text_of(r) for r in results_of(messages)), []
        return "", [{"name": tool_name, "input": {"input": "x"} if tool_name == "helper" else {"name": "x"}}]

    return policy


def parent(tools: list[Any], ours: bool, tool_name: str) -> Agent:
    return Agent(
        model=PolicyModel(calls_then_answers(tool_name)),
        tools=tools,
        callback_handler=None,
        plugins=[DelegationIfDelegating()] if ours else None,
    )


def hooks_of(agent: Agent) -> dict[str, list[tuple[str, float]]]:
    return {
        event.__name__: [(getattr(e.callback, "__qualname__", repr(e.callback)), e.order) for e in entries]
        for event, entries in agent.hooks._registered_callbacks.items()
    }


def delegation_hooks(agent: Agent) -> set[str]:
    return {name for entries in hooks_of(agent).values() for name, _ in entries if name.startswith("AgentDelegation.")}


def test_strands_plugin_and_name_check_are_the_ones_entry_15_was_written_for() -> None:
    for label, (obj, sha) in PINNED.items():
        source = inspect.getsource(obj)
        assert hashlib.sha256(source.encode()).hexdigest() == sha, label
    assert NAME_CHECK in inspect.getsource(Agent.__init__)
    assert DelegationIfDelegating.name == AgentDelegation.name


def test_without_a_delegating_tool_no_delegation_hooks_nor_middleware() -> None:
    strands_own = parent([lookup], ours=False, tool_name="lookup")
    ours = parent([lookup], ours=True, tool_name="lookup")
    assert delegation_hooks(strands_own)  # what the entry saves
    assert ExecuteToolStage in strands_own._middleware_registry._handlers
    assert not delegation_hooks(ours)
    assert ExecuteToolStage not in ours._middleware_registry._handlers
    # every other hook the same, in the same order
    without = {
        event: [h for h in entries if not h[0].startswith("AgentDelegation.")]
        for event, entries in hooks_of(strands_own).items()
    }
    assert {e: h for e, h in without.items() if h} == hooks_of(ours)


def test_the_built_in_agent_gets_it_and_a_delegating_extra_tool_gets_strands_own_hooks() -> None:
    built_in = default_factory("scripted")()
    assert isinstance(built_in._plugin_registry._plugins[AgentDelegation.name], DelegationIfDelegating)
    assert not delegation_hooks(built_in)
    assert ExecuteToolStage not in built_in._middleware_registry._handlers

    delegate = helper().as_tool(delegate=True)
    delegating = default_factory("scripted", extra_tools=[delegate])()
    reference = Agent(  # the built-in agent as Strands would build it, with its own plugin
        model=ScriptedModel(),
        tools=[*approval_tools(), delegate],
        hooks=[ApprovalHooks()],
        system_prompt=SYSTEM_PROMPT,
        callback_handler=None,
        tool_executor=LoneCallInPlace(),
    )
    assert delegation_hooks(delegating)
    assert hooks_of(delegating) == hooks_of(reference)  # the same hooks in the same order
    assert ExecuteToolStage in delegating._middleware_registry._handlers
    # an agent made a tool without delegate=True is no reason either
    assert not delegation_hooks(default_factory("scripted", extra_tools=[helper().as_tool()])())


def scrubbed(value: Any) -> Any:
    """Without what differs from run to run: Strands' tracking ids and the model's tool use ids."""
    if isinstance(value, dict):
        return {k: "id" if k == "toolUseId" else scrubbed(v) for k, v in value.items() if k != "tracking_id"}
    if isinstance(value, list | tuple):
        return [scrubbed(v) for v in value]
    return value


TOOLS = {  # a fresh set of tools per agent: an agent made a tool keeps its own state
    "a plain tool": (lambda: [lookup], "lookup"),
    "a delegating agent": (lambda: [helper().as_tool(delegate=True)], "helper"),
    "an agent, not delegating": (lambda: [helper().as_tool()], "helper"),
}


def test_a_turn_runs_the_same_as_with_strands_own_plugin() -> None:
    for label, (tools, name) in TOOLS.items():
        runs = []
        for ours in (False, True):
            agent = parent(tools(), ours, name)
            result = asyncio.run(agent.invoke_async("go"))
            runs.append(scrubbed((result.stop_reason, result.message, agent.messages)))
        assert runs[0] == runs[1], label
    # and delegation did what it does: the delegate's answer ends the turn as the parent's
    agent = parent(TOOLS["a delegating agent"][0](), True, "helper")
    assert "the helper's answer" in str(asyncio.run(agent.invoke_async("go")))
    assert "parent:" not in str(agent.messages[-1])
