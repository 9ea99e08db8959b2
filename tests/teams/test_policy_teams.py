"""The approval policy through Teams (issue 13): captured Playground activities posted to the real
server, a mock Bot Connector recording what the bot sends; every card validated against the
Adaptive Card 1.5 schema. Approvers by Entra object id, the requester refused under `approvers`
(a read-only card), quorum votes on every copy, a veto with a reason, the duration ChoiceSet,
routing to the approvers' conversation. R9, R10, R14, R15, R17."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from chat_approvals.cards import adaptive
from chat_approvals.core.clock import ManualClock
from tests.teams.harness import (
    CHAT,
    OTHER,
    OWNER,
    TENANT,
    Bot,
    MockConnector,
    card_data,
    card_text,
    invoke_card,
)
from tests.teams.schema import assert_valid_card

APPROVERS_CONV = "19:approvers@thread.tacv2"
THIRD = {"id": "user-id-2", "name": "Lee Gu", "aadObjectId": "00000000-0000-0000-0000-0000000000022"}
POLICY = f"""\
[defaults]
durations = ["once", "1h", "8h"]
default_duration = "8h"

[approvers]
teams = ["{OTHER["aadObjectId"]}", "{TENANT}:{THIRD["aadObjectId"]}"]

[[rule]]
match = "*.corp.example.com"
approvers = "approvers"
quorum = 2

[[rule]]
match = "example.org"
approvers = "owner_or_approvers"

[routing]
teams_conversation = "{APPROVERS_CONV}"
"""
IN_APPROVERS = {"conversationType": "channel", "tenantId": TENANT, "id": APPROVERS_CONV}


@pytest.fixture
async def bot(tmp_path: Path, connector: tuple[MockConnector, str]) -> AsyncIterator[Bot]:
    async with Bot(tmp_path / "store", ManualClock(), connector[1], policy=POLICY) as b:
        yield b


def routed_posts(mock: MockConnector) -> list[dict[str, Any]]:
    return [c for c in mock.posts() if f"/conversations/{APPROVERS_CONV}/" in c["path"]]


def puts_in(mock: MockConnector, conversation: str) -> list[dict[str, Any]]:
    return [c for c in mock.puts() if f"/conversations/{conversation}/" in c["path"]]


async def ask(bot: Bot, mock: MockConnector, text: str) -> dict[str, Any]:
    status, _ = await bot.say(text)
    assert status == 201
    card = next(c for c in reversed(mock.posts()) if c["body"].get("attachments") and APPROVERS_CONV not in c["path"])
    content: dict[str, Any] = card["body"]["attachments"][0]["content"]
    assert_valid_card(content)
    return content


def inputs(card: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return adaptive.all_inputs(card)


async def test_the_card_offers_durations_a_reason_and_is_also_posted_to_the_approvers(
    bot: Bot, connector: tuple[MockConnector, str]
) -> None:
    mock, _ = connector
    card = await ask(bot, mock, "please fetch https://example.org/data.csv")
    fields = inputs(card)
    assert [c["value"] for c in fields["duration"]["choices"]] == ["once", "1h", "8h"]
    assert fields["duration"]["value"] == "8h"
    assert fields["reason"]["maxLength"] == 500 and fields["reason"]["isMultiline"] is True
    deny = next(a for a in adaptive.all_actions(card) if a["verb"] == "deny")
    assert deny["associatedInputs"] == "auto"  # the reason goes with a deny
    assert f"or an approver may answer ({OTHER['aadObjectId']}, {TENANT}:{THIRD['aadObjectId']})" in card_text(card)
    (routed,) = routed_posts(mock)
    copy = routed["body"]["attachments"][0]["content"]
    assert_valid_card(copy)
    assert "https://teams.microsoft.com/l/message/" in card_text(copy)  # the link to the requesting chat
    p = await bot.pointer(card_data(card)["card_id"])
    assert p is not None and p.card_location is not None and p.card_location["routed_activity_id"]


async def test_r9_an_approver_in_the_approvers_conversation_approves_and_both_copies_update(
    bot: Bot, connector: tuple[MockConnector, str]
) -> None:
    mock, _ = connector
    data = card_data(await ask(bot, mock, "please fetch https://example.org/data.csv"))
    card = invoke_card(*await bot.click("approve", data, **{"from": OTHER, "conversation": IN_APPROVERS}))
    assert "Approved by Megan Bowen" in card_text(card) and "actions" not in card
    await bot.drain()
    p = await bot.pointer(data["card_id"])
    assert p is not None and p.state == "done"
    assert puts_in(mock, APPROVERS_CONV) and puts_in(mock, CHAT.split(":", 2)[2])  # both copies updated
    # the agent's reply went to the requesting conversation, not the approvers'
    replies = [c for c in mock.posts() if c["body"].get("text")]
    assert replies and all(APPROVERS_CONV not in c["path"] for c in replies)
    grants = await bot.approvals.grants(user=OWNER, chat=CHAT)
    assert [g.name for g in grants] == ["example.org"]
    for c in mock.cards():
        assert_valid_card(c)


async def test_r9_the_requester_is_refused_read_only_under_approvers(
    bot: Bot, connector: tuple[MockConnector, str]
) -> None:
    mock, _ = connector
    data = card_data(await ask(bot, mock, "please fetch https://files.corp.example.com/x.csv"))
    before = await bot.pointer(data["card_id"])
    puts = len(mock.puts())
    card = invoke_card(*await bot.click("approve", data))  # the owner
    assert "Not yours to answer" in card_text(card) and "An approver must answer this" in card_text(card)
    assert "actions" not in card
    assert await bot.pointer(data["card_id"]) == before and len(mock.puts()) == puts


async def test_r10_quorum_two_shows_the_votes_then_the_second_approver_resumes(
    bot: Bot, connector: tuple[MockConnector, str]
) -> None:
    mock, _ = connector
    data = card_data(await ask(bot, mock, "please fetch https://files.corp.example.com/x.csv"))
    card = invoke_card(*await bot.click("approve", data, **{"from": OTHER}))
    assert "1 of 2 approvals so far: Megan Bowen" in card_text(card) and card.get("actions")  # still answerable
    assert "1 of 2 approvals" in card_text(puts_in(mock, APPROVERS_CONV)[-1]["body"])  # every copy shows it
    again = invoke_card(*await bot.click("approve", data, **{"from": OTHER}))
    assert "1 of 2 approvals so far: Megan Bowen" in card_text(again)  # counted once
    done = invoke_card(*await bot.click("approve", data, **{"from": THIRD, "conversation": IN_APPROVERS}))
    assert "Approved" in card_text(done) and "Lee Gu" in card_text(done)
    await bot.drain()
    p = await bot.pointer(data["card_id"])
    assert (
        p is not None
        and p.state == "done"
        and [v.user.rsplit(":", 1)[1] for v in p.votes]
        == [
            OTHER["aadObjectId"],
            THIRD["aadObjectId"],
        ]
    )


async def test_r10_two_approvers_at_once_resume_once(bot: Bot, connector: tuple[MockConnector, str]) -> None:
    mock, _ = connector
    data = card_data(await ask(bot, mock, "please fetch https://files.corp.example.com/x.csv"))
    await asyncio.gather(bot.click("approve", data, **{"from": OTHER}), bot.click("approve", data, **{"from": THIRD}))
    await bot.drain()
    p = await bot.pointer(data["card_id"])
    assert p is not None and p.state == "done" and p.claim_count == 1
    kinds = [e.kind for e in await bot.approvals.audit(CHAT)]
    assert kinds.count("claim_won") == 1


async def test_a_veto_with_a_reason(bot: Bot, connector: tuple[MockConnector, str]) -> None:
    mock, _ = connector
    data = card_data(await ask(bot, mock, "please fetch https://files.corp.example.com/x.csv"))
    invoke_card(*await bot.click("approve", data, **{"from": OTHER}))
    card = invoke_card(*await bot.click("deny", {**data, "reason": "Ask the data team"}, **{"from": THIRD}))
    assert "Denied by Lee Gu" in card_text(card) and "Ask the data team" in card_text(card)
    await bot.drain()
    assert "Not downloaded: you denied https://files.corp.example.com/x.csv (Ask the data team)." in mock.texts()
    answered = [e for e in await bot.approvals.audit(CHAT) if e.kind == "answered"]
    assert answered[0].detail["reason"] == "Ask the data team"


async def test_r14_the_chosen_duration_sets_the_grant_and_one_not_offered_is_400(
    bot: Bot, connector: tuple[MockConnector, str]
) -> None:
    mock, _ = connector
    data = card_data(await ask(bot, mock, "please fetch https://example.com/x.csv"))
    status, body = await bot.click("approve", {**data, "duration": "2h"})
    assert status == 400 and body["statusCode"] == 400
    assert (await bot.pointer(data["card_id"])).state == "pending"  # type: ignore[union-attr]
    card = invoke_card(*await bot.click("approve", {**data, "duration": "once"}))
    assert "this turn only" in card_text(card)
    (grant,) = await bot.approvals.grants(user=OWNER, chat=CHAT)
    assert grant.turn_id is not None


async def test_r14_once_asks_again_on_the_next_turn_while_1h_does_not_until_the_clock_moves(
    bot: Bot, connector: tuple[MockConnector, str]
) -> None:
    mock, _ = connector
    text = "please fetch https://example.com/x.csv"
    data = card_data(await ask(bot, mock, text))
    invoke_card(*await bot.click("approve", {**data, "duration": "once"}))
    again = card_data(await ask(bot, mock, text))  # the next turn in this chat asks again
    assert again["card_id"] != data["card_id"]
    invoke_card(*await bot.click("approve", {**again, "duration": "1h"}))
    cards_before = len(mock.cards())
    status, _ = await bot.say(text)
    assert status == 201 and len(mock.cards()) == cards_before  # approved for the hour: no card
    bot.clock.advance(3601)  # the clock moved, not slept
    third = card_data(await ask(bot, mock, text))
    assert third["card_id"] not in (data["card_id"], again["card_id"])
