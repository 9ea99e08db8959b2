"""A pause's interrupt state without asdict's copies (core/agent/strands_compat.py, entry 7; issue
34): the same dict as Strands' `_InterruptState.to_dict` for a paused agent, a deactivated state
and a pending tool call, Strands' own snapshot when a value is not plain JSON, and Strands' code
pinned so an upgrade that changes it fails here first (R1, R7: the snapshot a paused turn is
resumed from holds its interrupt state as Strands writes it)."""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
from typing import Any

from strands import Agent
from strands.interrupt import Interrupt, PendingToolExecution, _InterruptState

from chat_approvals.core.agent.scripted_model import ScriptedModel
from chat_approvals.core.agent.snapshots import agent_bytes, encode
from chat_approvals.core.agent.strands_compat import interrupt_state_doc
from tests.core.test_snapshot_encoding import ask, scripted_agent_paused, without_time

# Strands 1.62: when one changes, re-read it against interrupt_state_doc, then update the hash.
PINNED = {
    "_InterruptState.to_dict": (
        _InterruptState.to_dict,
        "098c2baa7be3255425bb10a1be0d38b3a8ced3cf431b5bcfe89cf2e813524b98",
    ),
    "Interrupt.to_dict": (Interrupt.to_dict, "6cf6a9f48a714f0d02e11395f2fa9e3d1b2ec2df267bdf738a5f45c0e52bcdcb"),
}


def test_strands_code_and_fields_are_the_ones_entry_7_was_written_against() -> None:
    for name, (fn, sha) in PINNED.items():
        assert hashlib.sha256(inspect.getsource(fn).encode()).hexdigest() == sha, name
    assert [f.name for f in dataclasses.fields(Interrupt)] == ["id", "name", "reason", "response"]
    assert [f.name for f in dataclasses.fields(PendingToolExecution)] == ["assistant_message", "completed_tool_results"]
    assert [f.name for f in dataclasses.fields(_InterruptState)] == [
        "interrupts",
        "context",
        "activated",
        "pending_tool_execution",
        "_version",
    ]


async def test_a_paused_agents_interrupt_state_is_strands_own() -> None:
    agent = await scripted_agent_paused()
    assert agent._interrupt_state.activated
    assert interrupt_state_doc(agent) == agent._interrupt_state.to_dict()


def agent_with(state: _InterruptState) -> Agent:
    agent = Agent(model=ScriptedModel(), tools=[ask], callback_handler=None)
    agent._interrupt_state = state
    return agent


def test_a_deactivated_state_drops_stream_responses_as_strands_does() -> None:
    kept = Interrupt(id="v1:tool_call:1", name="approval", reason={"urls": ["https://a.example"]}, response={"ok": 1})
    dropped = Interrupt(id="v1:middleware_agent_stream:2", name="s", reason=None, response="yes")
    pending = PendingToolExecution(
        assistant_message={"role": "assistant", "content": [{"toolUse": {"toolUseId": "t", "name": "x", "input": {}}}]},
        completed_tool_results=[{"toolUseId": "t0", "status": "success", "content": [{"text": "done"}]}],
    )
    state = _InterruptState(
        interrupts={kept.id: kept, dropped.id: dropped},
        context={"k": [1]},
        activated=False,
        pending_tool_execution=pending,
    )
    agent = agent_with(state)
    doc = interrupt_state_doc(agent)
    assert doc == state.to_dict()
    assert list(doc["interrupts"]) == [kept.id]
    raw = agent_bytes(agent, preset="session")
    assert without_time(raw) == without_time(encode(agent.take_snapshot(preset="session")))


@dataclasses.dataclass
class Why:
    url: str


def test_a_value_that_is_not_plain_json_gets_strands_own_snapshot() -> None:
    state = _InterruptState(
        interrupts={"v1:a": Interrupt(id="v1:a", name="approval", reason=Why("https://a.example"))}, activated=True
    )
    agent = agent_with(state)
    raw = agent_bytes(agent, preset="session")  # asdict made the dataclass a dict; so must we
    interrupts: dict[str, Any] = json.loads(raw)["data"]["interrupt_state"]["interrupts"]
    assert interrupts["v1:a"]["reason"] == {"url": "https://a.example"}
    assert without_time(raw) == without_time(encode(agent.take_snapshot(preset="session")))
