"""Approve with edits on Slack (issue 32): the card's "Approve with edits…" button opens a modal
holding the input, one field per key of a flat input or one JSON field; its submission becomes
an approval with `edited_input`. Pure: the view as JSON, and the submission back as a click."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from chat_approvals.cards.edit_fields import (
    JSON_FIELD,
    MAX_FIELD,
    BadEdit,
    flat_fields,
    json_text,
    read_field,
    read_json,
)
from chat_approvals.cards.slack_answer import SlackClick, SlackPayloadError, _Team, _User, _Wire
from chat_approvals.core.identity import SlackUser, unverified
from chat_approvals.core.models import ApprovalCard, InvalidAnswer, is_card_id, read_answer

ACTION_EDIT = "approvals.edit"  # the card's button: opens the modal
VIEW_EDIT = "approvals.edit"  # the modal's callback id
ACTION_VALUE = "value"
BLOCK_FIELD = "edit:"  # + the key
BLOCK_JSON = "edit_json"
MAX_METADATA = 3000  # Slack's private_metadata limit


class FieldErrors(SlackPayloadError):
    """Fields the person must fix: shown in the modal next to each (response_action: errors)."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(errors.values()))
        self.errors = errors


def _plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text[:150]}


def edit_view(card: ApprovalCard, secret: str, where: dict[str, str | None]) -> dict[str, Any] | None:
    """The modal, or None when the card's input cannot be edited here (too big to carry)."""
    if card.tool is None:
        return None
    fields = flat_fields(card)
    blocks: list[dict[str, Any]] = [
        {
            "type": "section",
            "text": {
                "type": "mrkdwn",
                "text": f"Change the input of `{card.tool.name}`, then approve: exactly this input runs, once, "
                "and no grant is written. The agent is told what you changed.",
            },
        }
    ]
    if fields is not None:
        types: dict[str, str] | str = {k: t for k, t, _ in fields}
        for key, kind, text in fields:
            element: dict[str, Any] = {
                "type": "plain_text_input",
                "action_id": ACTION_VALUE,
                "multiline": kind == "string" and len(text) > 60,
                "max_length": MAX_FIELD,
            }
            if text:
                element["initial_value"] = text
            blocks.append(
                {"type": "input", "block_id": BLOCK_FIELD + key, "label": _plain(f"{key} ({kind})"), "element": element}
            )
    else:
        text = json_text(card)
        if len(text) > MAX_FIELD:
            return None
        types = JSON_FIELD
        blocks.append(
            {
                "type": "input",
                "block_id": BLOCK_JSON,
                "label": _plain("Input (JSON)"),
                "element": {
                    "type": "plain_text_input",
                    "action_id": ACTION_VALUE,
                    "multiline": True,
                    "initial_value": text,
                },
            }
        )
    metadata = json.dumps({"card": card.card_id, "secret": secret, "types": types, **where}, separators=(",", ":"))
    if len(metadata) > MAX_METADATA:
        return None
    return {
        "type": "modal",
        "callback_id": VIEW_EDIT,
        "title": _plain("Approve with edits"),
        "submit": _plain("Approve"),
        "close": _plain("Cancel"),
        "private_metadata": metadata,
        "blocks": blocks,
    }


class _Input(_Wire):
    type: str | None = None
    value: str | None = None


class _State(_Wire):
    values: dict[str, dict[str, _Input]] = Field(default_factory=dict)


class _View(_Wire):
    callback_id: str
    private_metadata: str = Field(max_length=MAX_METADATA)
    state: _State = Field(default_factory=_State)


class ViewSubmission(_Wire):
    type: Literal["view_submission"]
    user: _User
    team: _Team | None = None
    enterprise: _Team | None = None
    view: _View


class _Metadata(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    card: str = Field(min_length=1, max_length=200)
    secret: str = Field(min_length=1, max_length=200)
    types: dict[str, str] | str
    channel: str | None = None
    ts: str | None = None
    thread: str | None = None


def _text_of(view: _View, block_id: str) -> str:
    for value in (view.state.values.get(block_id) or {}).values():
        if value.type not in (None, "plain_text_input"):
            raise SlackPayloadError("an edited field is not a text input")
        return value.value or ""
    return ""


def first_input(payload: object) -> str | None:
    """The block id of a submitted modal's first input (where an error about the whole edit goes)."""
    view = payload.get("view") if isinstance(payload, dict) else None
    blocks = view.get("blocks") if isinstance(view, dict) else None
    for b in blocks if isinstance(blocks, list) else []:
        if isinstance(b, dict) and b.get("type") == "input" and isinstance(b.get("block_id"), str):
            return str(b["block_id"])
    return None


def parse_edit_submission(payload: object) -> SlackClick:
    """A submitted edit modal -> an approval with `edited_input` (whether it fits the tool's schema
    is the resume service's check), or FieldErrors / SlackPayloadError."""
    try:
        sub = ViewSubmission.model_validate(payload)
        meta = _Metadata.model_validate(json.loads(sub.view.private_metadata))
    except (ValidationError, ValueError) as e:
        raise SlackPayloadError("not an edit submission of ours") from e
    if sub.view.callback_id != VIEW_EDIT or not is_card_id(meta.card):
        raise SlackPayloadError("not an edit submission of ours")
    if meta.types == JSON_FIELD:
        try:
            edited = read_json(_text_of(sub.view, BLOCK_JSON))
        except BadEdit as e:
            raise FieldErrors({BLOCK_JSON: str(e)}) from e
    elif isinstance(meta.types, dict) and 0 < len(meta.types) <= 50:
        edited, errors = {}, {}
        for key, kind in meta.types.items():
            try:
                edited[key] = read_field(key, kind, _text_of(sub.view, BLOCK_FIELD + key))
            except BadEdit as e:
                errors[BLOCK_FIELD + key] = str(e)
        if errors:
            raise FieldErrors(errors)
    else:
        raise SlackPayloadError("not an edit submission of ours")
    try:
        answer = read_answer("resolved", {"approved": True, "edited_input": edited})
    except InvalidAnswer as e:
        raise SlackPayloadError(str(e)) from e
    team = sub.team.id if sub.team else None
    enterprise = (sub.enterprise.id if sub.enterprise else None) or (sub.team.enterprise_id if sub.team else None)
    who = SlackUser.of(enterprise, sub.user.team_id or team, sub.user.id) if team else None
    return SlackClick(
        card_id=meta.card,
        secret=meta.secret,
        answer=answer,
        user=sub.user.id,
        actor=who.key if who is not None else unverified("slack"),
        team=team or sub.user.team_id,
        channel=meta.channel,
        message_ts=meta.ts,
        thread_ts=meta.thread,
    )
