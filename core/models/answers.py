"""R15: the one answer shape, and reading it from the wire (strict) or from the SDK (fail closed)."""

from __future__ import annotations

import json
from typing import Any

from chat_approvals.core.models.base import Strict
from chat_approvals.core.models.durations import MAX_REASON, clean_reason, duration_seconds
from chat_approvals.core.text import NOT_UNICODE, display_problem


class ItemAnswer(Strict):
    """The answer to one item of a `batch` card (issue 32): the same fields as an answer, for the
    item `item` (its public id)."""

    item: str
    approved: bool
    duration: str | None = None
    reason: str | None = None
    edited_input: dict[str, Any] | None = None  # a tool item approved with edits


class Answer(Strict):
    """R15: the only answer shape. `packages`, when given, is a subset of the card's; `duration`
    (with an approval) is one the card offers; `reason` (with a deny) is the approver's words.
    `items` (a `batch` card only): one answer per item, every item once; `approved` is then true
    when any item is approved. Without `items` a batch card's answer applies to every item."""

    approved: bool
    packages: list[str] | None = None
    duration: str | None = None
    reason: str | None = None
    items: list[ItemAnswer] | None = None
    # A tool card approved with edits (issue 32): the input that runs instead of the proposed one
    # (an object; checked against the tool's own input schema by the resume service).
    edited_input: dict[str, Any] | None = None

    def for_item(self, item: str, takes_duration: bool = True) -> Answer:
        """This answer as it applies to one item of a batch card (fields of no use to it dropped)."""
        if self.items is not None:
            mine = next((a for a in self.items if a.item == item), None)
            if mine is None:  # fail closed: an item nobody answered is denied
                return Answer(approved=False)
            return Answer(
                approved=mine.approved,
                duration=mine.duration if takes_duration else None,
                reason=mine.reason,
                edited_input=mine.edited_input if takes_duration else None,
            )
        return Answer(approved=self.approved, duration=self.duration if takes_duration else None, reason=self.reason)


class InvalidAnswer(ValueError):
    """Not exactly one well-formed answer: a front end refuses it (`invalid`) and changes nothing."""


ANSWER_STATUSES = ("resolved", "cancelled")
ANSWER_FIELDS = ("approved", "packages", "duration", "reason", "edited_input")
MAX_EDITED_INPUT = 16 * 1024  # characters of an edited input's canonical JSON (a card keeps as much)


def read_answer(status: object, payload: object) -> Answer:
    """R15 for front ends: accept exactly one well-formed answer, refuse everything else.

    `status` is exactly "resolved" or "cancelled". Resolved: `payload` is an object with exactly
    `approved` (a JSON bool) and, only with `approved: true`, an optional `packages` list of strings
    and an optional `duration` (`once` or N m/h/d/w; whether the card offers it is the resume
    service's check); only with `approved: false`, an optional `reason` string (control characters
    removed, at most 500 characters; an empty one is no reason). Cancelled (a deny): no payload, or
    null. Anything else raises InvalidAnswer; nothing is guessed.
    """
    if status == "cancelled":
        if payload is not None:
            raise InvalidAnswer("a cancelled answer carries no payload")
        return Answer(approved=False)
    if status != "resolved":
        raise InvalidAnswer(f"status must be one of {', '.join(ANSWER_STATUSES)}")
    if not isinstance(payload, dict):
        raise InvalidAnswer("payload must be an object")
    extra = set(payload) - set(ANSWER_FIELDS)
    if extra:
        raise InvalidAnswer(f"payload has unknown field(s): {', '.join(sorted(map(str, extra)))}")
    approved = payload.get("approved")
    if not isinstance(approved, bool):
        raise InvalidAnswer("payload.approved must be true or false")
    if approved and "reason" in payload:
        raise InvalidAnswer("payload.reason goes only with a deny")
    if not approved and ("packages" in payload or "duration" in payload):
        raise InvalidAnswer("payload.packages and payload.duration go only with an approval")
    if not approved and "edited_input" in payload:
        raise InvalidAnswer("payload.edited_input goes only with an approval: an edit with a deny is not an answer")
    fields: dict[str, Any] = {"approved": approved}
    if "packages" in payload:
        packages = payload["packages"]
        if not isinstance(packages, list) or not all(isinstance(p, str) for p in packages):
            raise InvalidAnswer("payload.packages must be a list of strings")
        fields["packages"] = list(packages)
    if "duration" in payload:
        duration = payload["duration"]
        try:
            duration_seconds(duration)
        except ValueError as e:
            raise InvalidAnswer(f"payload.duration: {e}") from None
        fields["duration"] = duration
    if "reason" in payload:
        fields["reason"] = read_reason(payload["reason"])
    if "edited_input" in payload:
        fields["edited_input"] = read_edited_input(payload["edited_input"])
    try:
        return Answer(**fields)
    except ValueError as e:  # R20: text that is not valid Unicode (a lone surrogate) is refused too
        raise InvalidAnswer(f"payload: {NOT_UNICODE}") from e


def read_edited_input(raw: object) -> dict[str, Any]:
    """An edited tool input from the wire: a JSON object of at most MAX_EDITED_INPUT characters
    (whether it fits the tool is the resume service's check, against the tool's schema)."""
    if not isinstance(raw, dict):
        raise InvalidAnswer("payload.edited_input must be an object (the tool's whole input)")
    try:
        text = json.dumps(raw, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise InvalidAnswer("payload.edited_input is not JSON") from e
    if len(text) > MAX_EDITED_INPUT:
        raise InvalidAnswer(f"payload.edited_input is longer than {MAX_EDITED_INPUT} characters of JSON")
    return dict(raw)


def read_reason(raw: object) -> str | None:
    """A deny reason from the wire: a string, cleaned, at most MAX_REASON characters; empty = none."""
    if not isinstance(raw, str):
        raise InvalidAnswer("payload.reason must be a string")
    reason = clean_reason(raw)
    problem = display_problem(reason, "payload.reason")  # R20: a bidi override would spoof the card's text
    if problem is not None:
        raise InvalidAnswer(problem)
    if len(reason) > MAX_REASON:
        raise InvalidAnswer(f"payload.reason is longer than {MAX_REASON} characters")
    return reason or None


def parse_answer(status: object, payload: object) -> Answer:
    """R15 where an answer must be interpreted (the tool reading the SDK's response), fail closed:
    only `status == "resolved"` with `{"approved": true}` (and, optionally, `"packages"`: a list of
    strings, and `"duration"`) approves. Cancelled, unknown status, a missing field, an extra field,
    a non-bool `approved`, or any other shape is a deny (keeping a deny's readable reason, cleaned
    and cut to MAX_REASON, so the model hears why)."""
    deny = Answer(approved=False)
    if status != "resolved" or not isinstance(payload, dict):
        return deny
    if payload.get("approved") is False and set(payload) <= {"approved", "reason"}:
        reason = payload.get("reason")
        cleaned = clean_reason(reason)[:MAX_REASON].strip() if isinstance(reason, str) else ""
        return Answer(approved=False, reason=cleaned) if cleaned else deny
    try:
        answer = read_answer(status, payload)
    except InvalidAnswer:
        return deny
    return answer if payload.get("approved") is True or not answer.approved else deny
