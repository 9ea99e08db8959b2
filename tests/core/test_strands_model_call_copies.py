"""A model call's inputs copied directly when they are JSON trees (core/agent/strands_compat.py,
entry 11; issue 34): installed by bootstrap in Strands' event loop only, as deep as `copy.deepcopy`
(nothing mutable shared with the original, anything else handed to deepcopy itself), so a model
that changes what it is given still cannot change the agent's own messages (the run a click
continues and its snapshot hold what the agent had, R1, R7); and what the event loop copies is
pinned so an upgrade that changes it fails here first."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import inspect
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import strands.event_loop.event_loop as strands_event_loop
from strands import Agent

import chat_approvals.core.agent.strands_compat as compat
from chat_approvals.core.agent.scripted_model import ScriptedModel
from chat_approvals.core.bootstrap import bootstrap
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.file_objects import FileObjects
from chat_approvals.store.sqlite_rows import SqliteRows

# Strands 1.62's `_handle_model_execution`: when it changes, re-read what it copies and why, then
# update this hash.
STRANDS_SOURCE_SHA256 = "f7d953fe4fca59aa734a8687cb5329dac3a54064fef6b9b9e29e9b26aec26d80"


def test_the_event_loop_copies_what_entry_11_was_written_for() -> None:
    source = inspect.getsource(strands_event_loop)
    assert set(re.findall(r"\bcopy\.(\w+)", source)) == {"deepcopy"}  # nothing else goes through `copy`
    handler = inspect.getsource(strands_event_loop._handle_model_execution)
    assert hashlib.sha256(handler.encode()).hexdigest() == STRANDS_SOURCE_SHA256


def test_bootstrap_installs_it_in_the_event_loop_only_and_twice_is_once(tmp_path: Path) -> None:
    root = bootstrap(StoreIO(SqliteRows(str(tmp_path / "rows.db")), FileObjects(str(tmp_path / "o"))))
    root.close()
    assert strands_event_loop.copy is compat._EVENT_LOOP_COPY
    assert strands_event_loop.copy.deepcopy is compat.deepcopy_json_first
    assert strands_event_loop.copy.copy is copy.copy  # the rest of the module as it is
    compat.copy_model_call_inputs_directly()
    assert strands_event_loop.copy is compat._EVENT_LOOP_COPY
    import strands.event_loop.streaming as streaming

    assert streaming.copy is copy  # no other module is touched


def mutable_ids(value: Any) -> set[int]:
    """The ids of every dict and list in a tree (and in tuples and dataclasses within it)."""
    found: set[int] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found.add(id(item))
            stack.extend(item.values())
        elif isinstance(item, list):
            found.add(id(item))
            stack.extend(item)
        elif isinstance(item, tuple):
            stack.extend(item)
        elif dataclasses.is_dataclass(item):
            stack.extend(vars(item).values())
    return found


@dataclasses.dataclass
class Box:
    items: list[int]


class Tagged(dict[str, Any]):
    pass


MESSAGES = [
    {"role": "user", "content": [{"text": "please fetch https://data.example.org/täble.csv"}]},
    {
        "role": "assistant",
        "content": [{"toolUse": {"toolUseId": "t1", "name": "request_approval", "input": {"urls": ["a"], "n": 1.5}}}],
        "metadata": {"usage": {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0}, "metrics": {"latencyMs": 0}},
    },
    {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "status": "success", "content": [{"json": {}}]}}]},
    {"role": "user", "content": [{"image": {"format": "png", "source": {"bytes": b"\x89PNG"}}}, {"text": ""}]},
]
TREES = {
    "messages": MESSAGES,
    "tool specs": [{"name": "t", "inputSchema": {"json": {"type": "object", "required": ["a"], "properties": {}}}}],
    "None": None,
    "a string": "You help with data tasks.",
    "a model state": {"k": [True, None, 3]},
    "a tuple holding a list": {"t": (1, [2, 3])},
    "a dataclass": [Box([1, 2])],
    "a dict subclass": [Tagged(a=[1])],
    "a set": {"s": {1, 2}},
}


def test_the_copy_equals_deepcopy_and_shares_nothing_mutable_with_the_original() -> None:
    for name, tree in TREES.items():
        ours = compat.deepcopy_json_first(tree)
        assert ours == copy.deepcopy(tree), name
        assert type(ours) is type(tree), name
        assert not (mutable_ids(ours) & mutable_ids(tree)), name
    tagged = compat.deepcopy_json_first([Tagged(a=[1])])[0]
    assert type(tagged) is Tagged  # not a JSON dict: deepcopy made it, type and all


def test_a_cycle_and_a_memo_go_to_deepcopy() -> None:
    looped: dict[str, Any] = {"a": [1]}
    looped["self"] = looped
    copied = compat.deepcopy_json_first(looped)
    assert copied is not looped and copied["self"] is copied and copied["a"] is not looped["a"]
    memo: dict[int, Any] = {}
    assert compat.deepcopy_json_first([[1]], memo) == [[1]] and memo  # deepcopy's own, memo filled


class Mutating(ScriptedModel):
    """A model that changes the messages it is given (a provider that edits in place)."""

    async def stream(
        self, messages: Any, tool_specs: Any = None, system_prompt: str | None = None, **kw: Any
    ) -> AsyncIterator[Any]:
        for message in messages:
            message["content"].append({"text": "changed by the model"})
            message["role"] = "changed"
        if tool_specs:
            tool_specs[0]["description"] = "changed"
        async for event in super().stream(messages, tool_specs, system_prompt, **kw):
            yield event


async def test_a_model_that_changes_its_inputs_cannot_change_the_agents_own() -> None:
    compat.copy_model_call_inputs_directly()
    agent = Agent(model=Mutating(), tools=[], callback_handler=None)
    await agent.invoke_async("hello")
    assert [m["role"] for m in agent.messages] == ["user", "assistant"]
    assert agent.messages[0]["content"] == [{"text": "hello"}]
