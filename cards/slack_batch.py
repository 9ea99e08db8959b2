"""Block Kit for a `batch` card (issue 32: a step that paused on several interrupts): each item
with its call or question and, on the open card, a select to decide it; the buttons Approve all
once, Approve all for this chat (when a tool is among the items), Send these decisions, Deny all.
`cards/slack_blocks.py` hands batch cards here; the answer is read in `cards/slack_answer.py`."""

from __future__ import annotations

from slack_sdk.models.blocks import (
    Block,
    ButtonElement,
    MarkdownTextObject,
    Option,
    PlainTextObject,
    SectionBlock,
    StaticSelectElement,
)

from chat_approvals.cards import batch_wording as words
from chat_approvals.cards.subject_text import question_fields, readable_input
from chat_approvals.core.models import ApprovalCard, CardItem

ACTION_ITEM = "approvals.item"  # one select per item: read from `state` when Send is clicked
ACTION_ITEMS = "approvals.items"  # Send these decisions
BLOCK_ITEM = "approvals.item:"  # + the item's id (`c_…:N`)
MAX_ITEM_INPUT = 600  # an item's input on the card (several share one message)
MAX_SHOWN = 30  # items listed on one message
MAX_DECIDED = 20  # items that get their own select (Slack: 50 blocks a message); the rest: all at once

ITEM_CHOICES = {"approve_once": "Approve once", "approve": "Approve for this chat", "deny": "Deny"}
QUESTION_CHOICES = {"approve": "Yes", "deny": "No"}


def item_block_id(item_id: str) -> str:
    return BLOCK_ITEM + item_id


def _item_text(card: ApprovalCard, item: CardItem) -> str:
    from chat_approvals.cards.slack_blocks import STYLE, _pre, code, escape

    one = card.item_card(item)
    head = f"*{words.item_label(item, STYLE)}*"
    if item.tool is not None:
        return f"{head} · call id {code(item.tool.fingerprint[:16])}\n{_pre(readable_input(one, MAX_ITEM_INPUT))}"
    fields = question_fields(one, 300)
    return head + "\n" + ("\n".join(f"*{escape(t)}:* {escape(v)}" for t, v in fields) or "_no details given_")


def _select(card: ApprovalCard, item: CardItem) -> StaticSelectElement:
    choices = ITEM_CHOICES if item.kind == "tool" else QUESTION_CHOICES
    options = [Option(value=v, text=PlainTextObject(text=label)) for v, label in choices.items()]
    return StaticSelectElement(action_id=ACTION_ITEM, placeholder=PlainTextObject(text="Decide"), options=options)


def items_blocks(card: ApprovalCard, open_card: bool) -> list[Block]:
    """Every item; on the open card, the first MAX_DECIDED each with its select."""
    from chat_approvals.cards.slack_blocks import MAX_SECTION, clip

    blocks: list[Block] = []
    for n, item in enumerate(card.items):
        text = MarkdownTextObject(text=clip(_item_text(card, item), MAX_SECTION))
        if open_card and n < MAX_DECIDED:
            blocks.append(SectionBlock(block_id=item_block_id(item.item_id), text=text, accessory=_select(card, item)))
        else:
            blocks.append(SectionBlock(text=text))
    if len(blocks) > MAX_SHOWN:  # the rest of the message needs its room (Slack: 50 blocks)
        more = len(blocks) - MAX_SHOWN + 1
        blocks = [*blocks[: MAX_SHOWN - 1], SectionBlock(text=MarkdownTextObject(text=f"…and {more} more requests."))]
    return blocks


def answer_buttons(card: ApprovalCard, value: str) -> list[ButtonElement]:
    from chat_approvals.cards.slack_blocks import ACTION_APPROVE, ACTION_APPROVE_ONCE

    buttons = [
        ButtonElement(
            action_id=ACTION_APPROVE_ONCE, text=PlainTextObject(text="Approve all once"), style="primary", value=value
        )
    ]
    if any(i.tool is not None for i in card.items):
        buttons.append(
            ButtonElement(action_id=ACTION_APPROVE, text=PlainTextObject(text="Approve all for this chat"), value=value)
        )
    if len(card.items) <= MAX_DECIDED:
        buttons.append(
            ButtonElement(action_id=ACTION_ITEMS, text=PlainTextObject(text="Send the decisions above"), value=value)
        )
    return buttons


DECIDE_EACH = "*Decide each* with its menu, then *Send the decisions above*; a reason below goes with each Deny."
