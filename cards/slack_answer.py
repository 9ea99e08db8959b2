"""Slack payload -> typed answer: block_actions clicks, Revoke clicks, `/approvals` arguments.

Pure and fail closed. A payload we cannot read raises `SlackPayloadError` (the front end then
refuses and changes nothing); a readable click becomes an `Answer` through `read_answer` (R15).
Slack adds fields over time, so the wire models ignore unknown keys but type the ones we use.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from chat_approvals.cards import slack_batch
from chat_approvals.cards.slack_blocks import (
    ACTION_APPROVE,
    ACTION_APPROVE_ONCE,
    ACTION_DENY,
    ACTION_REVOKE,
    duration_block_id,
    packages_block_id,
    reason_block_id,
)
from chat_approvals.cards.wording import REASON_WITH_APPROVAL
from chat_approvals.core.identity import SlackUser, unverified
from chat_approvals.core.models import ONCE, Answer, InvalidAnswer, ItemAnswer, is_card_id, read_answer

MAX_VALUE = 2000  # Block Kit: a button's value
MAX_ID = 255  # Block Kit: action_id, block_id; Slack's ids are far shorter


class SlackPayloadError(ValueError):
    """The payload is not a click we understand; nothing may change because of it."""


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


# The lengths are the ack's shape check's (bots/slack_shapes.py): every payload read here has passed
# it, so they refuse nothing more; with them, a payload this model reads strictly passes both.
class _Id(_Wire):
    id: str = Field(min_length=1, max_length=MAX_ID)


class _Team(_Wire):
    id: str | None = Field(default=None, max_length=MAX_ID)
    enterprise_id: str | None = None


class _User(_Wire):
    id: str = Field(min_length=1, max_length=MAX_ID)
    team_id: str | None = None


class _Container(_Wire):
    channel_id: str | None = None
    message_ts: str | None = None
    thread_ts: str | None = None
    is_ephemeral: bool | None = None


class _Action(_Wire):
    action_id: str = Field(max_length=MAX_ID)
    block_id: str | None = Field(default=None, max_length=MAX_ID)
    value: str | None = Field(default=None, max_length=MAX_VALUE)
    type: str | None = None


class _Option(_Wire):
    value: str


class _StateValue(_Wire):
    type: str | None = None
    selected_options: list[_Option] | None = None
    selected_option: _Option | None = None
    value: str | None = None  # a plain_text_input's text


class _State(_Wire):
    values: dict[str, dict[str, _StateValue]] = Field(default_factory=dict)


class _Message(_Wire):
    ts: str | None = None
    thread_ts: str | None = None
    blocks: list[dict[str, Any]] = Field(default_factory=list)


class BlockActions(_Wire):
    type: Literal["block_actions"]
    user: _User
    team: _Team | None = None
    enterprise: _Team | None = None
    channel: _Id | None = None
    container: _Container = Field(default_factory=_Container)
    actions: list[_Action] = Field(min_length=1, max_length=1)
    state: _State | None = None
    message: _Message | None = None
    response_url: str | None = None

    @property
    def team_id(self) -> str | None:
        # org-wide installs may send team=null; Slack then puts the team on the user
        return (self.team.id if self.team else None) or self.user.team_id

    @property
    def actor(self) -> str:
        """R17: enterprise + team + user. The click's workspace is required: `team: null` (or a
        part that is not an id) gives no identity, so the click is refused like a stranger's.
        A Slack Connect user from another workspace is their own team's user."""
        team = self.team.id if self.team else None
        if not team:
            return unverified("slack")
        enterprise = (self.enterprise.id if self.enterprise else None) or (
            self.team.enterprise_id if self.team else None
        )
        who = SlackUser.of(enterprise, self.user.team_id or team, self.user.id)
        return who.key if who is not None else unverified("slack")

    @property
    def channel_id(self) -> str | None:
        return self.container.channel_id or (self.channel.id if self.channel else None)

    @property
    def message_ts(self) -> str | None:
        return self.container.message_ts or (self.message.ts if self.message else None)

    @property
    def thread_ts(self) -> str | None:
        return self.container.thread_ts or (self.message.thread_ts if self.message else None)


class _CardValue(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    card: str = Field(min_length=1, max_length=200)
    secret: str = Field(min_length=1, max_length=200)

    @field_validator("card")
    @classmethod
    def _minted(cls, value: str) -> str:
        if not is_card_id(value):  # checked before it is used anywhere
            raise ValueError("not a card id")
        return value


class _RevokeValue(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    chat: str = Field(min_length=1)
    name: str = Field(min_length=1)


@dataclass(frozen=True)
class SlackClick:
    """A readable Approve/Deny click, and where it came from (for ephemeral refusals)."""

    card_id: str
    secret: str
    answer: Answer
    user: str  # the Slack user id: where ephemeral refusals go
    actor: str  # R17: the full identity the resume service compares (core.identity)
    team: str | None
    channel: str | None
    message_ts: str | None
    thread_ts: str | None


@dataclass(frozen=True)
class RevokeClick:
    user: str  # R17: the full identity (core.identity)
    team: str | None
    chat: str
    subject: str


def read_block_actions(payload: object) -> BlockActions:
    try:
        return BlockActions.model_validate(payload)
    except ValidationError as e:
        raise SlackPayloadError(f"not a block_actions payload with one action: {e.error_count()} error(s)") from e


def _loads(value: str | None, model: type[BaseModel], what: str) -> Any:
    if not value:
        raise SlackPayloadError(f"the {what} button carries no value")
    try:
        return model.model_validate(json.loads(value))
    except (ValueError, ValidationError) as e:
        raise SlackPayloadError(f"the {what} button value is not ours") from e


def _chosen_packages(ba: BlockActions, card_id: str) -> list[str] | None:
    """The packages left ticked on the card, or None when the card offered no choice.

    Slack reports the checkboxes' current state in `state.values`; if an untouched group is
    missing there, its initial (all ticked) options on the message are what the reader saw.
    """
    block_id = packages_block_id(card_id)
    groups = (ba.state.values if ba.state else {}).get(block_id)
    shown = next((b for b in (ba.message.blocks if ba.message else []) if b.get("block_id") == block_id), None)
    if groups is None and shown is None:
        return None
    chosen: list[str] = []
    if groups is not None:
        for value in groups.values():
            if value.type not in (None, "checkboxes"):
                raise SlackPayloadError("the package choice is not a checkbox group")
            chosen += [o.value for o in value.selected_options or []]
    seen_groups = set(groups or {})
    for element in shown.get("elements", []) if shown else []:
        if not isinstance(element, dict) or element.get("action_id") in seen_groups:
            continue
        for option in element.get("initial_options") or []:
            if not isinstance(option, dict) or not isinstance(option.get("value"), str):
                raise SlackPayloadError("the package choice on the message is malformed")
            chosen.append(option["value"])
    return list(dict.fromkeys(chosen))  # de-duplicated, in order


def _chosen_duration(ba: BlockActions, card_id: str) -> str | None:
    """The duration selected on the card: the select's state, else its initial option on the
    message (an untouched select), else None (the card offered no choice)."""
    block_id = duration_block_id(card_id)
    group = (ba.state.values if ba.state else {}).get(block_id) or {}
    for value in group.values():
        if value.type not in (None, "static_select"):
            raise SlackPayloadError("the duration choice is not a select")
        if value.selected_option is not None:
            return value.selected_option.value
    shown = next((b for b in (ba.message.blocks if ba.message else []) if b.get("block_id") == block_id), None)
    for element in shown.get("elements", []) if shown else []:
        initial = element.get("initial_option") if isinstance(element, dict) else None
        if isinstance(initial, dict) and isinstance(initial.get("value"), str):
            return str(initial["value"])
    return None


def _typed_reason(ba: BlockActions, card_id: str) -> str | None:
    group = (ba.state.values if ba.state else {}).get(reason_block_id(card_id)) or {}
    for value in group.values():
        if value.type not in (None, "plain_text_input"):
            raise SlackPayloadError("the reason is not a text input")
        if value.value and value.value.strip():
            return value.value
    return None


class ToldRefusal(SlackPayloadError):
    """A click refused with a sentence for the person (ephemeral); nothing changes."""


class ReasonWithApproval(ToldRefusal):
    """A deny reason typed, then Approve clicked: refused, and the person is told why."""


CHOOSE_EACH = "Choose a decision for every item first (or use Approve all / Deny all); nothing was sent."


def _item_decisions(ba: BlockActions, card_id: str) -> list[dict[str, object]]:
    """A batch card's per-item selects (issue 32), each item the message shows once: its id and the
    choice made (`approve_once` | `approve` | `deny`). An item left undecided refuses the click."""
    prefix = slack_batch.BLOCK_ITEM + card_id + ":"
    values = ba.state.values if ba.state else {}
    shown = [b.get("block_id") for b in (ba.message.blocks if ba.message else []) if isinstance(b, dict)]
    block_ids = list(dict.fromkeys([b for b in shown if isinstance(b, str) and b.startswith(prefix)]))
    block_ids += [b for b in values if b.startswith(prefix) and b not in block_ids]
    out: list[dict[str, object]] = []
    for block_id in block_ids:
        chosen = None
        for value in (values.get(block_id) or {}).values():
            if value.type not in (None, "static_select"):
                raise SlackPayloadError("an item's decision is not a select")
            if value.selected_option is not None:
                chosen = value.selected_option.value
        if chosen is None:
            raise ToldRefusal(CHOOSE_EACH)
        if chosen not in slack_batch.ITEM_CHOICES:
            raise SlackPayloadError("an item's decision is not one the card offers")
        out.append({"item": block_id.removeprefix(slack_batch.BLOCK_ITEM), "choice": chosen})
    if not out:
        raise SlackPayloadError("no item decisions on this click")
    return out


def _items_answer(ba: BlockActions, card_id: str) -> Answer:
    """Send the decisions above: each item as chosen; the card's duration select for an item
    approved for the chat; the typed reason for each denied item."""
    duration = _chosen_duration(ba, card_id)
    reason = _typed_reason(ba, card_id)
    items: list[ItemAnswer] = []
    for d in _item_decisions(ba, card_id):
        choice = d["choice"]
        body: dict[str, object] = {"approved": choice != "deny"}
        if choice == "approve_once":
            body["duration"] = ONCE
        elif choice == "approve" and duration is not None:
            body["duration"] = duration
        elif choice == "deny" and reason is not None:
            body["reason"] = reason
        try:
            a = read_answer("resolved", body)
        except InvalidAnswer as e:
            raise SlackPayloadError(str(e)) from e
        items.append(ItemAnswer(item=str(d["item"]), approved=a.approved, duration=a.duration, reason=a.reason))
    if reason is not None and all(i.approved for i in items):
        raise ReasonWithApproval(REASON_WITH_APPROVAL)
    return Answer(approved=any(i.approved for i in items), items=items)


def shaped_click(payload: dict[str, Any]) -> BlockActions | None:
    """The payload read strictly (no coercion), or None. A payload read here passes both the ack's
    shape check (bots/slack_shapes.py `SlackInteraction`, whose lengths `BlockActions` repeats and
    whose types are looser) and `read_block_actions`, which would read the same values: the ack
    reads a click once and hands this to `parse_click`. None: those two decide, as before."""
    try:
        return BlockActions.model_validate(payload, strict=True)
    except ValidationError:
        return None


def parse_click(payload: object, shaped: BlockActions | None = None) -> SlackClick:
    """An Approve/Deny block_actions payload -> (card id, secret, Answer), or SlackPayloadError.
    `Approve once` (a tool card) approves this call only (`duration: once`: no grant).
    `shaped`: `shaped_click(payload)`, when the ack already read it."""
    ba = shaped if shaped is not None else read_block_actions(payload)
    action = ba.actions[0]
    if action.action_id not in (ACTION_APPROVE, ACTION_APPROVE_ONCE, ACTION_DENY, slack_batch.ACTION_ITEMS):
        raise SlackPayloadError(f"unknown action {action.action_id!r}")
    value: _CardValue = _loads(action.value, _CardValue, "approval")
    if action.action_id == slack_batch.ACTION_ITEMS:  # a batch card decided item by item (issue 32)
        return _click(ba, value, _items_answer(ba, value.card))
    if action.action_id != ACTION_DENY and _typed_reason(ba, value.card) is not None:
        raise ReasonWithApproval(REASON_WITH_APPROVAL)  # refused with a message, never dropped
    if action.action_id == ACTION_APPROVE:
        body: dict[str, object] = {"approved": True}
        chosen = _chosen_packages(ba, value.card)
        if chosen is not None:
            body["packages"] = chosen
        duration = _chosen_duration(ba, value.card)
        if duration is not None:
            body["duration"] = duration
    elif action.action_id == ACTION_APPROVE_ONCE:
        body = {"approved": True, "duration": ONCE}
    else:
        body = {"approved": False}
        reason = _typed_reason(ba, value.card)
        if reason is not None:
            body["reason"] = reason
    try:
        answer = read_answer("resolved", body)
    except InvalidAnswer as e:
        raise SlackPayloadError(str(e)) from e
    return _click(ba, value, answer)


def _click(ba: BlockActions, value: _CardValue, answer: Answer) -> SlackClick:
    return SlackClick(
        card_id=value.card,
        secret=value.secret,
        answer=answer,
        user=ba.user.id,
        actor=ba.actor,
        team=ba.team_id,
        channel=ba.channel_id,
        message_ts=ba.message_ts,
        thread_ts=ba.thread_ts,
    )


def parse_revoke_click(payload: object) -> RevokeClick:
    ba = read_block_actions(payload)
    action = ba.actions[0]
    if action.action_id != ACTION_REVOKE:
        raise SlackPayloadError(f"unknown action {action.action_id!r}")
    value: _RevokeValue = _loads(action.value, _RevokeValue, "revoke")
    return RevokeClick(user=ba.actor, team=ba.team_id, chat=value.chat, subject=value.name)


# ----------------------------------------------------------------------------- /approvals


@dataclass(frozen=True)
class ApprovalsCommand:
    """`/approvals [list | help | revoke SUBJECT | revoke all]`; `usage` for anything else."""

    verb: Literal["list", "help", "revoke", "usage"]
    subject: str | None = None


def parse_command(text: str | None) -> ApprovalsCommand:
    words = (text or "").split()
    if not words or words == ["list"]:
        return ApprovalsCommand("list")
    if words == ["help"]:
        return ApprovalsCommand("help")
    if len(words) == 2 and words[0] == "revoke" and len(words[1]) <= 255:
        subject = words[1].strip("`")
        # Slack auto-links hosts as <http://host|host>; accept the visible part.
        if subject.startswith("<") and subject.endswith(">"):
            subject = subject[1:-1].split("|")[-1]
        if subject.lower() == "all":
            return ApprovalsCommand("revoke", "all")
        if subject and all(c.isalnum() or c in "-._:[]@/+=~" for c in subject):
            return ApprovalsCommand("revoke", subject)
    return ApprovalsCommand("usage")


# ----------------------------------------------------------------------------- message text

_ANGLE = re.compile(r"<([^<>]*)>")


def _unangle(m: re.Match[str]) -> str:
    inner = m.group(1)
    target, _, label = inner.partition("|")
    if target.startswith("@"):  # a user mention (the bot's own, usually): not part of the request
        return ""
    if target.startswith("#"):
        return "#" + label if label else target
    if target.startswith("!"):
        return "@" + (label or target[1:].split("^")[0])
    if target.startswith("mailto:"):
        return label or target[len("mailto:") :]
    return target  # a link: the URL itself, even when Slack shows a label


def message_text(text: str | None) -> str:
    """A Slack message's text as the person typed it: links back to URLs, mentions dropped,
    Slack's three escapes undone (Slack turns `https://x/y` into `<https://x/y>`)."""
    plain = _ANGLE.sub(_unangle, text or "")
    plain = plain.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return " ".join(plain.split())


# ----------------------------------------------------------------------------- identities (R17)


def _first_team(*candidates: object) -> str | None:
    # Slack Connect events may put an enterprise id where a team id is expected: skip those.
    return next((c for c in candidates if isinstance(c, str) and c.startswith("T")), None)


def event_actor(context: Mapping[str, Any], body: Mapping[str, Any], event: Mapping[str, Any]) -> str | None:
    """Who wrote a message event: Bolt's actor ids (it knows Slack Connect's cases), else the event's
    own team fields. None when the workspace cannot be told: then no turn runs for it."""
    team = _first_team(context.get("actor_team_id"), event.get("user_team"), event.get("team"), body.get("team_id"))
    enterprise = context.get("actor_enterprise_id") or context.get("enterprise_id") or body.get("enterprise_id")
    who = SlackUser.of(enterprise, team, context.get("actor_user_id") or event.get("user"))
    return who.key if who is not None else None


def command_actor(command: Mapping[str, Any]) -> str | None:
    """Who ran `/approvals`: enterprise + team + user from the command's own fields."""
    who = SlackUser.of(command.get("enterprise_id"), command.get("team_id"), command.get("user_id"))
    return who.key if who is not None else None
