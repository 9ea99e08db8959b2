"""The approval policy through Slack (issue 13): signed requests to the running server, the stand-in
Web API. Approvers (ids and a user group resolved with usergroups.users.list), the requester
refused under `approvers`, quorum votes shown on both copies of the card, a veto with a reason, the
duration select, routing to the approvers' channel. R9, R10, R14, R15, R17."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from chat_approvals.cards import slack_blocks as sb
from chat_approvals.core.identity import SlackUser
from tests.support import slack_payloads as P
from tests.support.slack_rig import DM, OWNER, OWNER_KEY, SlackRig, assert_valid_blocks, buttons, running
from tests.support.slack_standin import Call

APPROVALS_CHANNEL = "C0APPROVALS"
ALICE, BOB, CAROL = "U0ALICE", "U0BOB", "U0CAROL"
POLICY = f"""\
[defaults]
durations = ["once", "1h", "8h"]
default_duration = "8h"

[approvers]
slack = ["{ALICE}", "S0SECOPS"]

[[rule]]
match = "*.corp.example.com"
approvers = "approvers"
quorum = 2

[[rule]]
match = "example.org"
approvers = "owner_or_approvers"

[routing]
slack_channel = "{APPROVALS_CHANNEL}"
"""
CORP = "download <https://files.corp.example.com/report.csv>"
ORG = "download <https://example.org/data.csv>"
PLAIN = "download <https://example.com/x.csv>"


@pytest.fixture
async def rig() -> AsyncIterator[SlackRig]:
    async with running(SlackRig(policy=POLICY)) as r:
        r.standin.usergroups["S0SECOPS"] = [BOB, CAROL]
        yield r


def texts(calls: list[Call]) -> list[str]:
    return [json.dumps(c.args.get("blocks")) + str(c.args.get("text")) for c in calls]


def key(user: str) -> str:
    return SlackUser(None, P.TEAM, user).key


async def cards_for(rig: SlackRig, text: str) -> tuple[Call, Call | None]:
    """(the card in the requester's thread, its copy in the approvers' channel, if routed)."""
    before = len(rig.card_calls())
    assert await rig.dm(text) == (200, "")
    await rig.standin.wait_for(lambda s: len(rig.card_calls()) >= before + 1)
    await rig.settle()
    new = rig.card_calls()[before:]
    thread = next(c for c in new if c.args["channel"] == DM)
    routed = next((c for c in new if c.args["channel"] == APPROVALS_CHANNEL), None)
    return thread, routed


def ephemerals_to(rig: SlackRig, user: str) -> list[str]:
    calls = rig.standin.of("chat.postEphemeral")
    for c in calls:
        assert_valid_blocks(c)
    return texts([c for c in calls if c.args["user"] == user])


def updates_of(rig: SlackRig, call: Call) -> list[str]:
    return texts([u for u in rig.standin.of("chat.update") if u.args["ts"] == call.result["ts"]])


async def test_routing_posts_both_cards_with_a_link_and_the_policy_controls(rig: SlackRig) -> None:
    thread, routed = await cards_for(rig, ORG)
    assert routed is not None and "thread_ts" not in routed.args  # a new message in the approvers' channel
    routed_blocks = json.dumps(assert_valid_blocks(routed))
    assert "https://approvals-test.slack.com/archives/" in routed_blocks  # the link to the requesting thread
    thread_blocks = assert_valid_blocks(thread)
    assert f"<#{APPROVALS_CHANNEL}>" in json.dumps(thread_blocks)
    # the duration select (the default preselected) and the optional deny reason, valid Block Kit
    select = next(e for b in thread_blocks for e in b.get("elements", []) if e.get("type") == "static_select")
    assert [o["value"] for o in select["options"]] == ["once", "1h", "8h"]
    assert select["initial_option"]["value"] == "8h"
    reason = next(b for b in thread_blocks if b["type"] == "input")
    assert reason["optional"] is True and reason["element"]["max_length"] == 500
    assert "or an approver may answer (<@U0ALICE>, <!subteam^S0SECOPS>)" in json.dumps(thread_blocks)  # named
    io = rig.store
    pointer = await io.run(io.rows.get_pointer, routed.args and thread_chat(thread))
    assert pointer is not None and pointer.card_location is not None
    assert pointer.card_location["routed_channel"] == APPROVALS_CHANNEL
    assert pointer.card_location["routed_ts"] == routed.result["ts"]


def thread_chat(thread: Call) -> str:
    return f"slack:{P.TEAM}:{DM}:{thread.args['thread_ts']}"


async def test_r9_an_approver_answers_in_the_approvers_channel_and_both_cards_update(rig: SlackRig) -> None:
    thread, routed = await cards_for(rig, ORG)
    assert routed is not None
    await rig.click(rig.click_payload(routed, user=ALICE))
    await rig.settle()
    for copy in (thread, routed):
        seen = updates_of(rig, copy)
        assert any("Resuming" in t for t in seen) and "Approved" in seen[-1] and f"<@{ALICE}>" in seen[-1]
        last = [u for u in rig.standin.of("chat.update") if u.args["ts"] == copy.result["ts"]][-1]
        assert not buttons(assert_valid_blocks(last))  # answered: nothing left to click
    grants = await rig.approvals.grants(user=OWNER_KEY)
    assert [g.name for g in grants] == ["example.org"]  # the requester's grant, in the requester's chat
    replies = [
        c for c in rig.standin.of("chat.postMessage") if c.args["channel"] == DM and not buttons(c.args["blocks"])
    ]
    assert replies and replies[-1].args["thread_ts"] == thread.args["thread_ts"]


async def test_r9_the_requester_is_refused_under_approvers_ephemerally_and_nothing_changes(rig: SlackRig) -> None:
    thread, _ = await cards_for(rig, CORP)
    card_id = json.loads(buttons(thread.args["blocks"])[0]["value"])["card"]
    before = await rig.snapshot(card_id)
    await rig.click(rig.click_payload(thread, user=OWNER))
    await rig.settle()
    told = ephemerals_to(rig, OWNER)
    assert len(told) == 1 and "An approver must answer this" in told[0]
    after = await rig.snapshot(card_id)
    assert after["pointer"] == before["pointer"] and after["grants"] == before["grants"]
    assert not rig.standin.of("chat.update")


async def test_r10_quorum_two_with_a_user_group_and_votes_on_both_cards(rig: SlackRig) -> None:
    thread, routed = await cards_for(rig, CORP)
    assert routed is not None
    await rig.click(rig.click_payload(routed, user=ALICE))
    await rig.settle()
    assert "1 of 2 approvals" in ephemerals_to(rig, ALICE)[-1]
    for copy in (thread, routed):
        seen = updates_of(rig, copy)
        assert "1 of 2 approvals" in seen[-1] and f"<@{ALICE}>" in seen[-1]
    # the re-rendered card still answers (the click's secret, never a stored one) and validates
    assert buttons(assert_valid_blocks(rig.standin.of("chat.update")[-1]))
    # Alice again: counted once
    await rig.click(rig.click_payload(routed, user=ALICE))
    await rig.settle()
    assert "1 of 2 approvals" in ephemerals_to(rig, ALICE)[-1]
    # a stranger (not listed, not in the group) is refused
    await rig.click(rig.click_payload(routed, user="U0MALLORY"))
    await rig.settle()
    assert "not one of the approvers" in ephemerals_to(rig, "U0MALLORY")[-1]
    # Bob is in the S0SECOPS user group: resolved through usergroups.users.list
    await rig.click(rig.click_payload(routed, user=BOB))
    await rig.settle()
    assert rig.standin.of("usergroups.users.list")
    for copy in (thread, routed):
        assert "Approved" in updates_of(rig, copy)[-1]
    io = rig.store
    pointer = await io.run(io.rows.get_pointer, thread_chat(thread))
    assert pointer is not None and pointer.state == "done" and pointer.claim_count == 1
    assert [v.user for v in pointer.votes] == [key(ALICE), key(BOB)]


async def test_r10_two_approvers_clicking_at_once_resume_once(rig: SlackRig) -> None:
    thread, routed = await cards_for(rig, CORP)
    assert routed is not None
    a, b = rig.click_payload(routed, user=ALICE), rig.click_payload(routed, user=BOB)
    assert await asyncio.gather(rig.click(a), rig.click(b)) == [(200, ""), (200, "")]
    await rig.settle()
    io = rig.store
    pointer = await io.run(io.rows.get_pointer, thread_chat(thread))
    assert pointer is not None and pointer.state == "done" and pointer.claim_count == 1
    replies = [
        c for c in rig.standin.of("chat.postMessage") if c.args["channel"] == DM and not buttons(c.args["blocks"])
    ]
    assert len(replies) == 1  # the turn resumed once


def _state(card_id: str, *, reason: str | None = None, duration: str | None = None) -> dict[str, Any]:
    values: dict[str, Any] = {}
    if reason is not None:
        values[sb.reason_block_id(card_id)] = {sb.ACTION_REASON: {"type": "plain_text_input", "value": reason}}
    if duration is not None:
        option = {"text": {"type": "plain_text", "text": duration}, "value": duration}
        values[sb.duration_block_id(card_id)] = {
            sb.ACTION_DURATION: {"type": "static_select", "selected_option": option}
        }
    return {"values": values}


def _card_id(call: Call) -> str:
    card_id: str = json.loads(buttons(call.args["blocks"])[0]["value"])["card"]
    return card_id


async def test_a_veto_with_a_reason_reaches_the_agent_the_card_and_the_audit(rig: SlackRig) -> None:
    thread, routed = await cards_for(rig, CORP)
    assert routed is not None
    await rig.click(rig.click_payload(routed, user=ALICE))
    await rig.settle()
    state = _state(_card_id(routed), reason="Use the\tstaging copy")
    await rig.click(rig.click_payload(routed, user=BOB, action=sb.ACTION_DENY, state=state))
    await rig.settle()
    for copy in (thread, routed):
        last = updates_of(rig, copy)[-1]
        assert "Denied" in last and "Use the staging copy" in last
    reply = [c for c in rig.standin.of("chat.postMessage") if c.args["channel"] == DM and not buttons(c.args["blocks"])]
    assert "you denied https://files.corp.example.com/report.csv (Use the staging copy)." in texts(reply)[-1]
    events = await rig.approvals.audit(thread_chat(thread))
    answered = [e for e in events if e.kind == "answered"]
    assert answered[0].detail["reason"] == "Use the staging copy" and answered[0].actor == key(BOB)
    assert await rig.approvals.grants(user=OWNER_KEY) == []


async def test_r14_the_duration_select_sets_the_grant_once_is_this_turn_only(rig: SlackRig) -> None:
    thread, _ = await cards_for(rig, PLAIN)
    await rig.click(rig.click_payload(thread, state=_state(_card_id(thread), duration="once")))
    await rig.settle()
    (grant,) = await rig.approvals.grants(user=OWNER_KEY)
    assert grant.turn_id is not None
    assert "this turn only" in updates_of(rig, thread)[-1]
    thread2, _ = await cards_for(rig, PLAIN)  # another thread, another chat: asks
    await rig.click(rig.click_payload(thread2))  # the select untouched: its initial option, 8h
    await rig.settle()
    (grant,) = await rig.approvals.grants(user=OWNER_KEY, chat=thread_chat(thread2))
    assert grant.turn_id is None and grant.expires_at - grant.created_at == 8 * 3600


async def test_r15_a_duration_the_card_does_not_offer_is_refused_and_changes_nothing(rig: SlackRig) -> None:
    thread, _ = await cards_for(rig, PLAIN)
    before = await rig.snapshot(_card_id(thread))
    await rig.click(rig.click_payload(thread, state=_state(_card_id(thread), duration="2h")))
    await rig.settle()
    assert "could not be read" in ephemerals_to(rig, OWNER)[-1]
    assert await rig.snapshot(_card_id(thread)) == before
