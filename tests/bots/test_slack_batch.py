"""Issue 32 through Slack (signed requests to the running server, the stand-in Web API, the offline
model's `save two notes: A | B`): one batch card lists both calls with a select each; Send the
decisions above runs the approved body once and the denied never (under 20 racing clicks); an
item left undecided is refused to the clicker and changes nothing; Approve all once runs both."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from chat_approvals.cards import slack_batch
from chat_approvals.cards import slack_blocks as sb
from chat_approvals.cards.slack_answer import CHOOSE_EACH
from chat_approvals.core.agent.factory import default_factory, gated_factory
from tests.support.slack_rig import SlackRig, assert_valid_blocks, buttons, running
from tests.support.slack_standin import Call

TWO = "save two notes: first | second"


@pytest.fixture
async def notes(tmp_path: Path) -> Path:
    return tmp_path / "notes"


@pytest.fixture
async def rig(notes: Path) -> AsyncIterator[SlackRig]:
    async with running(SlackRig(factory=gated_factory(default_factory("scripted", notes_dir=notes), "save_note"))) as r:
        yield r


def saved(notes: Path) -> list[str]:
    files = list(notes.rglob("notes.txt")) if notes.exists() else []
    return [line for f in files for line in f.read_text().splitlines()]


def selects(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [b for b in blocks if (b.get("accessory") or {}).get("action_id") == slack_batch.ACTION_ITEM]


def chosen(blocks: list[dict[str, Any]], choices: list[str | None]) -> dict[str, Any]:
    """The `state` Slack sends: each item's select as the person left it (None: untouched)."""
    values: dict[str, Any] = {}
    for block, choice in zip(selects(blocks), choices, strict=True):
        option = next((o for o in block["accessory"]["options"] if o["value"] == choice), None)
        values[block["block_id"]] = {
            slack_batch.ACTION_ITEM: {"type": "static_select", "selected_option": option} if option else {}
        }
    return {"values": values}


async def batch_card(rig: SlackRig) -> Call:
    card = (await rig.owner_says(TWO))[-1]
    return card


async def test_one_card_lists_both_calls_with_a_select_each(rig: SlackRig, notes: Path) -> None:
    card = await batch_card(rig)
    blocks = assert_valid_blocks(card)
    text = json.dumps(blocks)
    assert "first" in text and "second" in text and "2 requests in one step" in text
    assert len(selects(blocks)) == 2
    assert [b["action_id"] for b in buttons(blocks)] == [
        sb.ACTION_APPROVE_ONCE,
        sb.ACTION_APPROVE,
        slack_batch.ACTION_ITEMS,
        sb.ACTION_DENY,
    ]
    assert saved(notes) == []


async def test_per_item_decisions_under_20_racing_clicks_run_the_approved_body_once(rig: SlackRig, notes: Path) -> None:
    card = await batch_card(rig)
    blocks = card.args["blocks"]
    payload = rig.click_payload(card, action=slack_batch.ACTION_ITEMS, state=chosen(blocks, ["deny", "approve_once"]))
    assert await asyncio.gather(*(rig.click(payload) for _ in range(20))) == [(200, "")] * 20
    await rig.settle()
    assert saved(notes) == ["second"]
    final = json.dumps(rig.standin.of("chat.update")[-1].args["blocks"])
    assert "Partly approved" in final and "1. Run" in final and "denied; it did not run" in final
    assert "approved once" in final


async def test_an_item_left_undecided_is_refused_to_the_clicker_and_changes_nothing(rig: SlackRig, notes: Path) -> None:
    card = await batch_card(rig)
    blocks = card.args["blocks"]
    ephemerals = len(rig.standin.of("chat.postEphemeral"))
    await rig.click(rig.click_payload(card, action=slack_batch.ACTION_ITEMS, state=chosen(blocks, ["deny", None])))
    await rig.settle()
    told = rig.standin.of("chat.postEphemeral")[ephemerals:]
    assert [c for c in told if CHOOSE_EACH in json.dumps(c.args.get("blocks"))], told
    assert saved(notes) == []
    # still answerable
    await rig.click(rig.click_payload(card, action=sb.ACTION_APPROVE_ONCE))
    await rig.settle()
    assert sorted(saved(notes)) == ["first", "second"]
