"""Every text the approval path hands the model, and the few the core says to people itself.

For the model (tool results: `NOTHING_NAMED`, `NO_CONTEXT`, `unattended_deny`, `user_denied`,
`user_approved`, `already_approved`, `invalid_input`, `tool_*`): part of the design (R6, R16), a
deny names what was blocked and gives the model a legitimate path. Same situation, same text.
For people (a turn's own text when no model reply exists: `WAITING`, `BUSY`, `REOFFERED`,
`SNAPSHOT_FAILED`, `CANNOT_OFFER`, `WITHDRAWN`, `RESUME_TOO_LONG`, `STORE_UNAVAILABLE`,
`TOO_MANY_CLICKS`, `CANNOT_ANSWER_SEVERAL`). What a person reads on a card is in
`cards/wording.py`; the offline model's replies to people in `core/agent/replies.py`."""

from __future__ import annotations

import json

from chat_approvals.core.models import ONCE, duration_label
from chat_approvals.core.protocol.subjects import describe

NOTHING_NAMED = (
    "Nothing to approve: no URLs or packages were named and the sandbox refused nothing in this turn. "
    "Name the URLs or packages you need, or run the step first so that the blocked sites are recorded."
)
NO_CONTEXT = (
    "Download approval is not available in this run (no request context was set by the server). "
    "Continue without that data and say so."
)
WAITING = "Waiting for your approval: answer the open approval card in this chat first."
USE_THE_BUTTONS = (
    "To answer the open request, use the buttons on its card above (Approve or Deny): a typed answer "
    "is not taken, so that nobody approves by accident."
)
_TYPED_ANSWERS = frozenset(
    {"yes", "y", "yep", "ok", "okay", "approve", "approved", "allow", "sure", "go ahead", "no", "deny", "n"}
)


def typed_answer(text: str) -> bool:
    """A message that reads as an answer to the open card ("yes", "approve"): answered with a
    hint to use the card's buttons; the card is not posted again for it."""
    return text.strip().strip(".!").strip().lower() in _TYPED_ANSWERS


SNAPSHOT_FAILED = (
    "I needed an approval to continue but could not save the paused turn, so no approval card was "
    "offered. Please ask again."
)
CANNOT_OFFER = "I needed an approval to continue but another approval is already open in this chat."
BUSY = "I am still working on an earlier message in this chat; send this again once it has been answered."
REOFFERED = "This chat is waiting for your approval: here is the request again (the earlier card no longer works)."
WITHDRAWN = (
    "I needed your approval to continue but could not show you the approval card, so the request was "
    "withdrawn. Please ask again."
)
RESUME_TOO_LONG = (
    "The approved step took too long: it was stopped at its deadline and the approval was treated as "
    "a deny. Please ask again."
)


def unattended_deny(sites: list[str], packages: list[str]) -> str:
    return (
        "Access denied: download approval cannot be asked in this run (nobody can answer); the "
        f"launch-time lists apply. Blocked: {describe(sites, packages)}. "
        "Continue without that data and say so."
    )


def user_denied(sites: list[str], packages: list[str], reason: str | None = None) -> str:
    text = f"Access denied: the user did not approve {describe(sites, packages)}."
    if reason:  # the approver's own words, quoted as theirs (cleaned and bounded by read_answer)
        text += f' The approver said: "{reason}".'
    return text + " Do not try to reach them another way. Continue without that data and say so."


def _how_long(duration: str | None) -> str:
    if duration is None:
        return "for the rest of this chat"
    if duration == ONCE:
        return "for this turn only (the next turn asks again)"
    return f"for {duration_label(duration).lower()} in this chat"


def user_approved(
    sites: list[str], packages: list[str], refused_packages: list[str], duration: str | None = None
) -> str:
    text = (
        f"Approved: {describe(sites, packages)} may be downloaded {_how_long(duration)}. "
        "Run the step again to download."
    )
    if refused_packages:
        text += f" Not approved: {describe([], refused_packages)}; continue without those and say so."
    return text


def already_approved(sites: list[str], packages: list[str]) -> str:
    return (
        f"Already approved in this chat: {describe(sites, packages)}. Run the step again; if it is still "
        "refused, the launch-time deny list blocks it: continue without that data and say so."
    )


def invalid_input(reason: str) -> str:
    return f"Invalid approval request: {reason}. Pass full http(s) URLs and valid package names."


STORE_UNAVAILABLE = "The approval store is unavailable right now; nothing was changed. Try again."
TOO_MANY_CLICKS = "Too many answers are being worked on right now; nothing was changed. Click again in a moment."
# --- tool-name approvals (core/agent/tool_gate.py) and other interrupts ---------------------------
CANNOT_ANSWER_SEVERAL = (
    "The agent asked to download something in the same step as other requests, which one card "
    "cannot hold, so nothing was offered and nothing ran. Please ask again, one step at a time."
)


def tool_no_context(name: str) -> str:
    return (
        f"Tool {name} needs a person's approval, which is not available in this run (no request context "
        "was set by the server). It did not run. Continue without it and say so."
    )


def tool_unattended(name: str) -> str:
    return (
        f"Access denied: {name} needs a person's approval, which cannot be asked in this run (nobody can "
        "answer). It did not run. Continue without it and say so."
    )


def tool_denied(name: str, reason: str | None) -> str:
    why = f' Their reason: "{reason}".' if reason else ""
    return (
        f"The user did not approve this call of {name}, so it did not run.{why} "
        "Do not try to do the same another way. Continue without it and say so."
    )


EDITED_PREFIX = "Edited by the approver before it ran:"


def _short(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= 200 else text[:199] + "…"


def input_changes(proposed: object, approved: object) -> str:
    """What an edit changed, key by key for objects ("text: "a" -> "b"; limit: removed")."""
    if not isinstance(proposed, dict) or not isinstance(approved, dict):
        return f"{_short(proposed)} -> {_short(approved)}"
    parts = []
    for key in sorted(set(proposed) | set(approved), key=str):
        if key not in approved:
            parts.append(f"{key}: removed")
        elif key not in proposed:
            parts.append(f"{key}: added {_short(approved[key])}")
        elif proposed[key] != approved[key]:
            parts.append(f"{key}: {_short(proposed[key])} -> {_short(approved[key])}")
    return "; ".join(parts) or "nothing"


def tool_edited(name: str, proposed: object, approved: object) -> str:
    """Told to the model with the result of a call the approver edited (issue 32)."""
    return (
        f"{EDITED_PREFIX} {name} ran with the input the user approved, not the one you proposed. "
        f"Changed: {input_changes(proposed, approved)}. Take the result below as the result of that edited call."
    )
