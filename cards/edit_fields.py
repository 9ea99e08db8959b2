"""Approve with edits (issue 32): a tool call's input as form fields and back, for the Slack
modal and the Teams card. A flat input (an object of strings, numbers and booleans) gets one
field per key; any other input one JSON field. Pure; what comes back is checked against the
tool's own schema by the resume service, so this only turns text into JSON."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from chat_approvals.core.models import ApprovalCard

FieldType = Literal["string", "integer", "number", "boolean"]
MAX_FIELDS = 20  # keys edited one by one; more: one JSON field
MAX_FIELD = 3000  # characters of one field (Slack's plain_text_input limit)
JSON_FIELD = "json"


class BadEdit(ValueError):
    """The edited text is not an input (a number field that is not a number, JSON that is not an object)."""


def editable(card: ApprovalCard) -> bool:
    """The card offers Approve with edits: a tool card whose policy allows edits and kept the schema."""
    return (
        card.kind == "tool"
        and card.tool is not None
        and card.policy is not None
        and bool(card.policy.edits)
        and card.tool.input_schema is not None
        and not card.tool.truncated
    )


def _type_of(value: object) -> FieldType | None:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return None


def flat_fields(card: ApprovalCard) -> list[tuple[str, FieldType, str]] | None:
    """(key, type, text) for each key of a flat input, or None (edit it as JSON)."""
    value = card.tool.input if card.tool is not None else None
    if not isinstance(value, dict) or not value or len(value) > MAX_FIELDS:
        return None
    out: list[tuple[str, FieldType, str]] = []
    for key, v in value.items():
        kind = _type_of(v)
        if kind is None or not isinstance(key, str) or not key or len(key) > 60:
            return None
        text = ("true" if v else "false") if kind == "boolean" else str(v)
        if len(text) > MAX_FIELD:
            return None
        out.append((key, kind, text))
    return out


def json_text(card: ApprovalCard) -> str:
    value = card.tool.input if card.tool is not None else {}
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def read_field(key: str, kind: str, text: str) -> object:
    """One field's text as the JSON value of its key's type (the type the proposed value had)."""
    if kind == "string":
        return text
    t = text.strip()
    try:
        if kind == "integer":
            return int(t)
        if kind == "number":
            return float(t)
    except ValueError:
        raise BadEdit(f"{key}: {t!r} is not a {'whole number' if kind == 'integer' else 'number'}") from None
    if kind == "boolean":
        if t.lower() in ("true", "false"):
            return t.lower() == "true"
        raise BadEdit(f"{key}: write true or false")
    raise BadEdit(f"{key}: not a field of this input")


def read_fields(texts: Mapping[str, str], types: Mapping[str, str]) -> dict[str, Any]:
    """Every field back into an object; a field left empty is an empty string (or refused)."""
    return {key: read_field(key, kind, texts.get(key, "")) for key, kind in types.items()}


def read_json(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        raise BadEdit("the input is not JSON") from None
    if not isinstance(value, dict):
        raise BadEdit("the input must be a JSON object")
    return value
