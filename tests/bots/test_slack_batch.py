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
from slack_sdk.models.views import View

from chat_approvals.cards import slack_batch, slack_edit
from chat_approvals.cards import slack_blocks as sb
from chat_approvals.cards.slack_answer import CHOOSE_EACH
from tests.support import slack_payloads as P
from tests.support.agents import notes_agent, saved_notes
from tests.support.slack_rig import OWNER, SlackRig, assert_valid_blocks, buttons, running
from tests.support.slack_standin import Call

TWO = "save two notes: first | second"


@pytest.fixture
async def notes(tmp_path: Path) -> Path:
    return tmp_path / "notes"


@pytest.fixture
async def rig(notes: Path) -> AsyncIterator[SlackRig]:
    async with running(SlackRig(factory=notes_agent(notes))) as r:
        yield r


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
    assert saved_notes(notes) == []


async def test_per_item_decisions_under_20_racing_clicks_run_the_approved_body_once(rig: SlackRig, notes: Path) -> None:
    card = await batch_card(rig)
    blocks = card.args["blocks"]
    payload = rig.click_payload(card, action=slack_batch.ACTION_ITEMS, state=chosen(blocks, ["deny", "approve_once"]))
    assert await asyncio.gather(*(rig.click(payload) for _ in range(20))) == [(200, "")] * 20
    await rig.settle()
    assert saved_notes(notes) == ["second"]
    final = json.dumps(rig.standin.of("chat.update")[-1].args["blocks"])
    assert "Partly approved" in final and "Request 1: run" in final and "denied; it did not run" in final
    assert "approved once" in final


async def test_an_item_left_undecided_is_refused_to_the_clicker_and_changes_nothing(rig: SlackRig, notes: Path) -> None:
    card = await batch_card(rig)
    blocks = card.args["blocks"]
    ephemerals = len(rig.standin.of("chat.postEphemeral"))
    await rig.click(rig.click_payload(card, action=slack_batch.ACTION_ITEMS, state=chosen(blocks, ["deny", None])))
    await rig.settle()
    told = rig.standin.of("chat.postEphemeral")[ephemerals:]
    assert [c for c in told if CHOOSE_EACH in json.dumps(c.args.get("blocks"))], told
    assert saved_notes(notes) == []
    # still answerable
    await rig.click(rig.click_payload(card, action=sb.ACTION_APPROVE_ONCE))
    await rig.settle()
    assert sorted(saved_notes(notes)) == ["first", "second"]


EDITS = """\
[[rule]]
match = "tool:save_note"
edits = true
"""


@pytest.fixture
async def edit_rig(notes: Path) -> AsyncIterator[SlackRig]:
    factory = notes_agent(notes)
    async with running(SlackRig(factory=factory, policy=EDITS)) as r:
        yield r


async def open_modal(rig: SlackRig, card: Call) -> dict[str, Any]:
    opened = len(rig.standin.of("views.open"))
    await rig.click(rig.click_payload(card, action=slack_edit.ACTION_EDIT))
    await rig.standin.wait_for(lambda s: len(rig.standin.of("views.open")) > opened)
    view = rig.standin.of("views.open")[-1].args["view"]
    return json.loads(view) if isinstance(view, str) else view


async def test_approve_with_edits_opens_a_modal_and_runs_exactly_the_edited_input(
    edit_rig: SlackRig, notes: Path
) -> None:
    """Issue 32 on Slack: the modal holds one field per key of the flat input; a field the tool's
    schema rejects comes back as an ephemeral with the schema's words; the accepted edit runs, and
    the answered card shows the input as approved."""
    rig = edit_rig
    card = (await rig.owner_says("save a note: call Alex at 3"))[-1]
    assert slack_edit.ACTION_EDIT in [b["action_id"] for b in buttons(assert_valid_blocks(card))]
    view = await open_modal(rig, card)
    assert View(**view).to_dict()  # a valid modal by slack_sdk's models
    (field,) = [b for b in view["blocks"] if b["type"] == "input"]
    assert field["block_id"] == "edit:text" and field["element"]["initial_value"] == "call Alex at 3"
    # a submission the schema refuses (the metadata says the field is a number: the schema wants a string)
    meta = json.loads(view["private_metadata"])
    bad = {**view, "private_metadata": json.dumps({**meta, "types": {"text": "integer"}})}
    ephemerals = len(rig.standin.of("chat.postEphemeral"))
    status, _ = await rig.click(P.view_submission(bad, {"edit:text": "5"}, user=OWNER))
    assert status == 200
    await rig.settle()
    told = json.dumps([c.args.get("blocks") for c in rig.standin.of("chat.postEphemeral")[ephemerals:]])
    assert "5 is not of type" in told, told
    assert saved_notes(notes) == []
    # a field that does not read as its type stays in the modal, with the error next to it
    status, text = await rig.click(P.view_submission(bad, {"edit:text": "five"}, user=OWNER))
    assert status == 200 and json.loads(text)["response_action"] == "errors"
    # a submission that is not ours (its metadata forged) changes nothing; the error sits on the field
    forged = {**view, "private_metadata": "not ours"}
    status, text = await rig.click(P.view_submission(forged, {"edit:text": "x"}, user=OWNER))
    assert status == 200 and list(json.loads(text)["errors"]) == ["edit:text"]
    # the accepted edit
    status, _ = await rig.click(P.view_submission(view, {"edit:text": "call Alex at 4"}, user=OWNER))
    assert status == 200
    await rig.settle()
    assert saved_notes(notes) == ["call Alex at 4"]
    final = json.dumps(rig.standin.of("chat.update")[-1].args["blocks"])
    assert "Approved with edits" in final and "Input as approved (edited)" in final and "call Alex at 4" in final
