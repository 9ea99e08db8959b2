"""Issue 32 through Teams (Playground activities to the running server, a mock Bot Connector, the
offline model's `save two notes: A | B`): one batch card with a ChoiceSet per item; Send these
decisions under 20 racing invokes runs the approved body once and the denied never; an item left
undecided is refused (400, nothing changes); Approve all once runs both."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from chat_approvals.cards import adaptive, adaptive_batch
from chat_approvals.cards.adaptive_parse import CHOOSE_EACH
from chat_approvals.core.clock import ManualClock
from tests.support.agents import notes_agent, saved_notes
from tests.teams.harness import CHAT, Bot, MockConnector, card_data, card_text, invoke_card
from tests.teams.schema import assert_valid_card

TWO = "save two notes: first | second"


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    return tmp_path / "notes"


@pytest.fixture
async def bot(tmp_path: Path, notes: Path, connector: tuple[MockConnector, str]) -> AsyncIterator[Bot]:
    factory = notes_agent(notes)
    async with Bot(tmp_path / "store", ManualClock(), connector[1], agent_factory=factory) as b:
        yield b


async def batch_card(bot: Bot, mock: MockConnector) -> dict[str, Any]:
    status, _ = await bot.say(TWO)
    assert status == 201
    card = mock.posts()[-1]["body"]["attachments"][0]["content"]
    assert_valid_card(card)
    return card


async def test_one_card_lists_both_calls_with_a_choice_set_each(
    bot: Bot, connector: tuple[MockConnector, str], notes: Path
) -> None:
    mock, _ = connector
    card = await batch_card(bot, mock)
    assert [a["verb"] for a in adaptive.all_actions(card)] == [
        "approve_once",
        "approve",
        adaptive_batch.VERB_ITEMS,
        "deny",
    ]
    inputs = adaptive.all_inputs(card)
    assert [k for k in inputs if k.startswith(adaptive_batch.ITEM_INPUT)] == ["item_1", "item_2"]
    assert "first" in card_text(card) and "second" in card_text(card) and "2 requests in one step" in card_text(card)
    assert saved_notes(notes) == []


async def test_per_item_decisions_under_20_racing_invokes_run_the_approved_body_once(
    bot: Bot, connector: tuple[MockConnector, str], notes: Path
) -> None:
    mock, _ = connector
    data = card_data(await batch_card(bot, mock))
    decided = {**data, "item_1": "approve_once", "item_2": "deny", "reason": "only the first"}
    results = await asyncio.gather(*(bot.click(adaptive_batch.VERB_ITEMS, decided) for _ in range(20)))
    await bot.drain()
    cards = [invoke_card(*r) for r in results]
    assert any("Partly approved" in card_text(c) for c in cards)
    assert saved_notes(notes) == ["first"]
    kinds = [e.kind for e in await bot.approvals.audit(CHAT)]
    assert kinds.count("claim_won") == 1
    assert any("Not saved: you denied the note (only the first)." in t for t in mock.texts())


async def test_an_item_left_undecided_is_refused_and_changes_nothing(
    bot: Bot, connector: tuple[MockConnector, str], notes: Path
) -> None:
    mock, _ = connector
    data = card_data(await batch_card(bot, mock))
    status, body = await bot.click(adaptive_batch.VERB_ITEMS, {**data, "item_1": "approve_once", "item_2": ""})
    await bot.drain()
    assert CHOOSE_EACH in card_text(body), body
    assert saved_notes(notes) == []
    assert "claim_won" not in [e.kind for e in await bot.approvals.audit(CHAT)]
    invoke_card(*await bot.click("approve_once", data))
    await bot.drain()
    assert sorted(saved_notes(notes)) == ["first", "second"]


EDITS = """\
[[rule]]
match = "tool:save_note"
edits = true
"""


@pytest.fixture
async def edit_bot(tmp_path: Path, notes: Path, connector: tuple[MockConnector, str]) -> AsyncIterator[Bot]:
    factory = notes_agent(notes)
    async with Bot(tmp_path / "store", ManualClock(), connector[1], agent_factory=factory, policy=EDITS) as b:
        yield b


async def test_approve_with_edits_runs_the_edited_input_and_shows_it_on_the_answered_card(
    edit_bot: Bot, connector: tuple[MockConnector, str], notes: Path
) -> None:
    """Issue 32 on Teams: an Input.Text per key of the flat input; the answered card shows the
    input as approved; a field the schema rejects is refused with the schema's error (400)."""
    mock, _ = connector
    status, _ = await edit_bot.say("save a note: call Alex at 3")
    card = mock.posts()[-1]["body"]["attachments"][0]["content"]
    assert_valid_card(card)
    edit = next(a for a in adaptive.all_actions(card) if a["verb"] == adaptive_batch.VERB_APPROVE_EDITED)
    field = adaptive.all_inputs(card)[adaptive_batch.EDIT_FIELD + "text"]
    assert field["value"] == "call Alex at 3"
    data = dict(edit["data"])
    # a field read as a number (a client may send any edit_types): the tool's schema refuses it
    as_number = {**data, "edit:text": "5", adaptive_batch.EDIT_TYPES: '{"text":"integer"}'}
    status, body = await edit_bot.click(adaptive_batch.VERB_APPROVE_EDITED, as_number)
    assert body["statusCode"] == 400 and "Invalid edit: text: 5 is not of type 'string'" in card_text(body), body
    status, body = await edit_bot.click(adaptive_batch.VERB_APPROVE_EDITED, {**data, "edit:text": "x", "reason": "no"})
    assert body["statusCode"] == 400, body  # a reason goes only with a deny
    assert saved_notes(notes) == []
    answered = invoke_card(*await edit_bot.click(adaptive_batch.VERB_APPROVE_EDITED, {**data, "edit:text": "at 4"}))
    await edit_bot.drain()
    assert saved_notes(notes) == ["at 4"]
    assert "Approved with edits" in card_text(answered) and "at 4" in card_text(answered)
