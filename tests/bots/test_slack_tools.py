"""Issue 14 through Slack (signed requests to the running server, the stand-in Web API): a gated
tool's card, Approve once under 20 racing clicks, Deny with a typed reason, Approve for this chat
and `/approvals revoke tool:NAME`, and a user's own interrupt as a question card."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from chat_approvals.cards import slack_blocks as sb
from chat_approvals.core.agent.demo_tools import notes_file
from chat_approvals.core.agent.factory import prepare
from tests.support import agents
from tests.support import slack_payloads as P
from tests.support.agents import notes_agent, saved_notes
from tests.support.slack_rig import DM, OWNER, OWNER_KEY, SlackRig, assert_valid_blocks, buttons, running
from tests.support.slack_standin import Call


@pytest.fixture
async def notes(tmp_path: Path) -> Path:
    return tmp_path / "notes"


@pytest.fixture
async def rig(notes: Path) -> AsyncIterator[SlackRig]:
    async with running(SlackRig(factory=notes_agent(notes))) as r:
        yield r


def texts(calls: list[Call]) -> list[str]:
    return [json.dumps(c.args.get("blocks")) + str(c.args.get("text")) for c in calls]


async def new_card(rig: SlackRig, text: str = "save a note: hello", thread_ts: str | None = None) -> Call:
    return (await rig.owner_says(text, thread_ts))[-1]


def replies(rig: SlackRig) -> list[Call]:
    return [c for c in rig.standin.of("chat.postMessage") if not buttons(c.args.get("blocks") or [])]


async def test_r1_r10_tool_card_then_20_racing_approve_once_clicks_run_the_body_once(
    rig: SlackRig, notes: Path
) -> None:
    card = await new_card(rig)
    blocks = assert_valid_blocks(card)
    assert "save_note" in json.dumps(blocks) and "hello" in json.dumps(blocks)
    assert [b["action_id"] for b in buttons(blocks)] == [sb.ACTION_APPROVE_ONCE, sb.ACTION_APPROVE, sb.ACTION_DENY]
    assert saved_notes(notes) == []  # paused before the body ran
    payload = rig.click_payload(card, action=sb.ACTION_APPROVE_ONCE)
    assert await asyncio.gather(*(rig.click(payload) for _ in range(20))) == [(200, "")] * 20
    await rig.settle()
    assert saved_notes(notes) == ["hello"]
    assert [t for t in texts(replies(rig)) if "Saved the note: hello" in t]
    assert "Approved once" in texts(rig.standin.of("chat.update"))[-1]
    assert await rig.approvals.grants(user=OWNER_KEY) == []  # once: no grant


async def test_r16_deny_with_a_typed_reason_never_runs_and_the_agent_is_told(rig: SlackRig, notes: Path) -> None:
    card = await new_card(rig)
    payload = rig.click_payload(card, action=sb.ACTION_DENY)
    card_id = json.loads(buttons(card.args["blocks"])[0]["value"])["card"]
    payload["state"] = {
        "values": {sb.reason_block_id(card_id): {sb.ACTION_REASON: {"type": "plain_text_input", "value": "no notes"}}}
    }
    await rig.click(payload)
    await rig.settle()
    assert saved_notes(notes) == []
    (reply,) = [t for t in texts(replies(rig)) if "Not saved" in t]
    assert reply.endswith("Not saved: you denied the note (no notes).") and "Do not try" not in reply
    final = texts(rig.standin.of("chat.update"))[-1]
    assert "Denied" in final and "no notes" in final


async def test_r14_approve_for_this_chat_then_revoke_tool_name_asks_again(rig: SlackRig, notes: Path) -> None:
    card = await new_card(rig)
    thread = card.args["thread_ts"]
    await rig.click(rig.click_payload(card, action=sb.ACTION_APPROVE))
    await rig.settle()
    grants = await rig.approvals.grants(user=OWNER_KEY)
    assert [(g.kind, g.name) for g in grants] == [("tool", "save_note")]
    # the list shows it with a Revoke button naming tool:save_note
    await rig.command("")
    await rig.settle()
    listing = rig.standin.of("response_url")[-1]
    assert [json.loads(b["value"])["name"] for b in buttons(listing.args["blocks"])] == ["tool:save_note"]
    # the next call in the thread runs without a card
    cards = len(rig.card_calls())
    ts = rig.next_ts()
    again = P.message_im(text="save a note: second", user=OWNER, channel=DM, event_id=f"Ev{ts}", ts=ts)
    again["event"]["thread_ts"] = thread
    await rig.send(*P.json_body(again))
    await rig.standin.wait_for(lambda s: any("Saved the note: second" in t for t in texts(replies(rig))))
    assert len(rig.card_calls()) == cards and saved_notes(notes) == ["hello", "second"]
    # revoke, then the same thread asks again
    await rig.command("revoke tool:save_note")
    await rig.settle()
    assert "Revoked" in rig.standin.of("response_url")[-1].args["text"]
    assert await rig.approvals.grants(user=OWNER_KEY) == []
    await new_card(rig, "save a note: third", thread_ts=thread)
    assert saved_notes(notes) == ["hello", "second"]


async def test_a_users_own_interrupt_is_a_question_card_in_slack(tmp_path: Path) -> None:
    r = await SlackRig(factory=lambda: prepare(agents.question_agent())).start()
    try:
        card = await new_card(r, "delete the legacy repo")
        blocks = assert_valid_blocks(card)
        assert "acme/legacy" in json.dumps(blocks) and "*risk:* high" in json.dumps(blocks)
        assert [b["action_id"] for b in buttons(blocks)] == [sb.ACTION_APPROVE, sb.ACTION_DENY]
        await r.click(r.click_payload(card, action=sb.ACTION_APPROVE))
        await r.settle()
        assert [t for t in texts(replies(r)) if "repo: deleted acme/legacy" in t]
    finally:
        await r.stop()


def test_notes_land_in_the_chats_own_folder(tmp_path: Path) -> None:
    a, b = notes_file(tmp_path, "slack:T:C:1"), notes_file(tmp_path, "slack:T:C:2")
    assert a.parent != b.parent and a.parent.parent == tmp_path and "slack" not in str(a.relative_to(tmp_path))
