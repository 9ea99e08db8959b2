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
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from chat_approvals.cards import wording as words
from chat_approvals.cards.edit_fields import editable
from chat_approvals.cards.subject_text import question_fields, readable_input
from chat_approvals.core.models import (
    MAX_REASON,
    Answer,
    ApprovalCard,
    Grant,
    TurnResult,
    Vote,
    duration_label,
)

CONTENT_TYPE = "application/vnd.microsoft.card.adaptive"
ERROR_CONTENT_TYPE = "application/vnd.microsoft.error"
SCHEMA_URL = "http://adaptivecards.io/schemas/adaptive-card.json"
VERSION = "1.5"

VERB_APPROVE = "approve"
VERB_APPROVE_ONCE = "approve_once"  # a tool card: this call only, no grant
REASON_INPUT = "reason"  # the optional deny reason (Input.Text, in Deny's own show-card)
CONFIRM_DENY = "Confirm deny"
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


def card_time(epoch: float) -> str:
    """A time Teams shows in the reader's own time zone (Adaptive Cards' DATE/TIME functions)."""
    iso = _dt.datetime.fromtimestamp(int(epoch), tz=_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{{{{DATE({iso}, SHORT)}}}} {{{{TIME({iso})}}}}"


def _person(user: str, name: str | None) -> str:
    return _escape(name) if name else _escape(user)


STYLE = words.Style(time=card_time, person=_person, thing=_escape, text=_escape, approver=_escape)


def _what(card: ApprovalCard, open_card: bool = False) -> list[dict[str, Any]]:
    """What is asked for; an open card's own sentence already names a few URLs: not repeated."""
    if card.kind == "batch":  # issue 32: every item (cards/adaptive_batch.py)
        from chat_approvals.cards import adaptive_batch

        return adaptive_batch.items_body(card, open_card, _escape, STYLE)
    if card.tool is not None or card.question is not None:
        return _call_what(card)
    body: list[dict[str, Any]] = []
    if card.urls and (not open_card or len(card.urls) > 3):
        body.append(_text("URLs", weight="Bolder", spacing="Small"))
        body.append(_text(_listing(card.urls), spacing="None"))
    elif card.sites and not open_card:
        body.append(_text("Sites: " + ", ".join(_escape(s) for s in card.sites)))
    if card.packages and (not open_card or len(card.packages) > 5):
        body.append(_text("Packages: " + ", ".join(_escape(p) for p in card.packages)))
    return body


def _call_what(card: ApprovalCard) -> list[dict[str, Any]]:
    """A tool call (its input as monospace JSON) or a question (its reason's fields)."""
    if card.tool is not None:
        return [
            _text("Input", weight="Bolder", spacing="Small"),
            _text(_escape(readable_input(card, MAX_INPUT_SHOWN)), fontType="Monospace", spacing="None"),
        ]
    assert card.question is not None
    facts = [{"title": _escape(t), "value": _escape(v)} for t, v in question_fields(card, 1000)]
    return [{"type": "FactSet", "facts": facts}] if facts else []


def _ids(card: ApprovalCard) -> dict[str, Any]:
    """Small, muted: the ids kept for the audit trail (never a headline)."""
    parts = [f"Card {card.card_id}"]
    call = words.call_id(card)
    if call:
        parts.append(call)
    return _text(" · ".join(parts), isSubtle=True, size="Small", spacing="Small")


def votes_line(card: ApprovalCard, names: list[str]) -> str | None:
    """ "1 of 2 approvals so far: Alice" on a card that needs a quorum; None otherwise."""
    return words.votes(card, [_escape(n) for n in names])


# --------------------------------------------------------------------------- renderers


def _execute(title: str, verb: str, data: dict[str, str], inputs: str, style: str | None = None) -> dict[str, Any]:
    action: dict[str, Any] = {"type": "Action.Execute", "title": title, "verb": verb, "associatedInputs": inputs}
    if style:
        action["style"] = style
    action["data"] = data
    return action


def _reason_input() -> dict[str, Any]:
    return {
        "type": "Input.Text",
        "id": REASON_INPUT,
        "label": words.REASON_LABEL,
        "isMultiline": True,
        "maxLength": MAX_REASON,
        "isRequired": False,
    }


def _deny(card: ApprovalCard, data: dict[str, str]) -> dict[str, Any]:
    """Deny opens its own small card holding the reason: the reason is never near Approve."""
    reason = _reason_input()
    confirm = _execute(CONFIRM_DENY, VERB_DENY, data, "auto", "destructive")
    return {
        "type": "Action.ShowCard",
        "title": "Deny all" if card.kind == "batch" else "Deny",
        "card": {"type": "AdaptiveCard", "body": [reason], "actions": [confirm]},
    }


def approval_card(card: ApprovalCard, secret: str, voters: list[str] | None = None, link: str | None = None) -> Card:
    """The question: who asked, what, what each choice does and until when, Answer by. When several
    packages are asked, a choice of which; with a policy, a duration choice and the votes so far
    (`voters`: display names); `link` (routing) points at the requesting conversation."""
    data = {"card_id": card.card_id, "secret": secret}
    body: list[dict[str, Any]] = [
        _title(words.title(card)),
        _text(words.requested_by(card, STYLE), weight="Bolder", spacing="Small"),
        _text(words.asks(card, STYLE), spacing="None"),
        *_what(card, open_card=True),
    ]
    if link:
        body.append(_text(f"[Open the requesting conversation]({link})"))
    inputs = "none"
    if card.kind == "download" and len(card.packages) > 1:
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
        inputs = "auto"
    policy = card.policy
    if card.kind != "question" and policy is not None and policy.durations:
        body.append(
            {
                "type": "Input.ChoiceSet",
                "id": DURATION_INPUT,
                "label": "Approve for how long",
                "style": "compact",
                "isRequired": True,
                "value": policy.default_duration or policy.durations[0],
                "choices": [{"title": duration_label(d), "value": d} for d in policy.durations],
            }
        )
        inputs = "auto"
    tally = votes_line(card, voters or [])
    if tally:
        body.append(_text(tally, weight="Bolder"))
    body.append(_text("\n".join(f"- **{c.label}**: {c.does}" for c in words.choices(card, STYLE))))
    body.append(_text(words.answer_by(card, STYLE) + " · " + words.who_answers(card, STYLE), weight="Bolder"))
    body.append(_ids(card))
    if card.kind == "batch":
        from chat_approvals.cards import adaptive_batch

        approvals = [_execute("Approve all once", VERB_APPROVE_ONCE, data, "none", "positive")]
        if any(i.tool is not None for i in card.items):
            approvals.append(_execute("Approve all for this chat", VERB_APPROVE, data, inputs))
        approvals.append(adaptive_batch.decide_each(data, _reason_input()))
    elif card.tool is not None:
        approvals = [
            _execute("Approve once", VERB_APPROVE_ONCE, data, "none", "positive"),
            _execute("Approve for this chat", VERB_APPROVE, data, inputs),
        ]
        if editable(card):  # issue 32: approve with edits
            from chat_approvals.cards import adaptive_batch

            approvals.append(adaptive_batch.edit_action(card, data, _escape))
    else:
        approvals = [_execute("Approve", VERB_APPROVE, data, inputs, "positive")]
    return _card(body, [*approvals, _deny(card, data)])


def _answered_body(card: ApprovalCard, answer: Answer, by: str, at: float) -> list[dict[str, Any]]:
    """The decision, by whom, when, and the grant's end; the reason of a deny; what was asked."""
    body = [
        _title(words.decision(card, answer), "Good" if answer.approved else "Attention"),
        _text(words.answered(card, answer, _escape(by), at, STYLE), spacing="Small"),
    ]
    reason = words.deny_reason(answer, STYLE)
    if reason:
        body.append(_text(reason))
    edited = words.edited_call(card, answer)
    if edited is not None:  # R22: the call exactly as approved
        body.append(_text("Input as approved (edited)", weight="Bolder", spacing="Small"))
        body.append(_text(_escape(edited[0]), fontType="Monospace", spacing="None"))
        body.append(_text(edited[1], isSubtle=True, size="Small", spacing="None"))
        body.append(_text("Proposed by the agent (not run as proposed):", weight="Bolder", spacing="Small"))
    body.append(_text(words.requested_by(card, STYLE), isSubtle=True))
    return [*body, *_what(card)]


def resolved_card(card: ApprovalCard, answer: Answer, by: str, at: float | None = None) -> Card:
    """Shown right after the claim is won: the answer is recorded, the turn is resuming."""
    when = at if at is not None else _dt.datetime.now(_dt.UTC).timestamp()
    return _card(
        [*_answered_body(card, answer, by, when), _text("Resuming the agent's turn…", isSubtle=True), _ids(card)]
    )


def outcome_card(
    card: ApprovalCard,
    answer: Answer,
    by: str,
    at: float,
    result: TurnResult | None = None,
) -> Card:
    """The final state of the question card once the resumed turn has finished."""
    body = _answered_body(card, answer, by, at)
    if result is not None and result.status == "awaiting_approval":
        body.append(_text("The agent needs one more approval: see the next card."))
    elif result is not None and result.status == "answered":
        body.append(_text("The agent's turn finished: see its reply below.", isSubtle=True))
    body.append(_ids(card))
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
    card["body"].insert(1, _text(note, isSubtle=True))  # a confirmation, not an error
    return card


def message_card(title: str, text: str) -> Card:
    """A plain informational card (help, notices)."""
    return _card([_title(title), _text(text)])


def all_actions(card: Card) -> list[dict[str, Any]]:
    """Every action a person can reach, a show-card's own actions in place of the show-card
    (Deny opens a small card holding the reason and the Deny that sends it)."""
    out: list[dict[str, Any]] = []
    for a in card.get("actions", []):
        out.extend(all_actions(a["card"]) if a.get("type") == "Action.ShowCard" else [a])
    return out


def all_inputs(card: Card) -> dict[str, dict[str, Any]]:
    """The card's inputs by id, those inside a show-card included."""
    found = {b["id"]: b for b in card.get("body", []) if str(b.get("type", "")).startswith("Input.")}
    for a in card.get("actions", []):
        if a.get("type") == "Action.ShowCard":
            found.update(all_inputs(a["card"]))
    return found


def invoke_response_body(card: Card) -> dict[str, Any]:
    """The wire body of a successful `adaptiveCard/action` answer: the card that replaces the old one."""
    return {"statusCode": 200, "type": CONTENT_TYPE, "value": card}


def invoke_error_body(status: int, message: str) -> dict[str, Any]:
    """The wire body of a refused invoke (Universal Actions error response)."""
    code = "BadRequest" if status == 400 else "Error"
    return {"statusCode": status, "type": ERROR_CONTENT_TYPE, "value": {"code": code, "message": message}}


# ----------------------------------------------------------------------------- timers (issue 33)


def expired_unanswered_card(card: ApprovalCard) -> Card:
    """Every copy of a card whose expiry timer fired, replaced in place: read-only."""
    return _card(
        [
            _title("Expired without an answer", "Warning"),
            _text(words.expired_unanswered(card, STYLE)),
            *_what(card),
            _ids(card),
        ]
    )


def reminder_text(
    card: ApprovalCard, votes: Sequence[Vote], mention: Callable[[str], str], escalated: bool = False
) -> str:
    """A reminder in the card's conversation; `mention` writes a person as an `<at>` mention."""
    # a message, not a card: Adaptive Cards' DATE()/TIME() are not rendered there, so plain UTC
    style = words.Style(
        time=format_time, person=lambda u, _n: mention(u), thing=_escape, text=_escape, approver=mention
    )
    return words.reminder(card, votes, style, escalated)


def with_notice(card: Card, text: str) -> Card:
    """A card with a line above it (an escalation's "escalated to …")."""
    return {**card, "body": [_text(text, weight="Bolder", color="Attention"), *card["body"]]}


def escalated_text(card: ApprovalCard) -> str:
    return words.escalated(card, STYLE)
