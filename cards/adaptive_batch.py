"""Adaptive Card parts of a `batch` card (issue 32: a step that paused on several interrupts):
each item with its call or question and, on the open card, a ChoiceSet to decide it; the verb
that sends those decisions. `cards/adaptive.py` hands batch cards here; `cards/adaptive_parse.py`
reads the decisions back."""

from __future__ import annotations

from typing import Any

from chat_approvals.cards import batch_wording as words
from chat_approvals.cards.subject_text import question_fields, readable_input
from chat_approvals.core.models import ApprovalCard, CardItem

VERB_ITEMS = "decide_items"
ITEM_INPUT = "item_"  # + the item's number: its ChoiceSet's id (and its key in the action's data)
MAX_ITEM_INPUT = 1000
ITEM_CHOICES = {"approve_once": "Approve once", "approve": "Approve for this chat", "deny": "Deny"}
QUESTION_CHOICES = {"approve": "Yes", "deny": "No"}
DECIDE_EACH = "Decide each"
SEND = "Send these decisions"


def item_number(item: CardItem) -> str:
    return item.item_id.rsplit(":", 1)[-1]


def items_body(card: ApprovalCard, open_card: bool, escape: Any, style: Any) -> list[dict[str, Any]]:
    """Every item: its heading, its input (monospace) or its question's facts; on the open card a
    ChoiceSet to decide it (left empty: the person must choose)."""
    body: list[dict[str, Any]] = []
    for item in card.items:
        one = card.item_card(item)
        body.append(
            {
                "type": "TextBlock",
                "text": words.item_label(item, style),
                "wrap": True,
                "weight": "Bolder",
                "separator": True,
            }
        )
        if item.tool is not None:
            text = escape(readable_input(one, MAX_ITEM_INPUT))
            body.append({"type": "TextBlock", "text": text, "wrap": True, "fontType": "Monospace", "spacing": "None"})
            body.append(
                {
                    "type": "TextBlock",
                    "text": f"Call id {item.tool.fingerprint[:16]}",
                    "wrap": True,
                    "isSubtle": True,
                    "size": "Small",
                    "spacing": "None",
                }
            )
        else:
            facts = [{"title": escape(t), "value": escape(v)} for t, v in question_fields(one, 500)]
            if facts:
                body.append({"type": "FactSet", "facts": facts})
        if open_card:
            choices = ITEM_CHOICES if item.kind == "tool" else QUESTION_CHOICES
            body.append(
                {
                    "type": "Input.ChoiceSet",
                    "id": ITEM_INPUT + item_number(item),
                    "label": "Your decision",
                    "style": "compact",
                    "placeholder": "Decide",
                    "choices": [{"title": t, "value": v} for v, t in choices.items()],
                }
            )
    return body


def decide_each(data: dict[str, str], reason: dict[str, Any]) -> dict[str, Any]:
    """Decide each: a small card with the deny reason (for the items you deny) and Send; the item
    ChoiceSets on the card above go with it (associatedInputs auto)."""
    send = {"type": "Action.Execute", "title": SEND, "verb": VERB_ITEMS, "associatedInputs": "auto", "data": data}
    return {
        "type": "Action.ShowCard",
        "title": DECIDE_EACH,
        "card": {"type": "AdaptiveCard", "body": [reason], "actions": [send]},
    }


VERB_APPROVE_EDITED = "approve_edited"
EDIT_TYPES = "edit_types"  # in the action's data: how each field reads back (or "json")
EDIT_FIELD = "edit:"  # + the key: one Input.Text per key of a flat input
EDIT_JSON = "edit_json"  # the whole input as JSON


def edit_action(card: ApprovalCard, data: dict[str, str], escape: Any) -> dict[str, Any]:
    """Approve with edits (issue 32): a small card with the input, one Input.Text per key of a
    flat input or one JSON field, and the Approve that sends it (this call once, no grant)."""
    import json

    from chat_approvals.cards.edit_fields import JSON_FIELD, MAX_FIELD, flat_fields, json_text

    fields = flat_fields(card)
    body: list[dict[str, Any]] = [
        {"type": "TextBlock", "text": "Change the input, then approve: exactly this runs, once.", "wrap": True}
    ]
    if fields is not None:
        types = {k: t for k, t, _ in fields}
        for key, kind, text in fields:
            body.append(
                {
                    "type": "Input.Text",
                    "id": EDIT_FIELD + key,
                    "label": f"{escape(key)} ({kind})",
                    "value": text,
                    "isMultiline": kind == "string" and len(text) > 60,
                    "maxLength": MAX_FIELD,
                }
            )
        type_data = json.dumps(types, separators=(",", ":"))
    else:
        body.append(
            {
                "type": "Input.Text",
                "id": EDIT_JSON,
                "label": "Input (JSON)",
                "value": json_text(card),
                "isMultiline": True,
            }
        )
        type_data = JSON_FIELD
    send = {
        "type": "Action.Execute",
        "title": "Approve with edits",
        "verb": VERB_APPROVE_EDITED,
        "associatedInputs": "auto",
        "style": "positive",
        "data": {**data, EDIT_TYPES: type_data},
    }
    return {
        "type": "Action.ShowCard",
        "title": "Approve with edits",
        "card": {"type": "AdaptiveCard", "body": body, "actions": [send]},
    }
