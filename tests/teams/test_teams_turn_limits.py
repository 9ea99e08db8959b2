"""What a turn may carry (issue 27.2) on Teams: a message naming more URLs or hosts than a turn
may is answered with a plain reply, and no turn starts (no card, nothing in the audit), through
the running server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from botbuilder.schema import Activity

from chat_approvals.bots.teams_activity import chat_key
from chat_approvals.bots.turn_limits import MAX_HOSTS, MAX_URLS
from chat_approvals.core.clock import ManualClock
from tests.teams.harness import Bot, MockConnector

TOO_MANY_URLS = " ".join(f"https://example.org/{n}.csv" for n in range(MAX_URLS + 1))
TOO_MANY_HOSTS = " ".join(f"https://h{n}.example.org/a.csv" for n in range(MAX_HOSTS + 1))


@pytest.fixture
async def bot(tmp_path: Path, connector: tuple[MockConnector, str]) -> AsyncIterator[Bot]:
    async with Bot(tmp_path / "store", ManualClock(), connector[1]) as b:
        yield b


@pytest.mark.parametrize(("text", "why"), [(TOO_MANY_URLS, "URLs"), (TOO_MANY_HOSTS, "hosts")])
async def test_a_message_past_the_turn_caps_gets_a_reply_and_no_turn(
    bot: Bot, connector: tuple[MockConnector, str], text: str, why: str
) -> None:
    mock, _ = connector
    activity = bot.activity("playground-message-text.json", text=f"please fetch {text}")
    status, _ = await bot.post(activity)
    assert status in (200, 201)
    await bot.drain()
    assert mock.cards() == []
    [reply] = mock.texts()
    assert reply.startswith("Not started:") and "more than" in reply and why in reply
    chat = chat_key(Activity().deserialize(activity))
    assert await bot.approvals.audit(chat) == []  # no turn, no lease, no card


async def test_a_message_at_the_caps_still_starts_a_turn(bot: Bot, connector: tuple[MockConnector, str]) -> None:
    mock, _ = connector
    at_cap = " ".join(f"https://h{n % MAX_HOSTS}.example.org/{n}.csv" for n in range(MAX_URLS))
    status, _ = await bot.say(f"please fetch {at_cap}")
    assert status in (200, 201)
    await bot.drain()
    assert len(mock.cards()) == 1
