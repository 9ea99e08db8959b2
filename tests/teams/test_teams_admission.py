"""Issue 12 (load), Teams: an Action.Execute invoke waits for its resume in the shared first-in
first-out queue (bots/admission.py); when the queue is full it is refused with an error answer, so
the clicked card stays in place and answerable, and nothing changes in the store."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import chat_approvals.core.protocol.wording as wording
from chat_approvals.bots.teams_bot import TEAMS
from chat_approvals.core.clock import ManualClock
from tests.bots.test_admission import Hold, held_factory
from tests.teams.harness import Bot, MockConnector, card_data, card_text, fixture
from tests.teams.schema import assert_valid_card


def conversation(n: int) -> dict[str, Any]:
    """A conversation of its own per card (one open request per chat)."""
    conv = dict(fixture("playground-message-text.json")["conversation"])
    conv["id"] = f"{conv['id']}-{n}"
    return conv


async def card_in(bot: Bot, mock: MockConnector, n: int) -> dict[str, Any]:
    status, _ = await bot.say("please fetch https://example.org/data.csv", conversation=conversation(n))
    assert status == 201
    card = mock.posts()[-1]["body"]["attachments"][0]["content"]
    assert_valid_card(card)
    return card_data(card)


async def test_r9_a_full_queue_answers_503_and_the_card_stays_answerable(
    tmp_path: Path, connector: tuple[MockConnector, str]
) -> None:
    mock, url = connector
    hold = Hold()
    factory = held_factory(hold)
    bot = Bot(
        tmp_path / "store",
        ManualClock(),
        url,
        agent_factory=factory,
        resume_workers=1,
        resume_queue=1,
        resume_patience=None,
    )
    try:
        async with bot:
            data = [await card_in(bot, mock, n) for n in range(3)]
            first = asyncio.ensure_future(bot.click("approve", data[0], conversation=conversation(0)))
            async with asyncio.timeout(10):
                while not hold.entered.is_set():
                    await asyncio.sleep(0.01)
            second = asyncio.ensure_future(bot.click("approve", data[1], conversation=conversation(1)))
            while bot.app[TEAMS].bot.admission.depth() < 1:  # the second click waits in the queue
                await asyncio.sleep(0.01)
            before = await bot.pointer(data[2]["card_id"])
            status, body = await bot.click("approve", data[2], conversation=conversation(2))
            assert status == 503 and body["statusCode"] == 503, body
            assert wording.TOO_MANY_CLICKS in body["value"]["message"]
            assert await bot.pointer(data[2]["card_id"]) == before and before is not None and before.state == "pending"
            hold.release()
            for task in (first, second):
                status, body = await task
                assert status == 200 and "Approved" in card_text(body["value"]), body
            # with room again, the refused card is answered by the same click
            status, body = await bot.click("approve", data[2], conversation=conversation(2))
            assert status == 200 and "Approved" in card_text(body["value"]), body
            for d in data:
                p = await bot.pointer(d["card_id"])
                assert p is not None and p.state == "done"
    finally:
        hold.release()
