"""Block Kit renderers for the Slack front end: card model -> message (fallback text + blocks).

Pure functions built with `slack_sdk.models.blocks`, so every message is validated by the SDK's
models when it is serialised (`to_dict()`). Text that came from the agent or a user (reason,
URLs, names) is mrkdwn-escaped so it can never mention `@channel` or forge a link.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    CheckboxesElement,
    ConfirmObject,
    ContextBlock,
    DividerBlock,
    HeaderBlock,
    InputBlock,
    MarkdownTextObject,
    Option,
    PlainTextInputElement,
    PlainTextObject,
    SectionBlock,
    StaticSelectElement,
)

from chat_approvals.cards import wording as words
from chat_approvals.cards.edit_fields import editable
from chat_approvals.cards.effects import Refuse
from chat_approvals.cards.slack_chat import parse_chat_key
from chat_approvals.cards.subject_text import question_fields, readable_input
from chat_approvals.core.identity import slack_user_id
from chat_approvals.core.models import MAX_REASON, Answer, ApprovalCard, Grant, Vote, duration_label

ACTION_APPROVE = "approvals.approve"
ACTION_APPROVE_ONCE = "approvals.approve_once"  # a tool card: this call only, no grant
ACTION_DENY = "approvals.deny"
ACTION_PACKAGES = "approvals.packages"  # prefix: one checkbox group per 10 packages
ACTION_REVOKE = "approvals.revoke"
BLOCK_PACKAGES = "approvals.packages:"  # + card id: where the package choice lives in `state`
ACTION_DURATION = "approvals.duration"
BLOCK_DURATION = "approvals.duration:"  # + card id
ACTION_REASON = "approvals.reason"
BLOCK_REASON = "approvals.reason:"  # + card id

MAX_BLOCKS = 50  # Slack's per-message limit; the SDK models do not check it
MAX_SECTION = 3000
MAX_OPTIONS = 10  # per checkbox group
MAX_OPTION_VALUE = 150
MAX_OPTION_TEXT = 75
MAX_BUTTON_VALUE = 2000
MAX_LISTED = 25  # items of one kind listed on a card before "…and N more"
MAX_INPUT_SHOWN = 2500  # a tool call's input, in a code block of one section (3000 with the fences)
FENCE = "`" * 3

USAGE = (
    "Usage: `/approvals` · `/approvals revoke HOST_OR_PACKAGE` · `/approvals revoke tool:NAME` · "
    "`/approvals revoke all` · `/approvals help`"
)
HELP = (
    words.WHAT_I_DO + "\n\n"
    "*/approvals* shows what you approved in this workspace, with a Revoke button each.\n"
    "• `/approvals revoke HOST_OR_PACKAGE` (or `tool:NAME`) revokes it in all of your chats here.\n"
    "• `/approvals revoke all` revokes everything you approved here.\n"
    "• `/approvals help` shows this text.\n"
    "A revocation takes effect at once, for the next download."
)


@dataclass(frozen=True)
class SlackMessage:
    """What chat.postMessage / chat.update / chat.postEphemeral take: fallback text and blocks."""

    text: str
    blocks: list[Block]

    def block_dicts(self) -> list[dict[str, Any]]:
        # to_dict() is where slack_sdk validates the models (lengths, styles, element counts).
        if len(self.blocks) > MAX_BLOCKS:
            raise ValueError(f"a Slack message holds at most {MAX_BLOCKS} blocks, got {len(self.blocks)}")
        return [b.to_dict() for b in self.blocks]


# ----------------------------------------------------------------------------- text helpers


def escape(text: str) -> str:
    """Slack's three control characters; anything else is shown as typed."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def code(text: str) -> str:
    return "`" + escape(text).replace("`", "'") + "`"


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def date_token(at: float, prefix: str = "") -> str:
    """`<!date^…>`: Slack renders it in the reader's own time zone; the fallback is UTC."""
    fallback = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"<!date^{int(at)}^{prefix}{{date_short_pretty}} at {{time}}|{prefix}{fallback}>"


def user_ref(user: str) -> str:
    """A mention of an identity (R17: `slack:E:T:U`, see core.identity): Slack renders `<@U…>`."""
    return f"<@{escape(slack_user_id(user))}>"


def _listed(items: Sequence[str]) -> str:
    shown = [code(i) for i in items[:MAX_LISTED]]
    more = len(items) - len(shown)
    return ", ".join(shown) + (f" …and {more} more" if more > 0 else "")


def _bullets(items: Sequence[str]) -> str:
    shown = ["• " + code(i) for i in items[:MAX_LISTED]]
    more = len(items) - len(shown)
    return "\n".join(shown) + (f"\n…and {more} more" if more > 0 else "")


def _section(text: str, block_id: str | None = None) -> SectionBlock:
    return SectionBlock(block_id=block_id, text=MarkdownTextObject(text=clip(text, MAX_SECTION)))


def _pre(text: str) -> str:
    return FENCE + escape(text).replace(FENCE, "'" * 3) + FENCE


def _what(card: ApprovalCard, open_card: bool = False) -> list[Block]:
    """What is asked for: URLs, packages; a tool call; a question. Shared by every state (an open
    card's own sentence already names a few URLs and packages: not repeated)."""
    blocks: list[Block] = []
    if card.kind == "batch":  # issue 32: every item (cards/slack_batch.py)
        from chat_approvals.cards import slack_batch

        return slack_batch.items_blocks(card, open_card)
    if card.tool is not None:
        shown = _pre(readable_input(card, MAX_INPUT_SHOWN))
        blocks.append(_section(f"*Tool* {code(card.tool.name)}\n*Input*\n{shown}"))
        return blocks
    if card.question is not None:
        fields = question_fields(card, 1000)
        lines = [f"*{escape(t)}:* {escape(v)}" for t, v in fields] or ["_no details given_"]
        blocks.append(_section(f"*Question* {code(card.question.name)}\n" + "\n".join(lines)))
        return blocks
    if not open_card or len(card.urls) > 3:  # an open card's sentence names up to 3 URLs already
        if card.urls:
            blocks.append(_section("*URLs*\n" + _bullets(card.urls)))
        elif card.sites:
            blocks.append(_section("*Sites*\n" + _bullets(card.sites)))
    if card.packages and (not open_card or len(card.packages) > 5):
        blocks.append(_section("*Packages*\n" + _bullets(card.packages)))
    return blocks


def _summary(card: ApprovalCard) -> str:
    if card.kind == "batch":
        return escape(words.subject(card))
    if card.tool is not None:
        return "the call of " + code(card.tool.name)
    if card.question is not None:
        return "the question " + code(card.question.name)
    parts = []
    if card.sites:
        parts.append("sites " + _listed(card.sites))
    if card.packages:
        parts.append("packages " + _listed(card.packages))
    return " and ".join(parts) or "nothing"


# ----------------------------------------------------------------------------- the card


def button_value(card_id: str, secret: str) -> str:
    """The card id and the secret only (R8: the server holds only the secret's hash)."""
    value = json.dumps({"card": card_id, "secret": secret}, separators=(",", ":"))
    if len(value) > MAX_BUTTON_VALUE:
        raise ValueError("card id and secret do not fit in a Slack button value")
    return value


def packages_block_id(card_id: str) -> str:
    return BLOCK_PACKAGES + card_id


def duration_block_id(card_id: str) -> str:
    return BLOCK_DURATION + card_id


def reason_block_id(card_id: str) -> str:
    return BLOCK_REASON + card_id


def _duration_choice(card: ApprovalCard) -> ActionsBlock | None:
    """The policy's durations as a select (the default preselected): how long an approval lasts."""
    policy = card.policy
    if policy is None or not policy.durations:
        return None
    options = [Option(value=d, text=PlainTextObject(text=duration_label(d))) for d in policy.durations]
    initial = next((o for o in options if o.value == policy.default_duration), options[0])
    select = StaticSelectElement(
        action_id=ACTION_DURATION,
        placeholder=PlainTextObject(text="How long"),
        options=options,
        initial_option=initial,
    )
    return ActionsBlock(block_id=duration_block_id(card.card_id), elements=[select])


def _reason_input(card: ApprovalCard) -> InputBlock:
    """An optional deny reason, sent to the agent as the approver's words."""
    return InputBlock(
        block_id=reason_block_id(card.card_id),
        label=PlainTextObject(text=words.REASON_LABEL_SLACK),
        optional=True,
        element=PlainTextInputElement(action_id=ACTION_REASON, multiline=True, max_length=MAX_REASON),
    )


def _names(votes: Sequence[Vote]) -> str:
    return ", ".join(user_ref(v.user) for v in votes)


def _package_choice(card: ApprovalCard) -> ActionsBlock | None:
    """When several packages are asked for, checkboxes (all ticked) to choose which to allow."""
    choosable = [p for p in card.packages if len(p) <= MAX_OPTION_VALUE]
    if len(choosable) < 2:
        return None
    groups = [choosable[i : i + MAX_OPTIONS] for i in range(0, len(choosable), MAX_OPTIONS)][:25]
    elements = []
    for n, group in enumerate(groups):
        options = [Option(value=p, text=PlainTextObject(text=clip(p, MAX_OPTION_TEXT))) for p in group]
        elements.append(CheckboxesElement(action_id=f"{ACTION_PACKAGES}.{n}", options=options, initial_options=options))
    return ActionsBlock(block_id=packages_block_id(card.card_id), elements=elements)


_SLACK_ID = re.compile(r"[SUW][A-Z0-9]{2,31}")


def _person(user: str, name: str | None) -> str:
    return user_ref(user)  # Slack renders the mention as the reader sees that person's name


def approver_ref(entry: str) -> str:
    """A policy approver entry as Slack shows it: a user group `S…` as `<!subteam^S…>`, a user
    (`U…`, `TEAM:U…`, `E:TEAM:U…`) as `<@U…>`; anything else as plain code, never as markup."""
    last = entry.rsplit(":", 1)[-1]
    if _SLACK_ID.fullmatch(last):
        return f"<!subteam^{last}>" if last.startswith("S") else f"<@{last}>"
    return code(entry)


STYLE = words.Style(time=date_token, person=_person, thing=code, text=escape, approver=approver_ref)


def _footer(card: ApprovalCard) -> ContextBlock:
    """Small print: the answer-by time, who may answer, and the ids kept for the audit trail."""
    parts = [f"*{words.answer_by(card, STYLE)}*", words.who_answers(card, STYLE), f"card {code(card.card_id)}"]
    call = words.call_id(card)
    if call:
        parts.append(escape(call))
    return ContextBlock(elements=[MarkdownTextObject(text=" · ".join(parts))])


def _ids(card: ApprovalCard) -> ContextBlock:
    parts = [f"card {code(card.card_id)}"]
    call = words.call_id(card)
    if call:
        parts.append(escape(call))
    return ContextBlock(elements=[MarkdownTextObject(text=" · ".join(parts))])


def _deny_button(value: str, text: str, label: str = "Deny") -> ButtonElement:
    return ButtonElement(
        action_id=ACTION_DENY,
        text=PlainTextObject(text=label),
        style="danger",
        value=value,
        confirm=ConfirmObject(title="Deny this request?", text=text, confirm="Deny", deny="Cancel", style="danger"),
    )


def _choices_text(card: ApprovalCard) -> str:
    return "\n".join(f"• *{c.label}*: {c.does}" for c in words.choices(card, STYLE))


def card_message(
    card: ApprovalCard,
    secret: str,
    votes: Sequence[Vote] = (),
    link: str | None = None,
    routed_to: str | None = None,
) -> SlackMessage:
    """The card: who asked, what, what each choice does and until when, Answer by. Approve buttons
    in one row; the optional deny reason sits just above Deny, in its own row, so it never reads as
    applying to Approve. With a policy: the duration choice, the votes so far. Routing: `link` (the
    copy in the approvers' channel) points at the requesting thread; `routed_to` (the requester's
    copy) says where the approvers were asked."""
    value = button_value(card.card_id, secret)
    blocks: list[Block] = [
        HeaderBlock(text=PlainTextObject(text=clip(words.title(card), 150))),
        _section(f"*{words.requested_by(card, STYLE)}*\n{words.asks(card, STYLE)}"),
        *_what(card, open_card=True),
    ]
    if link:
        blocks.append(_section(f"Asked in <{escape(link)}|this conversation>."))
    if routed_to:
        blocks.append(_section(f"Also sent to the approvers in <#{escape(routed_to)}>."))
    choice = _package_choice(card) if card.kind == "download" else None
    if choice is not None:
        blocks.append(_section("*Allow these packages* (untick any you do not want):"))
        blocks.append(choice)
    durations = _duration_choice(card) if card.kind != "question" else None
    if durations is not None:
        blocks.append(_section("*Approve for how long*"))
        blocks.append(durations)
    tally = words.votes(card, [user_ref(v.user) for v in votes])
    if tally:
        blocks.append(_section(f"*{tally}*"))
    blocks.append(_section(_choices_text(card)))
    approve: list[ButtonElement] = []
    deny_text = "The agent goes on without it."
    if card.kind == "batch":
        from chat_approvals.cards import slack_batch

        blocks.append(_section(slack_batch.DECIDE_EACH))
        approve = slack_batch.answer_buttons(card, value)
        deny_text = "Nothing runs; the agent is told no for each."
    elif card.tool is not None:
        approve = [
            ButtonElement(
                action_id=ACTION_APPROVE_ONCE, text=PlainTextObject(text="Approve once"), style="primary", value=value
            ),
            ButtonElement(action_id=ACTION_APPROVE, text=PlainTextObject(text="Approve for this chat"), value=value),
        ]
        if editable(card):  # issue 32: opens a modal with the input (cards/slack_edit.py)
            approve.append(
                ButtonElement(action_id="approvals.edit", text=PlainTextObject(text="Approve with edits…"), value=value)
            )
        deny_text = f"{card.tool.name} does not run; the agent is told why."
    else:
        approve = [
            ButtonElement(action_id=ACTION_APPROVE, text=PlainTextObject(text="Approve"), style="primary", value=value)
        ]
    blocks.append(ActionsBlock(block_id=f"approvals.answer:{card.card_id}", elements=approve))
    blocks.append(_reason_input(card))
    deny = _deny_button(value, deny_text, "Deny all" if card.kind == "batch" else "Deny")
    blocks.append(ActionsBlock(block_id=f"approvals.deny:{card.card_id}", elements=[deny]))
    blocks.append(_footer(card))
    return SlackMessage(text=words.preview(card), blocks=blocks)


# ----------------------------------------------------------------------------- after a click


def resuming_message(card: ApprovalCard, by: str) -> SlackMessage:
    """Shown as soon as the claim is won: buttons gone, the turn is continuing."""
    blocks: list[Block] = [
        _section(f":hourglass_flowing_sand: *Resuming…* {words.resuming(user_ref(by))}"),
        *_what(card),
    ]
    return SlackMessage(text="Resuming…", blocks=blocks)


def _outcome_line(card: ApprovalCard, answer: Answer, by: str, at: float) -> str:
    """The answered card's sentence (decision, by whom, when, the grant's end) and the reason."""
    mark = ":white_check_mark:" if answer.approved else ":no_entry:"
    line = f"{mark} " + words.answered(card, answer, by, at, STYLE)
    reason = words.deny_reason(answer, STYLE)
    return line + (f"\n{reason}" if reason else "")


def outcome_message(
    card: ApprovalCard, answer: Answer, answered_by: str, answered_at: float, votes: Sequence[Vote] = ()
) -> SlackMessage:
    """The answered card: no Answer by; the decision, by whom, when, until when; what was asked."""
    by = _names(votes) if answer.approved and len(votes) > 1 else user_ref(answered_by)
    blocks: list[Block] = [
        _section(f"*{words.requested_by(card, STYLE)}*\n{_outcome_line(card, answer, by, answered_at)}"),
    ]
    edited = words.edited_call(card, answer)
    if edited is not None:  # R22: the call exactly as approved, then the proposed one
        shown = _pre(edited[0][:MAX_INPUT_SHOWN])
        blocks.append(_section(f"*Input as approved (edited)* · {escape(edited[1])}\n{shown}"))
        blocks.append(_section("*Proposed by the agent (not run as proposed):*"))
    blocks += [*_what(card), _ids(card)]
    return SlackMessage(text=f"{words.decision(card, answer)} by {slack_user_id(answered_by)}", blocks=blocks)


def expired_message(card: ApprovalCard) -> SlackMessage:
    blocks: list[Block] = [
        _section(f":alarm_clock: {words.expired(card, STYLE)}"),
        *_what(card),
        _ids(card),
    ]
    return SlackMessage(text="This approval request expired.", blocks=blocks)


def shown_again_message(card: ApprovalCard) -> SlackMessage:
    """An earlier copy of a card its owner was shown again (with a new secret, R19): read-only,
    pointing at the newer copy below it (in the thread, and in the approvers' channel if routed)."""
    blocks: list[Block] = [
        _section(f":arrow_down: *{words.shown_again()}* ({_summary(card)})"),
        *_what(card),
    ]
    return SlackMessage(text="This approval request was shown again below; this copy no longer works.", blocks=blocks)


def waiting_message(hint: str | None = None) -> SlackMessage:
    if hint:
        return _plain(f":point_up: {escape(hint)}")
    return _plain(":hourglass: Waiting for your approval of the request above before I continue.")


def welcome_message() -> SlackMessage:
    """Posted once when the bot joins a channel or a person first opens its DM: two example prompts."""
    return reply_message(words.WELCOME)


def reply_message(text: str) -> SlackMessage:
    """The agent's reply in the thread. Its text is the model's, shown as mrkdwn, but escaped."""
    body = escape(text) or "_(no reply)_"
    chunks = [body[i : i + MAX_SECTION] for i in range(0, len(body), MAX_SECTION)][:MAX_BLOCKS]
    return SlackMessage(text=clip(text or "(no reply)", 3000), blocks=[_section(c) for c in chunks])


# ----------------------------------------------------------------------------- refusals


def _plain(text: str) -> SlackMessage:
    return SlackMessage(text=text, blocks=[_section(text)])


def refusal_forbidden(owner: str | None, message: str | None = None) -> SlackMessage:
    """Not yours to answer. With a policy, the resume service's own sentence says who may."""
    if message:
        return _plain(f":lock: {escape(message)}")
    who = f"Only {user_ref(owner)} may answer it." if owner else "Only the person whose turn it is may answer."
    return _plain(f":lock: This request is not yours to answer. {who}")


def vote_recorded(votes: Sequence[Vote], needed: int) -> SlackMessage:
    """To the voter, ephemerally: counted, and how many more are needed."""
    left = needed - len(votes)
    return _plain(
        f":ballot_box_with_ballot: Your approval is recorded: {len(votes)} of {needed} approvals"
        + (f"; {left} more needed." if left > 0 else ".")
    )


def refusal_expired() -> SlackMessage:
    return _plain(":alarm_clock: This request has expired; nothing was approved. Ask the agent again.")


def refusal_in_progress() -> SlackMessage:
    return _plain(":hourglass_flowing_sand: This request is already being resumed; nothing more to do.")


def refusal_answered(
    card: ApprovalCard | None, answer: Answer | None, by: str | None, at: float | None
) -> SlackMessage:
    text = ":information_source: This request was already answered."
    if card is not None and answer is not None and by and at:
        text += " " + _outcome_line(card, answer, user_ref(by), at)
    return _plain(clip(text, MAX_SECTION))


def refusal_unknown() -> SlackMessage:
    return _plain(":grey_question: This request is unknown or no longer open.")


def refusal_invalid(message: str | None = None) -> SlackMessage:
    """`message`: a sentence for the person (e.g. a reason sent with Approve), else the generic one."""
    if message:
        return _plain(f":warning: {escape(message)}")
    return _plain(":warning: That answer could not be read; nothing was changed. Use the card's buttons.")


def usage_message() -> SlackMessage:
    return _plain(USAGE)


def help_message() -> SlackMessage:
    return SlackMessage(text="How /approvals works", blocks=[_section(HELP), _section(USAGE)])


# ----------------------------------------------------------------------------- /approvals


def revoke_value(chat: str, name: str) -> str:
    return json.dumps({"chat": chat, "name": name}, separators=(",", ":"))


def _chat_label(chat: str) -> str:
    parsed = parse_chat_key(chat)
    if parsed is None:
        return code(chat)
    return f"<#{escape(parsed.channel)}> · thread {code(parsed.thread_ts)}"


def grants_message(grants: Iterable[Grant], notice: str | None = None) -> SlackMessage:
    """The user's grants grouped by chat, a Revoke button on each; truncated to fit one message.

    `notice` (mrkdwn, already escaped) goes first, e.g. what a Revoke click just removed."""
    by_chat: dict[str, list[Grant]] = {}
    for g in sorted(grants, key=lambda g: (g.chat, g.kind, g.name)):
        by_chat.setdefault(g.chat, []).append(g)
    top: list[Block] = [_section(notice)] if notice else []
    if not by_chat:
        empty = "You have approved nothing in this workspace."
        return SlackMessage(text=empty, blocks=[*top, _section(empty)])
    total = sum(len(v) for v in by_chat.values())
    blocks: list[Block] = [*top, HeaderBlock(text=PlainTextObject(text="Your approvals"))]
    shown = 0
    budget = MAX_BLOCKS - 2  # room for the header and a closing "…and N more" line
    for chat, items in by_chat.items():
        if len(blocks) + 2 > budget:
            break
        blocks.append(DividerBlock())
        blocks.append(ContextBlock(elements=[MarkdownTextObject(text=_chat_label(chat))]))
        for g in items:
            if len(blocks) + 1 > budget:
                break
            blocks.append(
                SectionBlock(
                    text=MarkdownTextObject(
                        text=clip(f"{code(g.name)} ({g.kind}) · {date_token(g.expires_at, 'until ')}", MAX_SECTION)
                    ),
                    accessory=ButtonElement(
                        action_id=ACTION_REVOKE,
                        text=PlainTextObject(text="Revoke"),
                        value=revoke_value(g.chat, g.revoke_subject),
                    ),
                )
            )
            shown += 1
    if shown < total:
        blocks.append(_section(f"…and {total - shown} more. Use `/approvals revoke NAME` or `/approvals revoke all`."))
    return SlackMessage(text=f"Your approvals: {total}", blocks=blocks)


def revoked_message(subject: str, revoked: Sequence[Grant]) -> SlackMessage:
    if not revoked:
        what = "anything" if subject == "all" else code(subject)
        return _plain(f"You had not approved {what} here; nothing to revoke.")
    chats = len({g.chat for g in revoked})
    names = sorted({g.revoke_subject for g in revoked})
    return _plain(
        f":wastebasket: Revoked {_listed(names)} in {chats} chat{'s' if chats != 1 else ''}. "
        "It takes effect for the next download."
    )


def refusal_message(r: Refuse) -> SlackMessage:
    """A click's refusal (cards/effects.py), for the clicker alone."""
    if r.kind == "vote_recorded":
        return vote_recorded(r.votes, r.needed)
    if r.kind == "answered":
        return refusal_answered(r.card, r.answer, r.by, r.at)
    if r.kind == "in_progress":
        return refusal_in_progress()
    if r.kind == "expired":
        return refusal_expired()
    if r.kind == "forbidden":
        return refusal_forbidden(r.owner, r.policy_said)
    if r.kind == "invalid":
        return refusal_invalid(r.message) if r.message else refusal_invalid()
    return refusal_unknown()


# ----------------------------------------------------------------------------- timers (issue 33)


def expired_unanswered_message(card: ApprovalCard) -> SlackMessage:
    """Every copy of a card whose expiry timer fired, updated in place."""
    blocks: list[Block] = [_section(f":alarm_clock: {words.expired_unanswered(card, STYLE)}"), *_what(card), _ids(card)]
    return SlackMessage(text="This approval request expired without an answer; the agent was told.", blocks=blocks)


def reminder_message(card: ApprovalCard, votes: Sequence[Vote], escalated: bool = False) -> SlackMessage:
    """A thread reply under a card, mentioning those who have not answered."""
    return _plain(f":bell: {words.reminder(card, votes, STYLE, escalated)}")


def escalated_line(card: ApprovalCard) -> str:
    return f":rotating_light: {words.escalated(card, STYLE)}"


def with_notice(msg: SlackMessage, line: str) -> SlackMessage:
    """A card message with a line above it (an escalation's "escalated to …")."""
    return SlackMessage(text=msg.text, blocks=[_section(line), *msg.blocks])
