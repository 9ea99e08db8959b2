"""Every text a person reads on a card, for all three renderers (Slack, Teams, HTTP JSON).

The texts meant for the model stay in `core/protocol/wording.py`; these are for people. Each
renderer formats the same sentences with its own `Style`: how a time reads (Slack's `<!date^…>`,
Teams' `{{DATE()}} {{TIME()}}`, ISO 8601 in JSON), how a person is named, how a name the agent
gave (a host, a tool) is quoted and escaped. A sentence says who asked, what is asked, what each
choice does and until when; nothing here reads as the approval's end unless it is.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from chat_approvals.cards import batch_wording as batch
from chat_approvals.core.models import (
    ONCE,
    Answer,
    ApprovalCard,
    Vote,
    call_fingerprint,
    duration_label,
    duration_seconds,
)

MAX_NAMED = 5  # hosts or packages named in one sentence before "and N more"


@dataclass(frozen=True)
class Style:
    """How one platform writes a time, a person and a quoted name (already escaped for it)."""

    time: Callable[[float], str]
    person: Callable[[str, str | None], str]  # (identity, display name or None)
    thing: Callable[[str], str]  # a name: a host, a URL, a tool (Slack: in code)
    text: Callable[[str], str]  # someone's words: a reason (escaped, as typed)
    approver: Callable[[str], str] = str  # an id from the policy's approver list (Slack: a mention)


@dataclass(frozen=True)
class Choice:
    """One button and, next to it, what it does."""

    answer: str  # approve | approve_once | deny
    label: str
    does: str


def hours(seconds: float) -> str:
    """A grant's length, short: "8 h", "30 min", "7 days"."""
    if seconds >= 86400 and seconds % 86400 == 0:
        n = int(seconds // 86400)
        return f"{n} day{'s' if n != 1 else ''}"
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{int(seconds // 3600)} h"
    return f"{max(1, round(seconds / 60))} min"


def _named(items: Sequence[str], style: Style) -> str:
    shown = [style.thing(i) for i in items[:MAX_NAMED]]
    more = len(items) - len(shown)
    if more > 0:
        return ", ".join(shown) + f" and {more} more"
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]


def subject(card: ApprovalCard) -> str:
    """Plain, short: what the card is about (previews, fallbacks, titles). Not escaped."""
    if card.kind == "batch":
        return batch.subject(card)
    if card.tool is not None:
        return f"run {card.tool.name}"
    if card.question is not None:
        return f"answer {card.question.name}"
    names = [*card.sites, *card.packages]
    return ", ".join(names[:MAX_NAMED]) + (f" and {len(names) - MAX_NAMED} more" if len(names) > MAX_NAMED else "")


def preview(card: ApprovalCard) -> str:
    """The chat list's preview and the notification's text."""
    return f"Approval needed: {subject(card)}"


def title(card: ApprovalCard) -> str:
    if card.kind == "batch":
        return batch.title(card)
    if card.tool is not None:
        return f"Approval needed: run {card.tool.name}"
    if card.question is not None:
        return "Approval needed: a question from the agent"
    return "Approval needed: a download" if not card.packages else "Approval needed: downloads and packages"


def requested_by(card: ApprovalCard, style: Style) -> str:
    return f"Requested by {style.person(card.owner, card.owner_name)}"


def _reason_adds(card: ApprovalCard) -> bool:
    """The model's reason, unless it only repeats the URLs ("to download https://…")."""
    r = card.reason.strip()
    if not r:
        return False
    rest = r.removeprefix("to download").strip()
    for u in card.urls:
        rest = rest.replace(u, "")
    return bool(rest.strip(" ,.;"))


def asks(card: ApprovalCard, style: Style) -> str:
    """What is asked, in one plain sentence."""
    if card.kind == "batch":
        return batch.asks(card, style)
    if card.tool is not None:
        return f"The agent wants to run {style.thing(card.tool.name)} with the input below. It has not run yet."
    if card.question is not None:
        return f"The agent asks {style.thing(card.question.name)} before it goes on; the details are below."
    parts = []
    if card.urls and len(card.urls) <= 3:
        parts.append("download " + _named(card.urls, style))
    elif card.sites:
        parts.append("download from " + _named(card.sites, style))
    if card.packages:
        parts.append("install " + _named(card.packages, style))
    text = "The agent wants to " + (" and ".join(parts) or "go on") + "."
    if _reason_adds(card):
        text += f" Its reason: “{style.text(card.reason)}”"
    return text


def answer_by(card: ApprovalCard, style: Style) -> str:
    return f"Answer by {style.time(card.expires_at)}"


def approvers(card: ApprovalCard, style: Style) -> str | None:
    """Who the approvers are, as the policy names them: its label, else its listed ids (a few)."""
    policy = card.policy
    if policy is None:
        return None
    if policy.approvers_label:
        return style.text(policy.approvers_label)
    if policy.approver_ids:
        shown = [style.approver(i) for i in policy.approver_ids[:MAX_NAMED]]
        more = len(policy.approver_ids) - len(shown)
        return ", ".join(shown) + (f" and {more} more" if more > 0 else "")
    return None


def who_answers(card: ApprovalCard, style: Style) -> str:
    """Who may answer, and how many approvals it takes ("Needs 2 approvals from Security")."""
    policy = card.policy
    mode = policy.approvers if policy is not None else "owner"
    quorum = policy.quorum if policy is not None else 1
    owner = style.person(card.owner, card.owner_name)
    named = approvers(card, style)
    if quorum > 1:
        who = named or "approvers"
        return f"Needs {quorum} approvals from {who}" + (" (not the requester)" if mode == "approvers" else "")
    if mode == "approvers":
        return "An approver must answer (not the requester)" + (f": {named}" if named else "")
    if mode == "owner_or_approvers":
        return f"{owner} or an approver may answer" + (f" ({named})" if named else "")
    return f"Only {owner} may answer"


def grant_length(card: ApprovalCard) -> float | None:
    """How long an approval lasts when no duration is chosen: the policy's default, else the card's."""
    if card.policy is not None and card.policy.default_seconds is not None:
        return card.policy.default_seconds
    return card.grant_seconds


def _until(card: ApprovalCard, style: Style, seconds: float | None) -> str:
    """ "for 8 h after you approve (until about 21:14)": the end depends on when the click lands."""
    if seconds is None:
        return "for the rest of this chat"
    return f"for {hours(seconds)} after you approve (until about {style.time(card.created_at + seconds)})"


def _offered(card: ApprovalCard) -> list[str]:
    return list(card.policy.durations) if card.policy is not None else []


def _how_long(card: ApprovalCard, style: Style) -> str:
    offered = _offered(card)
    if offered:
        return "for the time you choose (" + ", ".join(duration_label(d).lower() for d in offered) + ")"
    return _until(card, style, grant_length(card))


def choices(card: ApprovalCard, style: Style) -> list[Choice]:
    """Each button and what it does, in the order shown; Deny last (its reason box sits with it)."""
    if card.kind == "batch":
        return batch.choices(card, style, _how_long(card, style))
    if card.tool is not None:
        name = style.thing(card.tool.name)
        edits = (
            [Choice("approve_edited", "Approve with edits", f"Change the input, then run {name} once with it.")]
            if card.policy is not None and card.policy.edits and card.tool.input_schema is not None
            else []
        )
        return [
            Choice("approve_once", "Approve once", f"Run {name} once, with exactly this input."),
            *edits,
            Choice(
                "approve",
                "Approve for this chat",
                f"Allow {name} with any input in this chat {_how_long(card, style)}, without asking again.",
            ),
            Choice("deny", "Deny", f"{name} does not run; the agent is told, with your reason if you give one."),
        ]
    if card.question is not None:
        return [
            Choice("approve", "Approve", "Tell the agent yes; it goes on."),
            Choice("deny", "Deny", "Tell the agent no, with your reason if you give one."),
        ]
    allow = []
    if card.sites:
        allow.append(_named(card.sites, style))
    if len(card.packages) == 1:
        allow.append("the package " + _named(card.packages, style))
    elif card.packages:
        allow.append("the packages you tick")
    what = " and ".join(allow) or "this request"
    return [
        Choice("approve", "Approve", f"Allow {what} in this chat {_how_long(card, style)}; the agent goes on now."),
        Choice("deny", "Deny", "Nothing is downloaded; the agent goes on without it and is told your reason, if any."),
    ]


def call_id(card: ApprovalCard) -> str | None:
    """The call's fingerprint, for the audit trail: shown small and muted, never as a headline."""
    if card.tool is None:
        return None
    return f"Call id {card.tool.fingerprint[:16]} (for the audit trail)"


REASON_LABEL = "Reason for denying (optional; the agent reads it)"
REASON_LABEL_SLACK = "Reason for denying (the agent reads it)"  # Slack adds "(optional)" itself
REASON_WITH_APPROVAL = (
    "A reason goes only with Deny, so nothing was approved. Clear the reason to approve, or click Deny to send it."
)


def votes(card: ApprovalCard, voters: Sequence[str]) -> str | None:
    """ "1 of 2 approvals so far: Alice" on a card that needs a quorum; `voters` already styled."""
    if card.policy is None or card.policy.quorum <= 1:
        return None
    line = f"{len(voters)} of {card.policy.quorum} approvals so far"
    return line + (": " + ", ".join(voters) if voters else "")


def grant_end(card: ApprovalCard, answer: Answer, at: float) -> float | None:
    """When the grant an approval wrote ends; None: no grant (once, a question, a deny)."""
    if card.kind == "batch":
        return None  # per item: each item's line says what it allows
    if not answer.approved or card.question is not None or answer.duration == ONCE:
        return None
    if answer.duration:
        return at + duration_seconds(answer.duration)
    seconds = grant_length(card)
    return at + seconds if seconds is not None else None


def decision(card: ApprovalCard, answer: Answer) -> str:
    """The headline word of an answered card: "Approved once", "Approved", "Denied"."""
    if card.kind == "batch":
        return batch.decision(card, answer)
    if answer.approved and answer.edited_input is not None:
        return "Approved with edits"
    if not answer.approved:
        return "Denied"
    if card.tool is not None:
        return "Approved once" if answer.duration == ONCE else "Approved for this chat"
    return "Approved"


def answered(card: ApprovalCard, answer: Answer, by: str, at: float, style: Style) -> str:
    """The answered card's sentence: the decision, by whom, when, and what it allows until when.
    `by` is already styled (a name, a mention, or several)."""
    if card.kind == "batch":
        return batch.answered(card, answer, by, at, style)
    head = f"{decision(card, answer)} by {by} at {style.time(at)}."
    if not answer.approved:
        if card.tool is not None:
            return head + f" {style.thing(card.tool.name)} did not run."
        if card.question is not None:
            return head + " The agent was told no."
        return head + " Nothing was downloaded."
    end = grant_end(card, answer, at)
    if answer.duration == ONCE:
        until = "for this turn only"
    else:  # no length known: a card stored before cards carried it
        until = f"until {style.time(end)}" if end is not None else "as the server's grant length allows"
    if card.tool is not None and answer.edited_input is not None:  # issue 32: the edited call is shown
        return head + f" {style.thing(card.tool.name)} runs once with the edited input below, not the proposed one."
    if card.tool is not None:
        name = style.thing(card.tool.name)
        if answer.duration == ONCE:
            return head + f" {name} runs once with this input; the next call asks again."
        return head + f" {name} may run with any input in this chat {until}."
    if card.question is not None:
        return head + " The agent was told yes."
    allowed = [*card.sites, *card.chosen_packages(answer)]
    text = head + f" {_named(allowed, style) if allowed else 'Nothing'} allowed in this chat {until}."
    left = card.left_out_packages(answer)
    if left:
        text += f" Not allowed: {_named(left, style)}."
    return text


def edited_call(card: ApprovalCard, answer: Answer) -> tuple[str, str] | None:
    """An approval with edits: (the approved input as JSON, its call id), for the answered card."""
    if card.tool is None or answer.edited_input is None:
        return None
    text = json.dumps(answer.edited_input, indent=2, ensure_ascii=False, sort_keys=True)
    return text, f"Call id {fingerprint_of(card.tool.name, answer.edited_input)[:16]} (as approved)"


def fingerprint_of(name: str, value: object) -> str:
    """The same SHA-256 the gate binds a call with (core/agent/tool_gate.fingerprint)."""
    return call_fingerprint(name, value)


def deny_reason(answer: Answer, style: Style) -> str | None:
    if answer.approved or not answer.reason:
        return None
    return f"Reason: “{style.text(answer.reason)}”"


def resuming(by: str) -> str:
    return f"{by} answered; the agent is continuing…"


def expired(card: ApprovalCard, style: Style) -> str:
    return f"Expired at {style.time(card.expires_at)} without an answer: nothing was approved. Ask the agent again."


def shown_again() -> str:
    return "Shown again below: this copy no longer works; use the newer one."


def styled_votes(votes_: Sequence[Vote], style: Style) -> list[str]:
    return [style.person(v.user, None) for v in votes_]


# ----------------------------------------------------------------------------- chat messages

DEMO_FETCH = "please fetch http://data.example.test/data.csv"
DEMO_NOTE = "save a note: call Alex at 3"
WHAT_I_DO = (
    "I run an AI agent for you and ask you here before it does anything that needs your say:\n"
    f'- Downloads: it asks before it reaches a site or installs a package (try "{DEMO_FETCH}").\n'
    f'- Tools: it asks before it runs a tool that needs approval (try "{DEMO_NOTE}").\n'
    "- Approvals: Approve once, or for this chat for a while; what you approved stays until it ends "
    "or you revoke it."
)
WELCOME = "Hello! " + WHAT_I_DO


# ----------------------------------------------------------------------------- timers (issue 33)


def waiting_for(card: ApprovalCard, votes_: Sequence[Vote], escalated: bool = False) -> tuple[list[str], list[str]]:
    """Who has not answered yet: (identities, policy approver entries). The requester while they
    may answer; the card's approver entries (its own front end's ids) except those who voted (a
    user group is always named: who in it voted is not known here); once `escalated`, its
    escalation approvers too."""
    policy = card.policy
    mode = policy.approvers if policy is not None else "owner"
    voted = {v.user for v in votes_}
    voted_ids = {v.user.rsplit(":", 1)[-1].lower() for v in votes_}
    people = [card.owner] if mode != "approvers" and card.owner not in voted else []
    entries = [] if policy is None or mode == "owner" else list(policy.approver_ids)
    if escalated and policy is not None:
        entries += [e for e in policy.escalate_to if e not in entries]
    return people, [e for e in entries if e.rsplit(":", 1)[-1].lower() not in voted_ids]


def _who(card: ApprovalCard, people: Sequence[str], entries: Sequence[str], style: Style) -> str:
    named = [style.person(p, card.owner_name if p == card.owner else None) for p in people]
    named += [style.approver(e) for e in entries[:MAX_NAMED]]
    if len(entries) > MAX_NAMED:
        named.append(f"{len(entries) - MAX_NAMED} more")
    if not named:
        return "its approvers"
    return named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]


def reminder(card: ApprovalCard, votes_: Sequence[Vote], style: Style, escalated: bool = False) -> str:
    """A reminder posted where the card is, naming (mentioning) those who have not answered."""
    people, entries = waiting_for(card, votes_, escalated)
    return (
        f"Reminder for {_who(card, people, entries, style)}: this approval request is still waiting "
        f"for an answer ({subject(card)}). {answer_by(card, style)}; without an answer nothing is approved."
    )


def escalated(card: ApprovalCard, style: Style) -> str:
    """Every copy of an escalated card says so, and to whom."""
    policy = card.policy
    ids = policy.escalate_to if policy is not None else []
    after = hours(policy.escalate_after) if policy is not None and policy.escalate_after else "a while"
    return f"No answer after {after}: escalated to {_who(card, [], ids, style)}, who may answer it too."


def expired_unanswered(card: ApprovalCard, style: Style) -> str:
    """A card whose expiry timer fired: every copy is updated to this."""
    return (
        f"Expired at {style.time(card.expires_at)} without an answer; the agent was told. "
        "Nothing was approved. Ask the agent again."
    )


# ----------------------------------------------------------------------------- Slack installs (issue 31)

NOT_INSTALLED = (
    "This app is not installed in your workspace (or was removed from it), so it cannot act on this card; "
    "nothing was changed. Ask an admin to install it again."
)
TOKEN_REFRESH_FAILED = (
    "Slack did not renew this app's access to your workspace just now; nothing was changed. "
    "Try again in a minute, or ask an admin to reinstall the app."
)
