"""Issue 28, chat behaviour through Teams (Playground activities to the running server, a mock
Bot Connector): a welcome with two example prompts when the bot is added, `help` naming downloads,
tools and approvals, a typed "yes" while a card is open answered with a hint (the card is not
posted again), the card's preview "Approval needed: HOST", and a revoke confirmed neutrally."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from chat_approvals.cards import wording as words
from chat_approvals.cards.effects import WAITING_TEXT
from chat_approvals.core.agent.factory import default_factory, gated_factory
from chat_approvals.core.clock import ManualClock
from chat_approvals.core.protocol import wording as core_wording
from tests.teams.harness import Bot, MockConnector, card_text


@pytest.fixture
async def bot(tmp_path: Path, connector: tuple[MockConnector, str]) -> AsyncIterator[Bot]:
    factory = gated_factory(default_factory("scripted", notes_dir=tmp_path / "notes"), "save_note")
    async with Bot(tmp_path / "store", ManualClock(), connector[1], agent_factory=factory) as b:
        yield b


def posted_cards(mock: MockConnector) -> list[dict[str, Any]]:
    return [p for p in mock.posts() if p["body"].get("attachments")]


def test_the_effects_know_cores_usual_waiting_text() -> None:
    assert WAITING_TEXT == core_wording.WAITING  # cards may not import core.protocol: kept equal here


async def test_the_bot_added_to_a_chat_says_hello_with_two_example_prompts(
    bot: Bot, connector: tuple[MockConnector, str]
) -> None:
    mock, _ = connector
    act = bot.activity("playground-conversationUpdate.json")
    assert (await bot.post(act))[0] == 201
    assert (await bot.post(act))[0] == 201  # redelivered: not welcomed twice
    assert mock.texts() == [words.WELCOME]
    assert words.DEMO_FETCH in words.WELCOME and words.DEMO_NOTE in words.WELCOME
    assert (await bot.post(bot.activity("playground-installationUpdate.json")))[0] == 201
    assert len(mock.calls) == 1


async def test_help_lists_downloads_tools_and_approvals(bot: Bot, connector: tuple[MockConnector, str]) -> None:
    mock, _ = connector
    await bot.say("help")
    text = card_text(mock.cards()[-1])
    for said in ("Downloads:", "Tools:", "Approvals:", "revoke tool:NAME", words.DEMO_FETCH):
        assert said in text


async def test_hi_gets_what_the_agent_can_do_not_no_download_needed(
    bot: Bot, connector: tuple[MockConnector, str]
) -> None:
    mock, _ = connector
    await bot.say("hi, what can you do?")
    (text,) = mock.texts()
    assert "No download is needed" not in text and "please fetch" in text and "save a note" in text


async def test_typed_yes_while_a_card_is_open_gets_a_hint_and_no_second_card(
    bot: Bot, connector: tuple[MockConnector, str]
) -> None:
    mock, _ = connector
    await bot.say("please fetch https://example.com/data.csv")
    (post,) = mock.posts()
    assert post["body"]["summary"] == "Approval needed: example.com"  # the chat list's preview
    for typed in ("yes", "Approve!", "ok"):
        await bot.say(typed)
    assert len(posted_cards(mock)) == 1  # not posted again
    assert mock.texts()[-3:] == [core_wording.USE_THE_BUTTONS] * 3
    await bot.say("please fetch https://example.com/data.csv")  # anything else: shown again, as before
    assert len(posted_cards(mock)) == 2


async def test_a_revoke_is_confirmed_in_a_neutral_style(bot: Bot, connector: tuple[MockConnector, str]) -> None:
    mock, _ = connector
    await bot.say("revoke example.com")
    text = card_text(mock.cards()[-1])
    assert "Nothing to revoke." in text and '"color": "Attention"' not in text
