"""Issue 32: what a step that paused on several interrupts becomes (core/protocol/card_kinds.py):
gated calls and questions -> one batch draft; our download interrupt among others -> not offered
(`Several`); a gate interrupt whose reason does not match its call -> `Unreadable`, never offered."""

from __future__ import annotations

from strands.interrupt import Interrupt

from chat_approvals.core.agent.approval_tool import INTERRUPT_NAME
from chat_approvals.core.agent.tool_gate import GATE_INTERRUPT, draft_reason
from chat_approvals.core.models import Answer, ItemAnswer
from chat_approvals.core.protocol.card_kinds import Batch, Several, Unreadable, batch_items, draft_of, grant_plan


def gate(n: int, text: str) -> Interrupt:
    return Interrupt(id=f"i{n}", name=GATE_INTERRUPT, reason=draft_reason("save_note", {"text": text}, f"t{n}"))


def test_gated_calls_and_a_question_are_one_batch() -> None:
    drafted = draft_of([gate(1, "a"), gate(2, "b"), Interrupt(id="q", name="approval", reason={"x": 1})])
    assert isinstance(drafted, Batch)
    items = batch_items("c_" + "A" * 22, drafted)
    assert [(i.item_id[-2:], i.kind, i.interrupt_id) for i in items] == [
        (":1", "tool", "i1"),
        (":2", "tool", "i2"),
        (":3", "question", "q"),
    ]


def test_a_download_interrupt_among_others_is_not_offered() -> None:
    download = Interrupt(id="d", name=INTERRUPT_NAME, reason={"reason": "r", "sites": ["x.test"], "tool_use_id": "t9"})
    assert isinstance(draft_of([gate(1, "a"), download]), Several)


def test_a_gate_reason_that_does_not_match_its_call_is_never_offered() -> None:
    forged = gate(2, "b")
    forged.reason = {**forged.reason, "fingerprint": "0" * 64}
    assert isinstance(draft_of([gate(1, "a"), forged]), Unreadable)


def test_grants_per_item_an_approval_for_the_chat_writes_the_tool_once_an_edit_never() -> None:
    from chat_approvals.core.models import ApprovalCard

    drafted = draft_of([gate(1, "a"), gate(2, "b")])
    assert isinstance(drafted, Batch)
    card_id = "c_" + "A" * 22
    card = ApprovalCard(
        card_id=card_id, chat="c", owner="u", platform="http", reason="r", sites=[], urls=[], packages=[],
        created_at=0.0, expires_at=1.0, kind="batch", items=batch_items(card_id, drafted),
    )  # fmt: skip
    one, two = (i.item_id for i in card.items)

    def plan(*items: ItemAnswer) -> tuple[dict[tuple[str, str], str | None], set[tuple[str, str]]]:
        return grant_plan(card, Answer(approved=True, items=list(items)))

    assert plan(ItemAnswer(item=one, approved=True), ItemAnswer(item=two, approved=False)) == (
        {("tool", "save_note"): None},
        set(),
    )
    assert plan(ItemAnswer(item=one, approved=True, duration="once"), ItemAnswer(item=two, approved=False)) == (
        {},
        {("tool", "save_note")},
    )
    edited = ItemAnswer(item=one, approved=True, edited_input={"text": "z"})
    assert plan(edited, ItemAnswer(item=two, approved=False)) == ({}, {("tool", "save_note")})
