"""Issue 32's pure parts: a batch card's Block Kit and Adaptive Card stay within each platform's
limits with many items; the edit fields read back as their types; a policy's `edits` only on tool
rules, and the strictest over several rules."""

from __future__ import annotations

import pytest
from slack_sdk.models.blocks import Block

from chat_approvals.cards import adaptive
from chat_approvals.cards import slack_blocks as sb
from chat_approvals.cards.edit_fields import BadEdit, read_field, read_json
from chat_approvals.core.agent.tool_gate import tool_call
from chat_approvals.core.models import ApprovalCard, CardItem
from chat_approvals.core.protocol.policy import PolicyError, parse_policy, strictest_edits
from tests.teams.schema import assert_valid_card


def batch(n: int) -> ApprovalCard:
    card_id = "c_" + "A" * 22
    items = [
        CardItem(
            item_id=f"{card_id}:{i}",
            kind="tool",
            interrupt_id=f"v1:x:{i}",
            tool_use_id=f"t{i}",
            tool=tool_call("save_note", {"text": f"note {i}"}),
        )
        for i in range(1, n + 1)
    ]
    return ApprovalCard(
        card_id=card_id, chat="c", owner="u", platform="slack", reason=f"answer {n} requests", sites=[],
        urls=[], packages=[], created_at=0.0, expires_at=600.0, kind="batch", items=items,
    )  # fmt: skip


@pytest.mark.parametrize("n", [2, 20, 21, 45])
def test_a_batch_card_fits_slack_and_teams_with_many_items(n: int) -> None:
    msg = sb.card_message(batch(n), "secret")
    dicts = msg.block_dicts()
    assert len(dicts) <= sb.MAX_BLOCKS and [b.to_dict() for b in Block.parse_all(dicts)] == dicts
    text = str(dicts)
    assert ("more requests" in text) == (n > 30)
    assert ("approvals.items" in text) == (n <= 20)  # per-item decisions only where every item has its menu
    assert_valid_card(adaptive.approval_card(batch(n), "secret"))


def test_edit_fields_read_back_as_their_types() -> None:
    assert read_field("n", "integer", " 10 ") == 10 and read_field("x", "number", "1.5") == 1.5
    assert read_field("b", "boolean", "True") is True and read_field("s", "string", " a ") == " a "
    for kind, text in (("integer", "ten"), ("number", "x"), ("boolean", "yes"), ("object", "{}")):
        with pytest.raises(BadEdit):
            read_field("k", kind, text)
    assert read_json('{"a": [1]}') == {"a": [1]}
    for text in ("[1]", "not json", "1"):
        with pytest.raises(BadEdit):
            read_json(text)


def test_edits_only_on_tool_rules_and_the_strictest_wins() -> None:
    with pytest.raises(PolicyError, match="edits apply only to tool calls"):
        parse_policy('[[rule]]\nmatch = "*.example.com"\nedits = true\n')
    parse_policy('[[rule]]\nmatch = "tool:save_*"\nedits = "approvers"\n')
    assert strictest_edits([True, True]) is True
    assert strictest_edits([True, "approvers"]) == "approvers"
    assert strictest_edits([True, False]) is False and strictest_edits([]) is False
