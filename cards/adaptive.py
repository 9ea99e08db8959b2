"""Adaptive Card 1.5 renderers for Microsoft Teams (the invoke parser is cards/adaptive_parse.py).

Pure functions: card model -> card JSON (a plain dict, ready for an attachment), and the
invoke answers' wire bodies. Imports only `core.models`: nothing here knows botbuilder.

The approve/deny buttons are `Action.Execute` (Universal Actions) whose `data` holds the card
id and the one-time secret and nothing else: who clicked comes from the activity, never from
the card (R4). When the card lists several packages, a multi-select choice lets the person
approve a subset; Teams merges that input into `data` under `packages` (R15: a subset).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from chat_approvals.cards.subject_text import question_fields, readable_input, short_fingerprint
from chat_approvals.core.models import (
    MAX_REASON,
    ONCE,
    Answer,
    ApprovalCard,
    Grant,
    TurnResult,
    duration_label,
)

CONTENT_TYPE = "application/vnd.microsoft.card.adaptive"
ERROR_CONTENT_TYPE = "application/vnd.microsoft.error"
SCHEMA_URL = "http://adaptivecards.io/schemas/adaptive-card.json"
VERSION = "1.5"

VERB_APPROVE = "approve"
VERB_APPROVE_ONCE = "approve_once"  # a tool card: this call only, no grant
REASON_INPUT = "reason"  # the optional deny reason (Input.Text)
MAX_INPUT_SHOWN = 4000  # a tool call's input shown on the card
VERB_DENY = "deny"
VERB_REVOKE = "revoke"
PACKAGES_INPUT = "packages"
DURATION_INPUT = "duration"
REASON_INPUT = "reason"
REVOKE_ALL = "all"

Card = dict[str, Any]
RefusalKind = Literal["forbidden", "expired", "in_progress", "answered", "unknown", "invalid"]


# --------------------------------------------------------------------------- small helpers


def _text(text: str, **style: Any) -> dict[str, Any]:
    return {"type": "TextBlock", "text": text, "wrap": True, **style}


def _title(text: str, color: str | None = None) -> dict[str, Any]:
    block = _text(text, weight="Bolder", size="Medium")
    if color:
        block["color"] = color
    return block


def _card(body: list[dict[str, Any]], actions: list[dict[str, Any]] | None = None) -> Card:
    card: Card = {"type": "AdaptiveCard", "$schema": SCHEMA_URL, "version": VERSION, "body": body}
    if actions:
        card["actions"] = actions
    return card


def _escape(text: str) -> str:
    """Model- or user-supplied text must not become a link or markup the agent did not mean:
    escape only what builds links and tags, so URLs and names still read as they are."""
    out = text.replace("\\", "\\\\")
    for ch in ("[", "]", "<", ">"):
        out = out.replace(ch, "\\" + ch)
    return out


def format_time(epoch: float) -> str:
    """An absolute UTC time a person can read (the card shows the logical expiry, R8)."""
    return _dt.datetime.fromtimestamp(epoch, tz=_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _listing(items: Iterable[str]) -> str:
    return "\n".join(f"- {_escape(i)}" for i in items)


def _what(card: ApprovalCard) -> list[dict[str, Any]]:
    if card.tool is not None or card.question is not None:
        return _call_what(card)
    facts: list[dict[str, str]] = []
    if card.reason:
        facts.append({"title": "Why", "value": _escape(card.reason)})
    if card.sites:
        facts.append({"title": "Sites", "value": ", ".join(_escape(s) for s in card.sites)})
    if card.packages:
        facts.append({"title": "Packages", "value": ", ".join(_escape(p) for p in card.packages)})
    facts.append({"title": "Expires", "value": format_time(card.expires_at)})
    body: list[dict[str, Any]] = [{"type": "FactSet", "facts": facts}]
    if card.urls:
        body.append(_text("URLs", weight="Bolder", spacing="Small"))
        body.append(_text(_listing(card.urls), isSubtle=True, spacing="None"))
    return body


def _call_what(card: ApprovalCard) -> list[dict[str, Any]]:
    """A tool call (its name, its input as monospace JSON, its fingerprint) or a question (its
    reason's fields)."""
    facts: list[dict[str, str]] = []
    body: list[dict[str, Any]] = []
    if card.tool is not None:
        facts.append({"title": "Tool", "value": _escape(card.tool.name)})
        facts.append({"title": "Call", "value": short_fingerprint(card)})
        facts.append({"title": "Expires", "value": format_time(card.expires_at)})
        body.append({"type": "FactSet", "facts": facts})
        body.append(_text("Input", weight="Bolder", spacing="Small"))
        body.append(_text(_escape(readable_input(card, MAX_INPUT_SHOWN)), fontType="Monospace", spacing="None"))
        return body
    assert card.question is not None
    facts.append({"title": "Question", "value": _escape(card.question.name)})
    facts += [{"title": _escape(t), "value": _escape(v)} for t, v in question_fields(card, 1000)]
    facts.append({"title": "Expires", "value": format_time(card.expires_at)})
    return [{"type": "FactSet", "facts": facts}]


def _answer_words(card: ApprovalCard, answer: Answer) -> str:
    if not answer.approved:
        if card.kind != "download" and answer.reason:
            return f"Denied ({_escape(answer.reason)})"  # a tool or question card: the reason in the title
        return "Denied"
    if card.tool is not None and answer.duration in (None, ONCE):
        return "Approved once" if answer.duration == ONCE else "Approved for this chat"
    words = "Approved"
    if answer.duration:
        words += f" for {duration_label(answer.duration).lower()}"
    chosen = card.chosen_packages(answer)
    if chosen != card.packages:
        listed = ", ".join(_escape(p) for p in chosen) or "no packages"
        words += f" (packages: {listed})"
    return words


def _reason_block(card: ApprovalCard, answer: Answer) -> list[dict[str, Any]]:
    if card.kind != "download" or not answer.reason or answer.approved:
        return []  # a tool or question card says the reason in its title (_answer_words)
    return [_text(f"Reason: “{_escape(answer.reason)}”")]


def votes_line(card: ApprovalCard, names: list[str]) -> str | None:
    """ "1 of 2 approvals: Alice" on a card that needs a quorum; None otherwise."""
    if card.policy is None or card.policy.quorum <= 1:
        return None
    line = f"{len(names)} of {card.policy.quorum} approvals"
    return line + (": " + ", ".join(_escape(n) for n in names) if names else "")


def who_may_answer(card: ApprovalCard, owner_name: str | None = None) -> str:
    mode = card.policy.approvers if card.policy is not None else "owner"
    owner = _escape(owner_name) if owner_name else "the person who asked"
    if mode == "approvers":
        return "An approver must answer (not the requester)."
    if mode == "owner_or_approvers":
        return f"{owner} or an approver may answer."
    return f"Only {owner} may answer."


# --------------------------------------------------------------------------- renderers


def _call_card(card: ApprovalCard, secret: str, voters: list[str] | None, link: str | None) -> Card:
    """A tool card (Approve once / Approve for this chat / Deny) or a question card (Approve /
    Deny), with an optional deny reason that Deny sends along."""
    data = {"card_id": card.card_id, "secret": secret}
    if card.tool is not None:
        intro = f"The agent wants to run {_escape(card.tool.name)}. It has not run yet."
        approvals = [
            {
                "type": "Action.Execute",
                "title": "Approve once",
                "verb": VERB_APPROVE_ONCE,
                "style": "positive",
                "associatedInputs": "none",
                "data": data,
            },
            {
                "type": "Action.Execute",
                "title": "Approve for this chat",
                "verb": VERB_APPROVE,
                "associatedInputs": "none",
                "data": data,
            },
        ]
    else:
        intro = "The agent asks a question before it goes on."
        approvals = [
            {
                "type": "Action.Execute",
                "title": "Approve",
                "verb": VERB_APPROVE,
                "style": "positive",
                "associatedInputs": "none",
                "data": data,
            }
        ]
    deny = {
        "type": "Action.Execute",
        "title": "Deny",
        "verb": VERB_DENY,
        "style": "destructive",
        "associatedInputs": "auto",
        "data": data,
    }
    reason = {
        "type": "Input.Text",
        "id": REASON_INPUT,
        "label": "Reason for a deny (optional; the agent is told)",
        "maxLength": MAX_REASON,
        "isRequired": False,
    }
    extra = [_text(f"Asked in [this conversation]({link}).")] if link else []
    tally = votes_line(card, voters or [])
    if tally:
        extra.append(_text(tally))
    extra.append(_text(who_may_answer(card), isSubtle=True))
    return _card([_title("Approval needed"), _text(intro), *_what(card), *extra, reason], [*approvals, deny])


def approval_card(card: ApprovalCard, secret: str, voters: list[str] | None = None, link: str | None = None) -> Card:
    """The question: what, why, sites, URLs, packages (a choice when several), expiry; two buttons.
    With a policy: who may answer, the votes so far (`voters`: display names), a duration choice
    and an optional deny reason; `link` (routing) points at the requesting conversation."""
    if card.kind != "download":
        return _call_card(card, secret, voters, link)
    body: list[dict[str, Any]] = [
        _title("Approval needed"),
        _text("The agent paused its turn and asks to download from outside its sandbox."),
        *_what(card),
    ]
    if link:
        body.append(_text(f"[Open the requesting conversation]({link})"))
    if card.policy is not None:
        body.append(_text(who_may_answer(card), isSubtle=True))
        tally = votes_line(card, voters or [])
        if tally:
            body.append(_text(tally, weight="Bolder"))
    approve: dict[str, Any] = {
        "type": "Action.Execute",
        "title": "Approve",
        "verb": VERB_APPROVE,
        "style": "positive",
        "data": {"card_id": card.card_id, "secret": secret},
    }
    if len(card.packages) > 1:
        body.append(
            {
                "type": "Input.ChoiceSet",
                "id": PACKAGES_INPUT,
                "label": "Packages to allow",
                "isMultiSelect": True,
                "style": "expanded",
                "value": ",".join(card.packages),
                "choices": [{"title": p, "value": p} for p in card.packages],
            }
        )
        approve["associatedInputs"] = "auto"
    policy = card.policy
    if policy is not None and policy.durations:
        body.append(
            {
                "type": "Input.ChoiceSet",
                "id": DURATION_INPUT,
                "label": "Approve for",
                "style": "compact",
                "isRequired": True,
                "value": policy.default_duration or policy.durations[0],
                "choices": [{"title": duration_label(d), "value": d} for d in policy.durations],
            }
        )
        approve["associatedInputs"] = "auto"
    deny: dict[str, Any] = {
        "type": "Action.Execute",
        "title": "Deny",
        "verb": VERB_DENY,
        "style": "destructive",
        "associatedInputs": "none",
        "data": {"card_id": card.card_id, "secret": secret},
    }
    if policy is not None:
        body.append(
            {
                "type": "Input.Text",
                "id": REASON_INPUT,
                "label": "Reason, if you deny (optional; the agent reads it)",
                "isMultiline": True,
                "maxLength": MAX_REASON,
            }
        )
        deny["associatedInputs"] = "auto"
    return _card(body, [approve, deny])


def resolved_card(card: ApprovalCard, answer: Answer, by: str) -> Card:
    """Shown right after the claim is won: the answer is recorded, the turn is resuming."""
    return _card(
        [
            _title(f"{_answer_words(card, answer)} by {_escape(by)}", "Good" if answer.approved else "Attention"),
            *_reason_block(card, answer),
            *_what(card),
            _text("Resuming the agent's turn…", isSubtle=True),
        ]
    )


def outcome_card(
    card: ApprovalCard,
    answer: Answer,
    by: str,
    at: float,
    result: TurnResult | None = None,
) -> Card:
    """The final state of the question card once the resumed turn has finished."""
    body = [
        _title(f"{_answer_words(card, answer)} by {_escape(by)}", "Good" if answer.approved else "Attention"),
        *_reason_block(card, answer),
        *_what(card),
        _text(f"Answered {format_time(at)}.", isSubtle=True),
    ]
    if result is not None and result.status == "awaiting_approval":
        body.append(_text("The agent needs one more approval: see the next card."))
    elif result is not None and result.status == "answered":
        body.append(_text("The agent's turn finished: see its reply below.", isSubtle=True))
    return _card(body)


def shown_again_card(card: ApprovalCard) -> Card:
    """An earlier copy of a card its owner was shown again (with a new secret, R19): read-only,
    pointing at the newer card below it (and below it in the approvers' conversation if routed)."""
    return _card(
        [
            _title("Shown again below"),
            _text("This copy of the request no longer works: use the newer card.", isSubtle=True),
            *_what(card),
        ]
    )


_REFUSAL_TITLES: Mapping[str, str] = {
    "forbidden": "Not yours to answer",
    "expired": "This request has expired",
    "in_progress": "Already being answered",
    "answered": "Already answered",
    "unknown": "Unknown request",
    "invalid": "Could not read that answer",
}


def refusal_card(
    kind: RefusalKind,
    message: str = "",
    *,
    card: ApprovalCard | None = None,
    owner: str | None = None,
) -> Card:
    """A read-only card: the click changed nothing. No buttons, so nothing can be clicked again."""
    body: list[dict[str, Any]] = [_title(_REFUSAL_TITLES[kind], "Warning")]
    if kind == "forbidden" and (card is None or card.policy is None):  # with a policy, `message` says who may
        who = _escape(owner) if owner else "the person who asked"
        body.append(_text(f"Only {who} may answer this request."))
    if message:
        body.append(_text(_escape(message)))
    if card is not None:
        body.extend(_what(card))
    return _card(body)


def grants_card(grants: list[Grant]) -> Card:
    """The user's approvals in this chat, each with its own Revoke button (R14)."""
    if not grants:
        return _card([_title("Your approvals"), _text("You have no approvals in this chat.")])
    body: list[dict[str, Any]] = [_title("Your approvals")]
    for g in grants:
        kind = {"site": "Site", "package": "Package", "tool": "Tool"}[g.kind]
        body.append(
            {
                "type": "ColumnSet",
                "columns": [
                    {
                        "type": "Column",
                        "width": "stretch",
                        "items": [
                            _text(f"{kind}: {_escape(g.name)}", weight="Bolder"),
                            _text(f"until {format_time(g.expires_at)}", isSubtle=True, spacing="None"),
                        ],
                    },
                    {
                        "type": "Column",
                        "width": "auto",
                        "verticalContentAlignment": "Center",
                        "items": [
                            {
                                "type": "ActionSet",
                                "actions": [
                                    {
                                        "type": "Action.Execute",
                                        "title": "Revoke",
                                        "tooltip": f"Revoke {g.name}",
                                        "verb": VERB_REVOKE,
                                        "data": {"subject": g.revoke_subject},
                                    }
                                ],
                            }
                        ],
                    },
                ],
            }
        )
    actions = [
        {
            "type": "Action.Execute",
            "title": "Revoke all",
            "verb": VERB_REVOKE,
            "data": {"subject": REVOKE_ALL},
        }
    ]
    return _card(body, actions)


def revoked_card(revoked: list[Grant], remaining: list[Grant]) -> Card:
    """After a Revoke click: what went, then the list as it is now."""
    card = grants_card(remaining)
    names = ", ".join(sorted({_escape(g.name) for g in revoked}))
    note = f"Revoked: {names}." if revoked else "Nothing to revoke."
    card["body"].insert(1, _text(note, color="Attention"))
    return card


def message_card(title: str, text: str) -> Card:
    """A plain informational card (help, notices)."""
    return _card([_title(title), _text(text)])


def invoke_response_body(card: Card) -> dict[str, Any]:
    """The wire body of a successful `adaptiveCard/action` answer: the card that replaces the old one."""
    return {"statusCode": 200, "type": CONTENT_TYPE, "value": card}


def invoke_error_body(status: int, message: str) -> dict[str, Any]:
    """The wire body of a refused invoke (Universal Actions error response)."""
    code = "BadRequest" if status == 400 else "Error"
    return {"statusCode": status, "type": ERROR_CONTENT_TYPE, "value": {"code": code, "message": message}}
