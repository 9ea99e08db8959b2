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
from tests.teams.harness import OTHER, OWNER, Bot, MockConnector, card_text
from tests.teams.schema import assert_valid_card

APPROVERS_CONV = "19:approvers@thread.tacv2"
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
