"""The sentences of a `batch` card (issue 32: a step that paused on several interrupts), for all
three renderers. `cards/wording.py` hands a batch card here; the `Style` is the renderer's own."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from chat_approvals.core.models import ONCE, Answer, ApprovalCard, CardItem

if TYPE_CHECKING:
    from chat_approvals.cards.wording import Choice, Style


def item_subject(item: CardItem) -> str:
    """Plain, short: "run save_note" or "answer confirm_refund"."""
    if item.tool is not None:
        return f"run {item.tool.name}"
    return f"answer {item.question.name if item.question is not None else 'a question'}"


def subject(card: ApprovalCard) -> str:
    return f"{len(card.items)} requests: " + ", ".join(item_subject(i) for i in card.items)


def title(card: ApprovalCard) -> str:
    return f"Approval needed: {len(card.items)} requests in one step"


def asks(card: ApprovalCard, style: Style) -> str:
    return (
        f"The agent paused on {len(card.items)} requests at once; each is listed below. Nothing has run yet. "
        "Approve or deny them all, or decide each one."
    )


def item_label(item: CardItem, style: Style) -> str:
    """An item's heading: its number and what it asks ("Request 2: run save_note")."""
    n = item.item_id.rsplit(":", 1)[-1]  # not "1. …": Teams would read it as a numbered list
    if item.tool is not None:
        return f"Request {n}: run {style.thing(item.tool.name)}"
    name = item.question.name if item.question is not None else "a question"
    return f"Request {n}: answer {style.thing(name)}"


def item_call_id(item: CardItem) -> str | None:
    return f"Call id {item.tool.fingerprint[:16]}" if item.tool is not None else None


def _tools(card: ApprovalCard) -> list[str]:
    return list(dict.fromkeys(i.tool.name for i in card.items if i.tool is not None))


def choices(card: ApprovalCard, style: Style, how_long: str) -> list[Choice]:
    from chat_approvals.cards.wording import Choice  # wording imports this module

    tools = _tools(card)
    out = [
        Choice(
            "approve_once",
            "Approve all once",
            "Run every call once, with exactly its input; answer yes to every question.",
        )
    ]
    if tools:
        names = ", ".join(style.thing(t) for t in tools)
        out.append(
            Choice(
                "approve",
                "Approve all for this chat",
                f"Run every call now, and allow {names} with any input in this chat {how_long}, without asking again.",
            )
        )
    out.append(
        Choice("deny", "Deny all", "Nothing runs; the agent is told no for each, with your reason if you give one.")
    )
    return out


def decision(card: ApprovalCard, answer: Answer) -> str:
    got = [answer.for_item(i.item_id).approved for i in card.items]
    if all(got):
        return "Approved"
    return "Denied" if not any(got) else "Partly approved"


def item_outcome(item: CardItem, answer: Answer, style: Style) -> str:
    """One item's line on the answered card: what it was asked and what was decided."""
    mine = answer.for_item(item.item_id, takes_duration=item.kind == "tool")
    head = item_label(item, style)
    if item.tool is None:
        return f"{head}: " + ("told yes." if mine.approved else "told no.")
    if not mine.approved:
        text = f"{head}: denied; it did not run."
        return text + (f" Reason: “{style.text(mine.reason)}”" if mine.reason else "")
    if mine.edited_input is not None:  # R22: the call exactly as approved
        edited = json.dumps(mine.edited_input, ensure_ascii=False, sort_keys=True)
        return f"{head}: approved with edits; it runs once with {style.text(edited)}, not the proposed input."
    if mine.duration == ONCE:
        return f"{head}: approved once; it runs with exactly its input."
    return f"{head}: approved for this chat; it may run with any input here without asking again."


def answered(card: ApprovalCard, answer: Answer, by: str, at: float, style: Style) -> str:
    head = f"{decision(card, answer)} by {by} at {style.time(at)}."
    return head + " " + " ".join(item_outcome(i, answer, style) for i in card.items)
