"""What the Teams front end reads from an activity (the chat, the R17 identity, a text command)
and the activity that carries a card. Pure: no I/O."""

from __future__ import annotations

import copy
from typing import Any, Literal, NamedTuple

from botbuilder.schema import Activity, ActivityTypes, Attachment, AttachmentLayoutTypes, InputHints

from chat_approvals.bots import teams_compat
from chat_approvals.cards import adaptive
from chat_approvals.cards.wording import WHAT_I_DO
from chat_approvals.core.identity import TeamsUser
from chat_approvals.core.models import clean_reason

PLATFORM = "teams"
MAX_SHOWN_NAME = 100  # a display name shown on a card

HELP = (
    WHAT_I_DO + "\n\nCommands: 'approvals' lists what you approved in this chat (with a Revoke button "
    "each); 'revoke HOST_OR_PACKAGE' (or 'revoke tool:NAME') takes one back; 'revoke all' takes back "
    "everything; 'help' shows this. Anything else goes to the agent."
)
NO_IDENTITY = (
    "I cannot tell who you are from this message (Teams sent no tenant or Entra object id), so I run nothing for it."
)
WAITING = "Waiting for your approval: this chat already has an open request. Answer that card first."


def chat_key(activity: Activity) -> str:
    """Tenant + conversation. A channel reply chain is part of its conversation id (`;messageid=`)."""
    tenant = teams_compat.tenant_of(activity) or "unknown"
    conv = activity.conversation.id if activity.conversation is not None else ""
    return f"teams:{tenant}:{conv}"


def user_of(activity: Activity) -> str | None:
    """R17: tenant + Entra object id (core.identity). None without either: the channel's `from.id`
    is never a fallback, so such an activity can neither start a turn nor answer a card."""
    who = activity.from_property
    user = TeamsUser.of(teams_compat.tenant_of(activity), who.aad_object_id if who is not None else None)
    return user.key if user is not None else None


def name_of(activity: Activity) -> str:
    who = activity.from_property
    return str((who.name if who is not None else None) or "someone")


def shown_name(activity: Activity) -> str | None:
    """The sender's display name for "Requested by" on the card: cleaned of control characters
    and bounded (the client sends it; it is shown, never trusted for who may answer)."""
    who = activity.from_property
    name = clean_reason(str(who.name or ""))[:MAX_SHOWN_NAME] if who is not None else ""
    return name or None


class Command(NamedTuple):
    name: Literal["approvals", "revoke", "help"]
    arg: str = ""


def parse_command(text: str) -> Command | None:
    """The text commands (listed in the app manifest). Anything else is a message for the agent."""
    words = text.strip().split(maxsplit=1)
    if not words:
        return Command("help")
    head = words[0].lower().lstrip("/")
    rest = words[1].strip() if len(words) > 1 else ""
    if head in ("approvals", "grants") and not rest:
        return Command("approvals")
    if head == "help" and not rest:
        return Command("help")
    if head == "revoke":
        return Command("revoke", rest)
    return None


class SentActivity(Activity):
    """An activity built here for one send and never used after it. botbuilder deep-copies every
    activity it sends (`TurnContext.send_activities`), so that setting the conversation on its
    copy leaves the caller's untouched: for a card, the whole card (about 60 us), and 15 us for a
    bare text reply. Its copy is shallow: botbuilder and msrest only set the copy's attributes;
    nothing here changes an activity, or what it holds, once it is sent."""

    def __deepcopy__(self, memo: dict[int, Any]) -> SentActivity:
        return copy.copy(self)


def text_activity(text: str) -> Activity:
    """A text message, as botbuilder's `MessageFactory.text` builds it."""
    return SentActivity(type=ActivityTypes.message, text=text, input_hint=InputHints.accepting_input)


def card_activity(card: dict[str, Any], *, activity_id: str | None = None, summary: str | None = None) -> Activity:
    """`summary`: what Teams shows in the chat list and the notification ("Approval needed: …").
    A new card's activity is the one `MessageFactory.attachment` builds."""
    attachment = Attachment(content_type=adaptive.CONTENT_TYPE, content=card)
    if activity_id is None:
        activity: Activity = SentActivity(
            type=ActivityTypes.message,
            attachment_layout=AttachmentLayoutTypes.list,
            attachments=[attachment],
        )
    else:
        activity = Activity(type=ActivityTypes.message, id=activity_id, attachments=[attachment])
    if summary:
        activity.summary = summary
    return activity
