"""Issue 33 through Teams: captured Playground activities to the real server with its timer loop,
the injected clock, a mock Bot Connector recording what the bot sends. A reminder at 10 m is a
message in the card's conversation @mentioning (by Entra object id) those who have not answered,
once; at expiry every copy of the card is replaced in place, once, with a read-only card."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from chat_approvals.core.clock import ManualClock
from tests.teams.harness import CHAT, OTHER, OWNER, TENANT, Bot, MockConnector, card_data, card_text, invoke_card
from tests.teams.schema import assert_valid_card

APPROVERS_CONV = "19:approvers@thread.tacv2"
SECURITY_CONV = "19:security@thread.tacv2"
THIRD = {"id": "user-id-2", "name": "Lee Gu", "aadObjectId": "00000000-0000-0000-0000-0000000000022"}
IN_SECURITY = {"conversationType": "channel", "tenantId": TENANT, "id": SECURITY_CONV}
OWNER_AAD = OWNER.rsplit(":", 1)[1]
TICK = 0.05
MIN = 60.0
POLICY = f"""\
[defaults]
approvers = "owner_or_approvers"
expires_after = "1h"
remind_after = "10m"

[approvers]
teams = ["{OTHER["aadObjectId"]}"]

[[rule]]
match = "escalate.example.org"
escalate_after = "30m"
escalate_to = ["{THIRD["aadObjectId"]}"]
escalate_conversation = "{SECURITY_CONV}"

[routing]
teams_conversation = "{APPROVERS_CONV}"
"""


@pytest.fixture
async def bot(tmp_path: Path, connector: tuple[MockConnector, str]) -> AsyncIterator[Bot]:
    async with Bot(tmp_path / "store", ManualClock(), connector[1], policy=POLICY, timer_every=TICK) as b:
        yield b


def reminders(mock: MockConnector) -> list[dict[str, Any]]:
    return [c for c in mock.posts() if "Reminder for" in ((c["body"] or {}).get("text") or "")]


def expired_puts(mock: MockConnector) -> list[dict[str, Any]]:
    return [c for c in mock.puts() if "the agent was told" in card_text(c["body"] or {})]


def agent_replies(mock: MockConnector) -> list[dict[str, Any]]:
    return [c for c in mock.posts() if "Not downloaded" in ((c["body"] or {}).get("text") or "")]


async def until(check: Callable[[], bool]) -> None:
    async with asyncio.timeout(10):
        while not check():
            await asyncio.sleep(0.02)


async def quiet() -> None:
    await asyncio.sleep(TICK * 8)


async def test_reminder_mentions_who_has_not_answered_and_expiry_replaces_every_copy_once(
    bot: Bot, connector: tuple[MockConnector, str]
) -> None:
    mock = connector[0]
    start = bot.clock.now()
    status, _ = await bot.say("download https://example.org/data.csv")
    assert status == 201
    cards = [c for c in mock.posts() if (c["body"] or {}).get("attachments")]
    assert len(cards) == 2  # the requester's and the approvers' copy
    bot.clock.set(start + 9 * MIN)
    await quiet()
    assert reminders(mock) == []
    bot.clock.set(start + 10 * MIN)
    await until(lambda: len(reminders(mock)) == 2)
    for r in reminders(mock):
        body = r["body"]
        ids = {e["mentioned"]["id"] for e in body["entities"] if e["type"] == "mention"}
        assert ids == {OWNER_AAD, OTHER["aadObjectId"]}
        for e in body["entities"]:
            assert e["text"] in body["text"]  # each mention's text is in the message
        assert "Alex Wilber" in body["text"]  # named as Teams knows them
        assert "{{" not in body["text"] and " UTC" in body["text"]  # a message renders no card templates
    assert {r["path"].split("/conversations/")[1].split("/")[0] for r in reminders(mock)} >= {APPROVERS_CONV}
    await quiet()
    assert len(reminders(mock)) == 2  # once
    bot.clock.set(start + 60 * MIN - 5)  # just before the expiry: denied, the turn told
    await until(lambda: len(expired_puts(mock)) == 2 and len(agent_replies(mock)) == 1)
    assert f"/conversations/{APPROVERS_CONV}/" not in agent_replies(mock)[0]["path"]  # in the requester's
    for put in expired_puts(mock):
        card = put["body"]["attachments"][0]["content"]
        assert_valid_card(card)
        assert not card.get("actions")  # read-only
    conversations = {p["path"].split("/conversations/")[1].split("/")[0] for p in expired_puts(mock)}
    assert len(conversations) == 2 and APPROVERS_CONV in conversations  # both copies, in place
    await quiet()
    assert len(expired_puts(mock)) == 2 and len(agent_replies(mock)) == 1  # once


async def test_escalation_posts_to_the_escalation_conversation_and_its_approver_resumes_once(
    bot: Bot, connector: tuple[MockConnector, str]
) -> None:
    mock = connector[0]
    start = bot.clock.now()
    status, _ = await bot.say("download https://escalate.example.org/data.csv")
    assert status == 201
    first = next(c for c in mock.posts() if (c["body"] or {}).get("attachments"))["body"]["attachments"][0]["content"]
    old = card_data(first)
    bot.clock.set(start + 29 * MIN)
    refused = invoke_card(*await bot.click("approve", old, **{"from": THIRD, "conversation": IN_SECURITY}))
    assert "Not yours to answer" in card_text(refused)  # not escalated yet
    mock.MEMBERS[THIRD["aadObjectId"]] = THIRD

    def in_security() -> list[dict[str, Any]]:
        return [c for c in mock.posts() if f"/conversations/{SECURITY_CONV}/" in c["path"]]

    bot.clock.set(start + 30 * MIN)
    await until(lambda: len(in_security()) == 2)
    posted, mention = in_security()[0]["body"], in_security()[1]["body"]
    card = posted["attachments"][0]["content"]
    assert_valid_card(card)
    assert "escalated to" in card_text(card)
    assert [e["mentioned"]["id"] for e in mention["entities"]] == [THIRD["aadObjectId"]]
    assert "<at>Lee Gu</at>" in mention["text"]
    escalated_puts = [c for c in mock.puts() if "escalated to" in card_text(c["body"] or {})]
    assert len(escalated_puts) == 2  # the requester's copy and the approvers' copy say so
    # the old buttons no longer work (reissued with a fresh secret); the escalation copy's do, once
    stale = invoke_card(*await bot.click("approve", old, **{"from": THIRD, "conversation": IN_SECURITY}))
    assert "Unknown request" in card_text(stale)
    done = invoke_card(*await bot.click("approve", card_data(card), **{"from": THIRD, "conversation": IN_SECURITY}))
    assert "Approved" in card_text(done) and "Lee Gu" in card_text(done)
    await bot.drain()
    security_puts = [c for c in mock.puts() if f"/conversations/{SECURITY_CONV}/" in c["path"]]
    assert security_puts and "Approved" in card_text(security_puts[-1]["body"])  # every copy shows the outcome
    again = invoke_card(*await bot.click("approve", card_data(card), **{"from": THIRD, "conversation": IN_SECURITY}))
    assert "Already answered" in card_text(again) and "approved by Lee Gu" in card_text(again)  # once
    kinds = [e.kind for e in await bot.approvals.audit(CHAT)]
    assert kinds.count("claim_won") == 1 and kinds.count("card.escalated") == 1
