"""core/agent/snapshots.py writes Strands' own session encoding in one pass: the same bytes as
`encode_bytes_values` then `json.dumps`, and read back the same as `decode_bytes_values`, for a
paused Agent's real snapshot and for one holding bytes (an image block), at any depth."""

from __future__ import annotations

import json
from typing import Any

import pytest
from strands import Agent, Snapshot, ToolContext, tool
from strands.types.session import decode_bytes_values, encode_bytes_values

from chat_approvals.core.agent import APPROVAL_TOOL, SYSTEM_PROMPT, ScriptedModel
from chat_approvals.core.agent.snapshots import agent_bytes, decode, encode, load_owned


@tool(name=APPROVAL_TOOL, context=True)
async def ask(reason: str, tool_context: ToolContext, urls: list[str] | None = None) -> str:
    """Ask the user to approve downloads.

    Args:
        reason: why
        urls: what to download
    """
    answer = tool_context.interrupt("approval", reason={"reason": reason, "urls": urls or []})
    return "approved" if answer.get("approved") else "denied"


async def scripted_agent_paused() -> Agent:
    agent = Agent(model=ScriptedModel(), tools=[ask], system_prompt=SYSTEM_PROMPT, callback_handler=None)
    result = await agent.invoke_async("please fetch https://data.example.org/table.csv")
    assert result.stop_reason == "interrupt"
    return agent


def strands_way(snap: Snapshot) -> bytes:
    return json.dumps(encode_bytes_values(snap.to_dict()), separators=(",", ":")).encode()


def with_bytes() -> Snapshot:
    image = {"image": {"format": "png", "source": {"bytes": b"\x89PNG\r\n\x00\xff"}}}
    messages = [{"role": "user", "content": [{"text": "look ✓"}, image]}, {"role": "assistant", "content": []}]
    state = {"nested": [{"raw": b""}, [b"a", {"deeper": b"\x00"}]], "mark": {"__bytes_encoded__": False}}
    return Snapshot(scope="agent", schema_version="1.0", data={"messages": messages, "state": state}, app_data={})


async def test_a_paused_agents_snapshot_is_encoded_as_strands_encodes_it() -> None:
    snap = (await scripted_agent_paused()).take_snapshot(preset="session", app_data={"turn_id": "t"})
    assert encode(snap) == strands_way(snap)
    assert (
        decode(encode(snap)).to_dict()
        == Snapshot.from_dict(decode_bytes_values(json.loads(strands_way(snap)))).to_dict()
    )


def test_bytes_at_any_depth_round_trip_as_strands_reads_them() -> None:
    snap = with_bytes()
    raw = encode(snap)
    assert raw == strands_way(snap)
    assert decode(raw).to_dict() == Snapshot.from_dict(decode_bytes_values(json.loads(raw))).to_dict() == snap.to_dict()


def test_what_json_cannot_hold_still_fails_as_before() -> None:
    snap = with_bytes()
    snap.data["state"]["odd"] = {1, 2}  # a set: the pause answers SNAPSHOT_FAILED on this TypeError
    with pytest.raises(TypeError):
        strands_way(snap)
    with pytest.raises(TypeError):
        encode(snap)


def without_time(raw: bytes) -> dict[str, object]:
    doc = json.loads(raw)
    assert doc.pop("created_at")
    return doc


async def test_agent_bytes_are_strands_snapshot_with_the_messages_read_in_place() -> None:
    """core/agent/snapshots.agent_bytes skips take_snapshot's copy of the messages (issue 34): the
    same JSON as Strands' own snapshot, for the pause's preset and the history's fields, bytes too."""
    agent = await scripted_agent_paused()
    agent.messages[0]["content"].append({"image": {"format": "png", "source": {"bytes": b"\x89PNG\x00\xff"}}})
    before = json.dumps(encode_bytes_values(agent.messages))
    cases: list[dict[str, Any]] = [
        {"preset": "session", "app_data": {"turn_id": "t", "chat": "c"}},
        {"include": ["messages", "state", "conversation_manager_state"]},
    ]
    for kw in cases:
        raw = agent_bytes(agent, **kw)
        assert without_time(raw) == without_time(encode(agent.take_snapshot(**kw))), kw
        assert decode(raw).data["messages"] == agent.messages
    assert json.dumps(encode_bytes_values(agent.messages)) == before  # read, never changed
    assert "interrupt_state" in without_time(agent_bytes(agent, preset="session"))["data"]  # type: ignore[operator]


async def test_load_owned_gives_the_agent_load_snapshot_gives_without_copying_the_messages() -> None:
    """core/agent/snapshots.load_owned (issue 34): a just-decoded snapshot's messages are handed over;
    the agent's state is the same as after Strands' load_snapshot, and it resumes the same way."""
    raw = agent_bytes(await scripted_agent_paused(), preset="session")
    copied, owned = (
        Agent(model=ScriptedModel(), tools=[ask], callback_handler=None),
        Agent(model=ScriptedModel(), tools=[ask], callback_handler=None),
    )
    copied.load_snapshot(decode(raw))
    snap = decode(raw)
    load_owned(owned, snap)
    assert owned.messages is snap.data["messages"]  # handed over, not copied
    assert without_time(agent_bytes(owned, preset="session")) == without_time(agent_bytes(copied, preset="session"))
    interrupt = next(iter(owned._interrupt_state.interrupts))
    reply = [{"interruptResponse": {"interruptId": interrupt, "response": {"approved": True}}}]
    a = await copied.invoke_async(reply)  # type: ignore[arg-type]
    b = await owned.invoke_async(reply)  # type: ignore[arg-type]
    assert (a.stop_reason, str(a)) == (b.stop_reason, str(b)) == ("end_turn", str(a))
    after = [without_time(agent_bytes(x, preset="session")) for x in (owned, copied)]
    for doc in after:  # a new message's tracking id is random
        for m in doc["data"]["messages"]:  # type: ignore[index]
            m.pop("tracking_id", None)
    assert after[0] == after[1]
