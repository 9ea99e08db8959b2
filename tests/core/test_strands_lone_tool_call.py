"""The built-in agent runs a step's lone tool call in place (core/agent/strands_compat.py, entry 12;
issue 34): an approval's step usually has one call (R5) and so has a resume's re-run of the paused
call (R9), and Strands' concurrent executor gave each its own task, queue and Event. A step of one call
runs as Strands' sequential executor runs it, with the same results; a step of two calls still
runs them concurrently; and both executors' strategies are pinned so an upgrade that changes
them fails here first. No rule covers the executor: these check the behaviour the entry keeps."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
from typing import Any

from strands import Agent, tool
from strands.tools.executors import ConcurrentToolExecutor, SequentialToolExecutor

from chat_approvals.core.agent.factory import default_factory
from chat_approvals.core.agent.strands_compat import LoneCallInPlace
from tests.support.agents import PolicyModel, results_of, text_of

# Strands 1.62's `_execute` of each: when one changes, re-read it against entry 12, then the hash.
PINNED = {
    ConcurrentToolExecutor: "c9ee22b5b089b64a3480da7710c3d9b8cf7862954c0f614224ffe13d7a263269",
    SequentialToolExecutor: "979162684062d2c56ac65ae6b43fe7d50a6469c823ce81538138fc85c2871d55",
}

tasks_seen: list[asyncio.Task[Any] | None] = []
started: list[str] = []
both_started: list[asyncio.Event] = []  # one per test: an Event belongs to the loop that first waits on it


@tool
async def where_am_i(name: str) -> str:
    """Note the task this call runs in.

    Args:
        name: a label
    """
    tasks_seen.append(asyncio.current_task())
    return f"ran {name}"


@tool
async def meet(name: str) -> str:
    """Wait until both calls of the step have started: only concurrent calls ever meet.

    Args:
        name: a label
    """
    started.append(name)
    if len(started) == 2:
        both_started[0].set()
    await asyncio.wait_for(both_started[0].wait(), timeout=2)
    return f"met {name}"


def calls(names: list[str], tool_name: str) -> Any:
    def policy(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        if results_of(messages):
            return "done: " + ", ".join(text_of(r) for r in results_of(messages)), []
        return "", [{"name": tool_name, "input": {"name": n}} for n in names]

    return policy


def agent_with(executor: Any, names: list[str], tool_name: str) -> Agent:
    return Agent(
        model=PolicyModel(calls(names, tool_name)),
        tools=[where_am_i, meet],
        callback_handler=None,
        tool_executor=executor,
    )


def test_both_strategies_are_the_ones_entry_12_was_written_for() -> None:
    for cls, sha in PINNED.items():
        source = inspect.getsource(cls._execute)
        assert hashlib.sha256(source.encode()).hexdigest() == sha, cls.__name__


def test_the_built_in_agent_has_it_one_executor_for_every_agent() -> None:
    make = default_factory("scripted")
    first, second = make(), make()
    assert type(first.tool_executor) is LoneCallInPlace
    assert first.tool_executor is second.tool_executor  # it holds no state


async def test_a_lone_call_runs_in_place_with_the_same_result() -> None:
    results = {}
    for executor in (LoneCallInPlace(), ConcurrentToolExecutor(), SequentialToolExecutor()):
        tasks_seen.clear()
        agent = agent_with(executor, ["a"], "where_am_i")
        run = asyncio.ensure_future(agent.invoke_async("go"))
        result = await run
        in_place = tasks_seen == [run]  # the call ran in the invocation's own task: no task of its own
        results[type(executor).__name__] = (str(result), result.stop_reason, agent.messages, in_place)
    ours, concurrent, sequential = (
        results["LoneCallInPlace"],
        results["ConcurrentToolExecutor"],
        results["SequentialToolExecutor"],
    )
    assert ours[3] and sequential[3] and not concurrent[3]
    assert ours[0] == concurrent[0] == sequential[0] == "done: ran a\n"
    assert ours[1] == concurrent[1] == "end_turn"
    assert strip_ids(ours[2]) == strip_ids(concurrent[2])


async def test_a_step_of_two_calls_still_runs_them_concurrently() -> None:
    started.clear()
    both_started[:] = [asyncio.Event()]
    agent = agent_with(LoneCallInPlace(), ["a", "b"], "meet")
    result = await agent.invoke_async("go")
    assert str(result) == "done: met a, met b\n"  # run one after the other, neither would meet the other


def strip_ids(messages: list[dict[str, Any]]) -> list[Any]:
    """The messages without the ids Strands makes per run (tool use ids, tracking ids)."""
    out = []
    for m in messages:
        blocks = []
        for b in m["content"]:
            if "toolUse" in b:
                blocks.append({"toolUse": {k: v for k, v in b["toolUse"].items() if k != "toolUseId"}})
            elif "toolResult" in b:
                blocks.append({"toolResult": {k: v for k, v in b["toolResult"].items() if k != "toolUseId"}})
            else:
                blocks.append(b)
        out.append((m["role"], blocks))
    return out
