"""The plain JSON front end's shapes: rendering results, and parsing a resume body into a typed answer."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from chat_approvals.cards import wording as words
from chat_approvals.core.identity import stated_http_user
from chat_approvals.core.models import (
    MAX_REASON,
    ONCE,
    Answer,
    ApprovalCard,
    Grant,
    InvalidAnswer,
    ResumeResult,
    TurnResult,
    Vote,
    read_answer,
)


class TurnRequest(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")
    chat: str
    user: str
    text: str
    unattended: bool = False


class _Entry(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")
    interruptId: str
    status: str
    payload: Any = None


class _ResumeBody(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")
    user: str
    secret: str
    responses: list[_Entry]


class ResumeRequest(BaseModel):
    model_config = ConfigDict(frozen=True)
    user: str
    secret: str
    answer: Answer


class BadRequest(ValueError):
    """The body is not the shape this endpoint takes; the message says why."""


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise BadRequest(f"duplicate key {key!r} in the JSON body")
        obj[key] = value
    return obj


def _no_constant(name: str) -> Any:
    raise BadRequest(f"{name} is not JSON")


def loads_strict(raw: bytes) -> Any:
    """JSON as RFC 8259 has it, plus: no duplicate keys (which one would win is a parser's whim,
    and `{"approved": false, "approved": true}` must not approve), no NaN/Infinity."""
    try:
        return json.loads(raw, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except BadRequest:
        raise
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
        raise BadRequest("the body is not UTF-8 JSON") from e


M = TypeVar("M", bound=BaseModel)


def _validate(model: type[M], raw: bytes) -> M:
    try:
        return model.model_validate(loads_strict(raw))
    except ValidationError as e:
        raise BadRequest(_first_error(e)) from e


NOT_AN_HTTP_USER = "user: not an HTTP user (the slack: and teams: namespaces and control characters are refused)"


def parse_resume(card_id: str, raw: bytes) -> ResumeRequest:
    """R15 for HTTP: exactly one well-formed entry naming this card, or BadRequest (422, nothing changes)."""
    body = _validate(_ResumeBody, raw)
    if not body.user or not body.secret:
        raise BadRequest("user and secret must be non-empty")
    if stated_http_user(body.user) is None:
        raise BadRequest(NOT_AN_HTTP_USER)
    if len(body.responses) != 1:
        raise BadRequest("responses must hold exactly one entry")
    entry = body.responses[0]
    if entry.interruptId != card_id:
        raise BadRequest("responses[0].interruptId must be this card's id")
    fields = entry.model_fields_set
    try:
        answer = read_answer(entry.status, entry.payload if "payload" in fields else None)
    except InvalidAnswer as e:
        raise BadRequest(str(e)) from e
    if entry.status == "resolved" and "payload" not in fields:
        raise BadRequest("a resolved answer needs its payload")
    return ResumeRequest(user=body.user, secret=body.secret, answer=answer)


def parse_turn(raw: bytes) -> TurnRequest:
    req = _validate(TurnRequest, raw)
    if not req.chat or not req.user or not req.text.strip():
        raise BadRequest("chat, user and text must be non-empty")
    if stated_http_user(req.user) is None:
        raise BadRequest(NOT_AN_HTTP_USER)
    return req


def _first_error(e: ValidationError) -> str:
    err = e.errors()[0]
    where = ".".join(str(p) for p in err.get("loc", ())) or "body"
    return f"{where}: {err.get('msg', 'invalid')}"


def card_body(card: ApprovalCard, secret: str | None = None, votes: list[Vote] | None = None) -> dict[str, Any]:
    """The card as JSON: `kind` (`download` | `tool` | `question`); a tool card carries `tool`
    (`name`, `input`, `fingerprint`, `truncated`), a question card `question` (`name`, `reason`).
    With a policy: `approvers` (the mode), `quorum`, `votes` (users so far), `durations`
    (offered; empty: none to choose) and `default_duration`."""
    body = card.model_dump(exclude={"policy"})
    for key in ("tool", "question"):
        if body.get(key) is None:
            body.pop(key, None)
    body["expires_at_iso"] = iso(card.expires_at)
    if card.policy is not None:
        body["approvers"] = card.policy.approvers
        body["quorum"] = card.policy.quorum
        body["votes"] = [v.user for v in votes or []]
        body["durations"] = list(card.policy.durations)
        body["default_duration"] = card.policy.default_duration
    body["text"] = card_text(card, votes or [])
    # AG-UI's interrupt fields (issue 33): when it expires, and the JSON Schema of its answer
    body["expiresAt"] = iso(card.expires_at)
    body["responseSchema"] = response_schema(card)
    if secret is not None:
        body["secret"] = secret
    return body


JSON_SCHEMA = "https://json-schema.org/draft/2020-12/schema"


def offered_durations(card: ApprovalCard) -> list[str]:
    """What `duration` may be (core/protocol/card_kinds.answer_problem): the policy's; a tool card
    also takes `once`; a question card none."""
    offered = list(card.policy.durations) if card.policy is not None else []
    if card.kind == "tool" and ONCE not in offered:
        offered.insert(0, ONCE)
    return [] if card.kind == "question" else offered


def response_schema(card: ApprovalCard) -> dict[str, Any]:
    """The JSON Schema of the payload this card accepts (R15), generated from the card: `approved`;
    `packages` (a subset of the card's); `duration` (one it offers, with an approval); `reason`
    (with a deny). What the resume refuses, the schema refuses; the server still checks."""
    props: dict[str, Any] = {"approved": {"type": "boolean", "description": "true approves; false denies"}}
    if card.kind == "download" and card.packages:
        props["packages"] = {
            "type": "array",
            "items": {"enum": list(card.packages)},
            "uniqueItems": True,
            "description": "the packages approved (default: all of them)",
        }
    durations = offered_durations(card)
    if durations:
        props["duration"] = {"enum": durations, "description": "how long the approval lasts (once: this turn only)"}
    props["reason"] = {"type": "string", "maxLength": MAX_REASON, "description": "with a deny: why (the agent is told)"}
    rules: list[dict[str, Any]] = [
        {"if": {"properties": {"approved": {"const": True}}}, "then": {"not": {"required": ["reason"]}}},
    ]
    if durations:
        rules.append(
            {"if": {"properties": {"approved": {"const": False}}}, "then": {"not": {"required": ["duration"]}}}
        )
    return {
        "$schema": JSON_SCHEMA,
        "type": "object",
        "properties": props,
        "required": ["approved"],
        "additionalProperties": False,
        "allOf": rules,
    }


def _plain(text: str) -> str:
    return text


def _person(user: str, name: str | None) -> str:
    return name or user


def _second(t: float) -> str:
    return iso(int(t))  # a sentence reads whole seconds


STYLE = words.Style(time=_second, person=_person, thing=_plain, text=_plain)


def card_text(card: ApprovalCard, votes: list[Vote]) -> dict[str, Any]:
    """What a person reads, the same sentences as on Slack and Teams (times in ISO 8601, UTC):
    `title`, `requested_by`, `asks`, `answer_by`, `who_answers`, `choices` (each `answer`, `label`,
    `does`), `votes` (a quorum in progress), `call_id` (a tool card)."""
    out: dict[str, Any] = {
        "title": words.title(card),
        "requested_by": words.requested_by(card, STYLE),
        "asks": words.asks(card, STYLE),
        "answer_by": words.answer_by(card, STYLE),
        "who_answers": words.who_answers(card, STYLE),
        "choices": [{"answer": c.answer, "label": c.label, "does": c.does} for c in words.choices(card, STYLE)],
    }
    tally = words.votes(card, [v.user for v in votes])
    if tally:
        out["votes"] = tally
    call = words.call_id(card)
    if call:
        out["call_id"] = call
    return out


def answered_text(card: ApprovalCard, answer: Answer, by: str, at: float) -> dict[str, Any]:
    """An answered card's sentences: the decision, by whom, when, until when; a deny's reason."""
    out: dict[str, Any] = {
        "decision": words.decision(card, answer),
        "answered": words.answered(card, answer, by, at, STYLE),
    }
    reason = words.deny_reason(answer, STYLE)
    if reason:
        out["reason"] = reason
    return out


def turn_body(turn: TurnResult) -> dict[str, Any]:
    body: dict[str, Any] = {"status": turn.status, "text": turn.text}
    if turn.offer is not None:
        body["card"] = card_body(turn.offer.card, turn.offer.secret, turn.offer.votes)
    return body


def resume_body(res: ResumeResult) -> str:
    """Serialised deterministically, so a replay's `result` is byte for byte the resumed one."""
    head: dict[str, Any] = {"outcome": res.outcome}
    if res.message:
        head["message"] = res.message
    if res.owner and res.outcome == "forbidden":
        head["owner"] = res.owner
    if res.answer is not None and res.outcome in ("resumed", "replayed"):
        head["answer"] = res.answer.model_dump(exclude_none=True)
        head["answered_by"] = res.answered_by
        if res.card is not None and res.answered_by and res.answered_at:
            head["answered_text"] = answered_text(res.card, res.answer, res.answered_by, res.answered_at)
    if res.outcome == "vote_recorded":
        head["votes"] = [v.user for v in res.votes or []]
        head["needed"] = res.needed
    text = json.dumps(head, sort_keys=True, separators=(",", ":"))
    if res.result is None:
        return text
    result = json.dumps(turn_body(res.result), sort_keys=True, separators=(",", ":"))
    return text[:-1] + ',"result":' + result + "}"


def grant_body(g: Grant) -> dict[str, Any]:
    body = g.model_dump(exclude={"turn_id"} if g.turn_id is None else None)  # set: a `once` grant, this turn only
    body["expires_at_iso"] = iso(g.expires_at)
    return body


HTTP_STATUS = {
    "resumed": 200,
    "vote_recorded": 202,
    "replayed": 200,
    "in_progress": 409,
    "expired": 410,
    "unknown": 404,
    "forbidden": 403,
    "invalid": 422,
    "unauthorized": 401,
}
