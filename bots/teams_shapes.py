"""The shape of a Teams activity, checked before botbuilder deserialises it (issue 27.3).

msrest deserialises loosely and botbuilder reads `activity.from_property.id`, `conversation.id`,
`channel_data` and `value` without checks, so an odd shape is a 500 deep inside a turn. Only what
this project or botbuilder reads is constrained; Bot Framework adds fields over time, so the rest
is allowed. Every string must be valid text (R20).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from chat_approvals.bots.turn_limits import MAX_TURN_TEXT
from chat_approvals.core.text import first_invalid

MAX_ID = 1024


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, populate_by_name=True)


class ChannelAccount(_Open):
    id: str | None = Field(default=None, max_length=MAX_ID)
    name: str | None = None
    aadObjectId: str | None = Field(default=None, max_length=MAX_ID)
    role: str | None = None


class ConversationAccount(_Open):
    id: str | None = Field(default=None, max_length=MAX_ID)
    conversationType: str | None = None
    tenantId: str | None = Field(default=None, max_length=MAX_ID)
    isGroup: bool | None = None
    name: str | None = None


class Activity(_Open):
    type: str = Field(max_length=64)
    id: str | None = Field(default=None, max_length=MAX_ID)
    name: str | None = Field(default=None, max_length=256)
    text: str | None = Field(default=None, max_length=MAX_TURN_TEXT)
    textFormat: str | None = None
    serviceUrl: str | None = Field(default=None, max_length=2048)
    channelId: str | None = Field(default=None, max_length=MAX_ID)
    replyToId: str | None = Field(default=None, max_length=MAX_ID)
    from_: ChannelAccount | None = Field(default=None, alias="from")
    recipient: ChannelAccount | None = None
    conversation: ConversationAccount | None = None
    channelData: dict[str, Any] | None = None
    value: dict[str, Any] | None = None
    entities: list[dict[str, Any]] | None = None
    attachments: list[dict[str, Any]] | None = None
    membersAdded: list[ChannelAccount] | None = None
    membersRemoved: list[ChannelAccount] | None = None


def activity_problem(body: object, *, text_checked: bool = False) -> str | None:
    """Why a decoded JSON body is not an activity this server can read (a 400), or None.
    `text_checked`: R20 was checked on the JSON text it was decoded from (no surrogate escape)."""
    if not isinstance(body, dict):
        return "the body is not an activity (a JSON object)"
    where = None if text_checked else first_invalid(body)
    if where is not None:
        return f"{where} is not valid Unicode text"
    try:
        Activity.model_validate(body)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(p) for p in err.get("loc", ())) or "body"
        return f"not an activity: {loc}: {err.get('msg', 'invalid')}"
    return None
