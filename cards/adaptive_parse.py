"""Teams `adaptiveCard/action` invokes -> typed clicks (R15): the parsing half of the Adaptive
Cards this app sends (cards/adaptive.py renders them). Pure; anything it does not recognise is
`InvalidInvoke` (a 400 that changes nothing)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple

from chat_approvals.cards.adaptive import (
    DURATION_INPUT,
    PACKAGES_INPUT,
    REASON_INPUT,
    VERB_APPROVE,
    VERB_APPROVE_ONCE,
    VERB_DENY,
    VERB_REVOKE,
)
from chat_approvals.cards.adaptive_batch import (
    EDIT_FIELD,
    EDIT_JSON,
    EDIT_TYPES,
    ITEM_CHOICES,
    ITEM_INPUT,
    VERB_APPROVE_EDITED,
    VERB_ITEMS,
)
from chat_approvals.cards.edit_fields import JSON_FIELD, BadEdit, read_fields, read_json
from chat_approvals.cards.wording import REASON_WITH_APPROVAL
from chat_approvals.core.models import ONCE, Answer, InvalidAnswer, ItemAnswer, is_card_id, read_answer

# Bound what a client may send: ids and secrets are short urlsafe tokens (core/ids.py).
_MAX_TOKEN = 200
_MAX_SUBJECT = 300


class InvalidInvoke(ValueError):
    """The invoke is not one this app sent: answer 400 and change nothing."""


class ApprovalClick(NamedTuple):
    card_id: str
    secret: str
    answer: Answer


class RevokeClick(NamedTuple):
    subject: str


Click = ApprovalClick | RevokeClick


def _token(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value or len(value) > _MAX_TOKEN:
        raise InvalidInvoke(f"action.data.{key} must be a non-empty string")
    return value


def _packages(raw: object) -> list[str] | None:
    """Teams sends a multi-select ChoiceSet as one comma-separated string; absent = all."""
    if raw is None:
        return None
    if isinstance(raw, str):
        return [p.strip() for p in raw.split(",") if p.strip()]
    if isinstance(raw, list) and all(isinstance(p, str) for p in raw):
        return [p for p in raw if p]
    raise InvalidInvoke("action.data.packages must be a comma-separated string")


def parse_invoke(value: object) -> Click:
    """The `value` of an `adaptiveCard/action` invoke -> a typed click, or `InvalidInvoke`.

    Approve and deny become an `Answer` through `read_answer` (R15): only the
    approve verb can approve, and the packages chosen are passed on for the core to check.
    """
    if not isinstance(value, Mapping):
        raise InvalidInvoke("invoke value must be an object")
    action = value.get("action")
    if not isinstance(action, Mapping):
        raise InvalidInvoke("invoke value has no action")
    if action.get("type") != "Action.Execute":
        raise InvalidInvoke("action.type must be Action.Execute")
    verb = action.get("verb")
    data = action.get("data")
    if not isinstance(data, Mapping):
        raise InvalidInvoke("action.data must be an object")
    if verb == VERB_REVOKE:
        subject = data.get("subject")
        if not isinstance(subject, str) or not subject.strip() or len(subject) > _MAX_SUBJECT:
            raise InvalidInvoke("action.data.subject must be a non-empty string")
        return RevokeClick(subject.strip())
    if verb not in (VERB_APPROVE, VERB_APPROVE_ONCE, VERB_DENY, VERB_ITEMS, VERB_APPROVE_EDITED):
        raise InvalidInvoke(f"unknown verb {verb!r}")
    card_id, secret = _token(data, "card_id"), _token(data, "secret")
    if not is_card_id(card_id):  # checked before it is used anywhere
        raise InvalidInvoke("action.data.card_id is not a card id")
    if verb == VERB_ITEMS:  # a batch card decided item by item (issue 32)
        return ApprovalClick(card_id, secret, _items_answer(card_id, data))
    if verb == VERB_APPROVE_EDITED:  # approve with edits (issue 32)
        return ApprovalClick(card_id, secret, _edited_answer(data))
    typed = data.get(REASON_INPUT)
    if verb != VERB_DENY and isinstance(typed, str) and typed.strip():
        raise InvalidInvoke(REASON_WITH_APPROVAL)  # refused with a message, never dropped
    payload: dict[str, Any] = {"approved": verb != VERB_DENY}
    if verb == VERB_APPROVE:
        packages = _packages(data.get(PACKAGES_INPUT))
        if packages is not None:
            payload["packages"] = packages
        duration = data.get(DURATION_INPUT)
        if duration is not None and duration != "":  # checked by read_answer, then against the card
            payload["duration"] = duration
    elif verb == VERB_APPROVE_ONCE:
        payload["duration"] = ONCE
    else:
        reason = data.get(REASON_INPUT)
        if reason is not None and not isinstance(reason, str):
            raise InvalidInvoke("action.data.reason must be a string")
        if reason and reason.strip():
            payload["reason"] = reason
    try:
        return ApprovalClick(card_id, secret, read_answer("resolved", payload))
    except InvalidAnswer as e:
        raise InvalidInvoke(str(e)) from e


CHOOSE_EACH = "Choose a decision for every item first (or use Approve all / Deny all); nothing was sent."
MAX_ITEMS = 50


def _items_answer(card_id: str, data: Mapping[str, Any]) -> Answer:
    """`item_N` ChoiceSets -> one answer per item; the duration for an item approved for the
    chat; the typed reason for each denied one. An empty choice refuses the click."""
    keys = [k for k in data if isinstance(k, str) and k.startswith(ITEM_INPUT)]
    if not keys or len(keys) > MAX_ITEMS:
        raise InvalidInvoke("action.data holds no item decisions")
    duration = data.get(DURATION_INPUT)
    reason = data.get(REASON_INPUT)
    if reason is not None and not isinstance(reason, str):
        raise InvalidInvoke("action.data.reason must be a string")
    items: list[ItemAnswer] = []
    for key in keys:
        number = key.removeprefix(ITEM_INPUT)
        if not number.isdigit() or not number.isascii():
            raise InvalidInvoke(f"action.data.{key} is not an item of this card")
        choice = data[key]
        if choice in (None, ""):
            raise InvalidInvoke(CHOOSE_EACH)
        if choice not in ITEM_CHOICES:
            raise InvalidInvoke(f"action.data.{key} is not a decision this card offers")
        payload: dict[str, Any] = {"approved": choice != "deny"}
        if choice == "approve_once":
            payload["duration"] = ONCE
        elif choice == "approve" and duration not in (None, ""):
            payload["duration"] = duration
        elif choice == "deny" and reason and reason.strip():
            payload["reason"] = reason
        try:
            a = read_answer("resolved", payload)
        except InvalidAnswer as e:
            raise InvalidInvoke(str(e)) from e
        items.append(ItemAnswer(item=f"{card_id}:{number}", approved=a.approved, duration=a.duration, reason=a.reason))
    if reason and reason.strip() and all(i.approved for i in items):
        raise InvalidInvoke(REASON_WITH_APPROVAL)
    return Answer(approved=any(i.approved for i in items), items=items)


def _edited_answer(data: Mapping[str, Any]) -> Answer:
    """Approve with edits: the fields (or the JSON) back into the tool's input; the schema check
    is the resume service's (a 400 with its message when the input does not fit)."""
    typed = data.get(REASON_INPUT)
    if isinstance(typed, str) and typed.strip():
        raise InvalidInvoke(REASON_WITH_APPROVAL)
    types = data.get(EDIT_TYPES)
    try:
        if types == JSON_FIELD:
            text = data.get(EDIT_JSON)
            if not isinstance(text, str):
                raise InvalidInvoke("action.data.edit_json must be a string")
            edited = read_json(text)
        else:
            kinds = json.loads(types) if isinstance(types, str) else None
            if not isinstance(kinds, dict) or not kinds or len(kinds) > 50:
                raise InvalidInvoke("action.data.edit_types is not one this app sent")
            texts = {k: data.get(EDIT_FIELD + k) for k in kinds}
            if not all(isinstance(v, str) for v in texts.values()):
                raise InvalidInvoke("an edited field is missing")
            edited = read_fields({k: str(v) for k, v in texts.items()}, {str(k): str(t) for k, t in kinds.items()})
    except BadEdit as e:
        raise InvalidInvoke(f"Invalid edit: {e}") from e
    except (ValueError, RecursionError) as e:
        raise InvalidInvoke("action.data.edit_types is not one this app sent") from e
    try:
        return read_answer("resolved", {"approved": True, "edited_input": edited})
    except InvalidAnswer as e:
        raise InvalidInvoke(str(e)) from e
