"""Issue 14 through Teams (Playground activities to the running server, a mock Bot Connector):
a gated tool's card, 20 racing Approve-once invokes run the body once, Deny with a reason,
Approve for this chat + `approvals` / `revoke tool:NAME`, and a user's own interrupt."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from chat_approvals.cards import adaptive
from chat_approvals.core.agent.factory import prepare
from chat_approvals.core.clock import ManualClock
from tests.support import agents
from tests.support.agents import notes_agent, saved_notes
from tests.teams.harness import CHAT, OWNER, Bot, MockConnector, card_data, card_text, invoke_card
from tests.teams.schema import assert_valid_card


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    return tmp_path / "notes"


@pytest.fixture
async def bot(tmp_path: Path, notes: Path, connector: tuple[MockConnector, str]) -> AsyncIterator[Bot]:
    factory = notes_agent(notes)
    async with Bot(tmp_path / "store", ManualClock(), connector[1], agent_factory=factory) as b:
        yield b


async def ask(bot: Bot, mock: MockConnector, text: str = "save a note: hello") -> dict[str, Any]:
    status, _ = await bot.say(text)
    assert status == 201
    card = mock.posts()[-1]["body"]["attachments"][0]["content"]
    assert_valid_card(card)
    return card


async def test_r1_r10_tool_card_and_20_racing_approve_once_invokes_run_the_body_once(
    bot: Bot, connector: tuple[MockConnector, str], notes: Path
) -> None:
    mock, _ = connector
    card = await ask(bot, mock)
    assert [a["verb"] for a in adaptive.all_actions(card)] == ["approve_once", "approve", "deny"]
    assert "save_note" in card_text(card) and "hello" in card_text(card)
    assert saved_notes(notes) == []
    data = card_data(card)
    results = await asyncio.gather(*(bot.click("approve_once", data) for _ in range(20)))
    await bot.drain()
    cards = [invoke_card(*r) for r in results]
    assert sum("Approved once by Alex Wilber" in card_text(c) and "Already" not in card_text(c) for c in cards) >= 1
    assert saved_notes(notes) == ["hello"]
    assert any("Saved the note: hello" in t for t in mock.texts())
    kinds = [e.kind for e in await bot.approvals.audit(CHAT)]
    assert kinds.count("claim_won") == 1
    assert await bot.approvals.grants(user=OWNER, chat=CHAT) == []


async def test_r16_deny_with_a_reason_never_runs_and_the_agent_is_told(
    bot: Bot, connector: tuple[MockConnector, str], notes: Path
) -> None:
    mock, _ = connector
    data = card_data(await ask(bot, mock))
    card = invoke_card(*await bot.click("deny", {**data, "reason": "not in this chat"}))
    await bot.drain()
    assert "Denied by Alex Wilber at" in card_text(card) and "not in this chat" in card_text(card)
    assert saved_notes(notes) == []
    assert "Not saved: you denied the note (not in this chat)." in mock.texts()
    assert not any("Do not try" in t for t in mock.texts())  # the model's instruction is not shown


async def test_r14_approve_for_this_chat_lists_the_tool_and_revoke_asks_again(
    bot: Bot, connector: tuple[MockConnector, str], notes: Path
) -> None:
    mock, _ = connector
    data = card_data(await ask(bot, mock))
    invoke_card(*await bot.click("approve", data))
    await bot.drain()
    grants = await bot.approvals.grants(user=OWNER, chat=CHAT)
    assert [(g.kind, g.name) for g in grants] == [("tool", "save_note")]
    cards = len(mock.cards())
    await bot.say("save a note: second")
    await bot.drain()
    assert len(mock.cards()) == cards and saved_notes(notes) == ["hello", "second"]
    await bot.say("approvals")
    listing = mock.cards()[-1]
    assert_valid_card(listing)
    assert "Tool: save_note" in card_text(listing) and '"subject": "tool:save_note"' in card_text(listing)
    await bot.say("revoke tool:save_note")
    assert "Revoked: save_note." in card_text(mock.cards()[-1]) and "Attention" not in card_text(mock.cards()[-1])
    assert await bot.approvals.grants(user=OWNER, chat=CHAT) == []
    again = await ask(bot, mock, "save a note: third")
    assert [a["verb"] for a in adaptive.all_actions(again)] == ["approve_once", "approve", "deny"]
    assert saved_notes(notes) == ["hello", "second"]


async def test_a_users_own_interrupt_is_a_question_card_in_teams(
    tmp_path: Path, connector: tuple[MockConnector, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    mock, url = connector
    log = tmp_path / "answers.jsonl"
    monkeypatch.setenv(agents.QUESTION_LOG_ENV, str(log))
    async with Bot(tmp_path / "q", ManualClock(), url, agent_factory=lambda: prepare(agents.question_agent())) as b:
        card = await ask(b, mock, "delete the legacy repo")
        assert [a["verb"] for a in adaptive.all_actions(card)] == ["approve", "deny"]
        assert "acme/legacy" in card_text(card) and "risk" in card_text(card)
        invoke_card(*await b.click("deny", {**card_data(card), "reason": "keep it"}))
        await b.drain()
        assert log.read_text().strip() == '{"approved": false, "reason": "keep it"}'
        assert any("NOT deleted acme/legacy: keep it" in t for t in mock.texts())
