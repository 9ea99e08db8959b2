"""A tool call's async generators in Strands are run to their end after the call's last event
(core/agent/strands_compat.py, entry 14; issue 34), so none is left for asyncio's finalizer (a
wake-up of the loop and a task each). A turn paused on a card and resumed leaves none with the entry
and three without it; the events come out as the generators yield them, in order, none looked
ahead of but the step after a result or an interrupt; and both Strands functions are pinned so an
upgrade that changes them fails here first. No rule covers Strands' generators: these check the
behaviour the entry keeps."""

from __future__ import annotations

import asyncio
import gc
import hashlib
import inspect
import sys
from collections.abc import AsyncGenerator, Iterator
from typing import Any

import pytest
import strands.tools.executors._executor as strands_executor
from strands import Agent, tool
from strands.tools.decorator import DecoratedFunctionTool
from strands.types._events import ToolInterruptEvent, ToolStreamEvent
from strands.types.events import ToolResultEvent

import chat_approvals.core.agent.strands_compat as compat
from chat_approvals.core.approvals import Approvals
from chat_approvals.core.clock import ManualClock
from chat_approvals.store.aio import StoreIO
from tests.conftest import click, make_approvals
from tests.support.agents import Counter, PolicyModel, results_of, scripted_factory, text_of

TEXT = "please fetch https://data.example.org/table.csv"

# Strands 1.62's two generators: when one changes, re-read it against entry 14, then the hash.
PINNED = {
    "_run_tool": (compat._STRANDS_RUN_TOOL, "6927da714bb5f65dfe7c0b7f1420cfe3299e1a9d133a16f723d63ec125e6129f"),
    "stream": (compat._STRANDS_TOOL_STREAM, "cd162b948e20d36eb3a222820537adc4241aa6a51668c482dc9705ff3b378faf"),
}


def test_both_generators_are_the_ones_entry_14_was_written_for() -> None:
    for name, (fn, sha) in PINNED.items():
        assert hashlib.sha256(inspect.getsource(fn).encode()).hexdigest() == sha, name


def own_generators() -> None:
    """Strands' own `_run_tool` and `stream` back in place of the entry's."""
    strands_executor._run_tool = compat._STRANDS_RUN_TOOL  # type: ignore[attr-defined]
    DecoratedFunctionTool.stream = compat._STRANDS_TOOL_STREAM  # type: ignore[method-assign]


@pytest.fixture(autouse=True)
def entry_back() -> Iterator[None]:
    yield
    compat.run_tool_calls_to_their_end()  # for the tests that follow, as bootstrap leaves it


class Finalized:
    """The async generators of Strands' that reach the running loop's finalizer, by name."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self._hooks = sys.get_asyncgen_hooks()
        loop_finalizer = self._hooks.finalizer
        assert loop_finalizer is not None  # the running loop's own

        def finalizer(agen: Any) -> None:
            if "/strands/" in agen.ag_code.co_filename:
                self.names.append(agen.ag_code.co_qualname)
            loop_finalizer(agen)

        sys.set_asyncgen_hooks(firstiter=self._hooks.firstiter, finalizer=finalizer)

    def close(self) -> None:
        sys.set_asyncgen_hooks(*self._hooks)


async def paused_and_resumed(a: Approvals) -> list[str]:
    """One turn paused on a card and resumed by its owner; what reached the finalizer meanwhile."""
    finalized = Finalized()
    try:
        turn = await a.run_turn(chat="c1", user="u", text=TEXT, platform="http")
        res = await click(a, turn.offer)
        assert res.outcome == "resumed" and res.result is not None and res.result.status == "answered"
        gc.collect()  # what a cycle still holds (an interrupt's traceback) is collected now
        await asyncio.sleep(0)
        return finalized.names
    finally:
        finalized.close()


async def test_bootstrap_installs_it_and_a_paused_and_resumed_turn_leaves_no_generator(
    store: StoreIO, clock: ManualClock
) -> None:
    own_generators()
    a = make_approvals(store, clock, scripted_factory(Counter()))
    assert strands_executor._run_tool is compat.run_tool_to_its_end  # type: ignore[attr-defined]
    assert DecoratedFunctionTool.stream is compat.stream_to_its_end  # type: ignore[comparison-overlap]
    compat.run_tool_calls_to_their_end()  # twice is once
    assert compat._STRANDS_RUN_TOOL is not compat.run_tool_to_its_end
    assert await paused_and_resumed(a) == []


async def test_without_it_the_same_turn_leaves_three(store: StoreIO, clock: ManualClock) -> None:
    a = make_approvals(store, clock, scripted_factory(Counter()))
    own_generators()
    names = await paused_and_resumed(a)
    # the pause leaves `_run_tool` and the approval tool's `stream`; the resume, the tool's `stream`
    assert sorted(names) == ["DecoratedFunctionTool.stream", "DecoratedFunctionTool.stream", "_run_tool"]


Step = Any  # an event, or ("raise", exception)


class Script:
    """An async generator that yields (or raises) its steps in order and notes each step taken."""

    def __init__(self, steps: list[Step]) -> None:
        self.steps = steps
        self.taken = 0

    async def run(self) -> AsyncGenerator[Any, None]:
        for step in self.steps:
            self.taken += 1
            if isinstance(step, tuple) and step[0] == "raise":
                raise step[1]
            yield step
        self.taken += 1  # the step that ends it


def result(text: str) -> ToolResultEvent:
    return ToolResultEvent({"toolUseId": "t1", "status": "success", "content": [{"text": text}]})


def streamed(n: int) -> ToolStreamEvent:
    return ToolStreamEvent({"toolUseId": "t1", "name": "x", "input": {}}, n)


async def test_events_come_out_as_yielded_and_only_a_last_event_is_looked_past() -> None:
    script = Script([streamed(1), streamed(2), result("done")])
    gen = script.run()
    wrapped = compat.RunToItsEnd(gen)
    assert isinstance(wrapped, AsyncGenerator)
    assert await wrapped.__anext__() == streamed(1)
    assert script.taken == 1  # no look ahead after an ordinary event
    assert await wrapped.__anext__() == streamed(2)
    assert script.taken == 2
    assert await wrapped.__anext__() == result("done")
    assert script.taken == 4 and gen.ag_frame is None  # run to its end before the result was handed on
    with pytest.raises(StopAsyncIteration):
        await wrapped.__anext__()


async def test_an_interrupt_is_a_last_event_too() -> None:
    interrupt = ToolInterruptEvent({"toolUseId": "t1", "name": "x", "input": {}}, [])
    gen = Script([interrupt]).run()
    assert [e async for e in compat.RunToItsEnd(gen)] == [interrupt]
    assert gen.ag_frame is None


async def test_what_comes_after_a_last_event_is_handed_on_at_the_next_step() -> None:
    after = Script([result("first"), streamed(3), result("second")])
    assert [e async for e in compat.RunToItsEnd(after.run())] == [result("first"), streamed(3), result("second")]
    boom = ValueError("after the result")
    raising = compat.RunToItsEnd(Script([result("only"), ("raise", boom)]).run())
    assert await raising.__anext__() == result("only")
    with pytest.raises(ValueError, match="after the result"):
        await raising.__anext__()


async def test_aclose_and_athrow_reach_the_generator() -> None:
    script = Script([streamed(1), streamed(2)])
    gen = script.run()
    wrapped = compat.RunToItsEnd(gen)
    assert await wrapped.__anext__() == streamed(1)
    await wrapped.aclose()
    assert gen.ag_frame is None and script.taken == 1
    thrown = compat.RunToItsEnd(Script([streamed(1), streamed(2)]).run())
    await thrown.__anext__()
    with pytest.raises(KeyError):
        await thrown.athrow(KeyError("in"))


@tool
async def counts_to_two(label: str) -> AsyncGenerator[Any, None]:
    """Stream two steps, then the result.

    Args:
        label: a label
    """
    yield f"{label} one"
    yield f"{label} two"
    yield f"{label} done"


async def streamed_run() -> list[Any]:
    """What an Agent streams for one call of a streaming tool: every event's kind and data."""

    def policy(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        if results_of(messages):
            return "finished: " + text_of(results_of(messages)[0]), []
        return "", [{"name": "counts_to_two", "input": {"label": "x"}}]

    agent = Agent(model=PolicyModel(policy), tools=[counts_to_two], callback_handler=None)
    seen = []
    async for event in agent.stream_async("go"):
        if "tool_stream_event" in event:
            seen.append(("stream", event["tool_stream_event"]["data"]))
        elif "result" in event:
            seen.append(("result", str(event["result"])))
    return seen


async def test_a_streaming_tool_streams_the_same_events_in_the_same_order() -> None:
    compat.run_tool_calls_to_their_end()
    ours = await streamed_run()
    own_generators()
    theirs = await streamed_run()
    assert ours == theirs
    assert ours == [("stream", "x one"), ("stream", "x two"), ("stream", "x done"), ("result", "finished: x done\n")]


def test_a_run_tool_that_is_not_strands_own_is_refused_and_a_replaced_stream_is_left_alone() -> None:
    def someone_elses(*args: Any, **kwargs: Any) -> Any:
        return compat._STRANDS_RUN_TOOL(*args, **kwargs)

    def their_stream(self: Any, *args: Any, **kwargs: Any) -> Any:
        return compat._STRANDS_TOOL_STREAM(self, *args, **kwargs)

    strands_executor._run_tool = someone_elses  # type: ignore[attr-defined]
    try:
        with pytest.raises(RuntimeError, match="entry 14"):
            compat.run_tool_calls_to_their_end()
    finally:
        own_generators()
    DecoratedFunctionTool.stream = their_stream  # type: ignore[method-assign]
    try:
        compat.run_tool_calls_to_their_end()
        assert DecoratedFunctionTool.stream is their_stream  # type: ignore[comparison-overlap]
        assert strands_executor._run_tool is compat.run_tool_to_its_end  # type: ignore[attr-defined]
    finally:
        own_generators()
