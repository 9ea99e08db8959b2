"""Readable text for what a `tool` or `question` card asks about, cut to fit each platform.

Pure functions over the card model. The input of a tool call and the reason of a question are
JSON from the model or a user's agent: shown as pretty-printed JSON (or as text when it is a
string), never interpreted; each renderer escapes it for its own markup.
"""

from __future__ import annotations

import json
from typing import Any

from chat_approvals.core.models import ApprovalCard

MAX_FIELDS = 20  # fields of a question's reason shown on a card


def pretty(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def cut(text: str, limit: int) -> str:
    """At most `limit` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    note = f"\n… ({len(text) - limit} more characters)"
    return text[: max(0, limit - len(note))] + note


def readable_input(card: ApprovalCard, limit: int) -> str:
    if card.tool is None:
        return ""
    text = pretty(card.tool.input)
    if card.tool.truncated:
        text += "\n… (the input was too large to keep whole on the card)"
    return cut(text, limit)


def question_fields(card: ApprovalCard, limit: int) -> list[tuple[str, str]]:
    """A question's reason as (title, value) fields: an object's keys, else one `Reason` field."""
    if card.question is None:
        return []
    reason = card.question.reason
    if isinstance(reason, dict):
        items = list(reason.items())
        fields = [(cut(str(k), 60), cut(v if isinstance(v, str) else _compact(v), limit)) for k, v in items]
        if len(fields) > MAX_FIELDS:
            fields = [*fields[: MAX_FIELDS - 1], ("…", f"{len(items) - MAX_FIELDS + 1} more fields")]
        return fields
    if reason is None:
        return []
    return [("Reason", cut(pretty(reason), limit))]


def subject_title(card: ApprovalCard) -> str:
    """One line: what the card is about (used in fallbacks and outcome lines)."""
    if card.tool is not None:
        return f"run {card.tool.name}"
    if card.question is not None:
        return f"answer {card.question.name}"
    names = [*card.sites, *card.packages]
    return ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
