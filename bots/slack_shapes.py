"""The shapes of signed Slack bodies, checked before Bolt or the click path reads them (issue 27.3).

Bolt reads ids out of a body with `dict.get` chains and fails with a 500 on a shape it did not
expect (`"actions": []`, `"actions": {"0": ...}`, `"event": 5`); a button value of 5,000 nested
`[` is a RecursionError later. Only the parts this project or Bolt reads are constrained; Slack
adds fields over time, so the rest is allowed. Every string must be valid text (R20).
Sizes are Slack's own limits (a button value is at most 2,000 characters).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from chat_approvals.bots.turn_limits import MAX_TURN_TEXT
from chat_approvals.cards.slack_answer import MAX_ID, MAX_VALUE  # Block Kit's: a button's value, an id
from chat_approvals.core.text import first_invalid


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class _Ids(_Open):
    id: str | None = Field(default=None, max_length=MAX_ID)


class SlackAction(_Open):
    action_id: str = Field(max_length=MAX_ID)
    block_id: str | None = Field(default=None, max_length=MAX_ID)
    type: str | None = None
    value: str | None = Field(default=None, max_length=MAX_VALUE)


class SlackInteraction(_Open):
    """An interactivity payload (`payload=` JSON): block_actions, view_submission, shortcuts."""

    type: str
    actions: list[SlackAction] | None = Field(default=None, min_length=1, max_length=25)
    user: _Ids | None = None
    team: _Ids | None = None
    enterprise: _Ids | None = None
    channel: _Ids | None = None
    container: dict[str, Any] | None = None
    state: dict[str, Any] | None = None
    message: dict[str, Any] | None = None
    response_url: str | None = None


class SlackEvent(_Open):
    type: str
    subtype: str | None = None
    text: str | None = Field(default=None, max_length=MAX_TURN_TEXT)  # Slack's own message limit
    user: str | None = None
    channel: str | dict[str, Any] | None = None
    channel_type: str | None = None
    ts: str | None = None
    thread_ts: str | None = None
    team: str | None = None
    bot_id: str | None = None


class SlackEnvelope(_Open):
    """An Events API body (event_callback, url_verification, app_rate_limited)."""

    type: str
    event: SlackEvent | None = None
    event_id: str | None = None
    team_id: str | None = None
    enterprise_id: str | None = None
    authorizations: list[dict[str, Any]] | None = None
    challenge: str | None = None


def _problem(model: type[BaseModel], value: object, what: str, text_checked: bool = False) -> str | None:
    """`text_checked`: the JSON text it was decoded from was shown to hold only valid text."""
    if not isinstance(value, dict):
        return f"{what} is not a JSON object"
    where = None if text_checked else first_invalid(value)
    if where is not None:
        return f"{what}: {where} is not valid Unicode text"
    try:
        model.model_validate(value)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(p) for p in err.get("loc", ())) or what
        return f"{what}: {loc}: {err.get('msg', 'invalid')}"
    return None


def slack_body_problem(body: str, content_type: str) -> str | None:
    """Why a signed, UTF-8 Slack body is not a shape this server reads (a 400), or None."""
    try:
        if content_type.split(";")[0].strip() == "application/json" or body.startswith("{"):
            return _problem(SlackEnvelope, json.loads(body), "the event")
        form = parse_qsl(body, keep_blank_values=True)
        if "payload" in body:
            payloads = [v for k, v in form if k == "payload"]
            if len(payloads) != 1:
                return "the form must carry exactly one payload"
            return _problem(SlackInteraction, json.loads(payloads[0]), "the payload")
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
        return "the body is not a JSON object, a form, or a form with a JSON object as payload"
    return None  # a plain form (a slash command): strings only, parse_qsl made them valid text


def socket_payload_problem(kind: str, payload: object, *, text_checked: bool = False) -> str | None:
    """Why a Socket Mode envelope's payload is not a shape this server reads, or None: the same
    shapes as over HTTP (an events_api payload is an Events API body, an interactive one is the
    `payload=` JSON, a slash command is the form's fields). Other kinds reach no listener here.
    `text_checked`: R20 was checked on the JSON text the payload was decoded from."""
    if kind == "events_api":
        return _problem(SlackEnvelope, payload, "the event", text_checked)
    if kind == "interactive":
        return _problem(SlackInteraction, payload, "the payload", text_checked)
    if kind == "slash_commands":
        if not isinstance(payload, dict) or not all(isinstance(v, str) for v in payload.values()):
            return "the command is not an object of strings"
        where = first_invalid(payload)
        return None if where is None else f"the command: {where} is not valid Unicode text"
    return None
