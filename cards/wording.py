"""Every text a person reads on a card, for all three renderers (Slack, Teams, HTTP JSON).

The texts meant for the model stay in `core/protocol/wording.py`; these are for people. Each
renderer formats the same sentences with its own `Style`: how a time reads (Slack's `<!date^…>`,
Teams' `{{DATE()}} {{TIME()}}`, ISO 8601 in JSON), how a person is named, how a name the agent
gave (a host, a tool) is quoted and escaped. A sentence says who asked, what is asked, what each
choice does and until when; nothing here reads as the approval's end unless it is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from chat_approvals.core.models import ONCE, Answer, ApprovalCard, Vote, duration_label, duration_seconds

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
    if card.tool is not None:
        name = style.thing(card.tool.name)
        return [
            Choice("approve_once", "Approve once", f"Run {name} once, with exactly this input."),
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
    if not answer.approved or card.question is not None or answer.duration == ONCE:
        return None
    if answer.duration:
        return at + duration_seconds(answer.duration)
    seconds = grant_length(card)
    return at + seconds if seconds is not None else None


def decision(card: ApprovalCard, answer: Answer) -> str:
    """The headline word of an answered card: "Approved once", "Approved", "Denied"."""
    if not answer.approved:
        return "Denied"
    if card.tool is not None:
        return "Approved once" if answer.duration == ONCE else "Approved for this chat"
    return "Approved"


def answered(card: ApprovalCard, answer: Answer, by: str, at: float, style: Style) -> str:
    """The answered card's sentence: the decision, by whom, when, and what it allows until when.
    `by` is already styled (a name, a mention, or several)."""
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

# ----------------------------------------------------------------------------- Slack installs (issue 31)

NOT_INSTALLED = (
    "This app is not installed in your workspace (or was removed from it), so it cannot act on this card; "
    "nothing was changed. Ask an admin to install it again."
)
TOKEN_REFRESH_FAILED = (
    "Slack did not renew this app's access to your workspace just now; nothing was changed. "
    "Try again in a minute, or ask an admin to reinstall the app."
)
