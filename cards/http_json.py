"""The plain JSON front end's shapes: rendering results, and parsing a resume body into a typed answer."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from chat_approvals.cards import batch_wording as batch_words
from chat_approvals.cards import wording as words
from chat_approvals.core.identity import stated_http_user
from chat_approvals.core.models import (
    MAX_REASON,
    ONCE,
    Answer,
    ApprovalCard,
    CardItem,
    Grant,
    InvalidAnswer,
    ItemAnswer,
    ResumeResult,
    ToolCall,
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
    if len(body.responses) > 1 or (body.responses and body.responses[0].interruptId != card_id):
        answer = _item_answers(card_id, body.responses)  # a batch card, one entry per item (issue 32)
        return ResumeRequest(user=body.user, secret=body.secret, answer=answer)
    if len(body.responses) != 1:
        raise BadRequest("responses must hold exactly one entry")
    answer = _entry_answer(body.responses[0], "responses[0]")
    return ResumeRequest(user=body.user, secret=body.secret, answer=answer)


def _entry_answer(entry: _Entry, where: str) -> Answer:
    fields = entry.model_fields_set
    try:
        answer = read_answer(entry.status, entry.payload if "payload" in fields else None)
    except InvalidAnswer as e:
        raise BadRequest(f"{where}: {e}" if where != "responses[0]" else str(e)) from e
    if entry.status == "resolved" and "payload" not in fields:
        raise BadRequest("a resolved answer needs its payload")
    return answer


MAX_ITEMS = 50  # entries of a batch answer read at most (a step pauses on a few)


def _item_answers(card_id: str, entries: list[_Entry]) -> Answer:
    """A batch card answered item by item: each entry names one item (`CARD_ID:N`) once. Whether
    they are exactly the card's items is the resume service's check (a 422, nothing consumed)."""
    if len(entries) > MAX_ITEMS:
        raise BadRequest(f"responses may hold at most {MAX_ITEMS} entries")
    items: list[ItemAnswer] = []
    for n, entry in enumerate(entries):
        prefix, sep, number = entry.interruptId.rpartition(":")
        if prefix != card_id or not sep or not number.isdigit() or not number.isascii():
            raise BadRequest(
                f"responses[{n}].interruptId must be this card's id (one entry) "
                "or one of its items' ids (one entry each)"
            )
        if any(a.item == entry.interruptId for a in items):
            raise BadRequest(f"responses[{n}].interruptId answers an item a second time")
        a = _entry_answer(entry, f"responses[{n}]")
        if a.packages is not None:
            raise BadRequest(f"responses[{n}]: an item has no packages")
        items.append(
            ItemAnswer(
                item=entry.interruptId,
                approved=a.approved,
                duration=a.duration,
                reason=a.reason,
                edited_input=a.edited_input,
            )
        )
    return Answer(approved=any(a.approved for a in items), items=items)


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
    body = card.model_dump(exclude={"policy", "items"})
    for key in ("tool", "question"):
        if body.get(key) is None:
            body.pop(key, None)
    if card.items:  # a batch card: every interrupt of its step, each answered by its `interruptId`
        body["items"] = [item_body(i, card) for i in card.items]
    body["expires_at_iso"] = iso(card.expires_at)
    if card.policy is not None:
        body["approvers"] = card.policy.approvers
        body["quorum"] = card.policy.quorum
        body["votes"] = [v.user for v in votes or []]
        body["durations"] = list(card.policy.durations)
        body["default_duration"] = card.policy.default_duration
        body["edits"] = card.policy.edits  # approve with edits: `edited_input`, checked against tool.input_schema
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
    (with a deny); `edited_input` (the tool's own input schema, where the policy allows edits).
    What the resume refuses, the schema refuses; the server still checks. A batch card's items
    each carry their own (AG-UI: one schema per interrupt)."""
    packages = list(card.packages) if card.kind == "download" else []
    return answer_schema(offered_durations(card), packages, edit_schema(card, card.tool))


def item_schema(card: ApprovalCard, item: CardItem) -> dict[str, Any]:
    """The payload one item of a batch card accepts (its `responses` entry's `payload`)."""
    durations = [] if item.kind == "question" else offered_durations(card.model_copy(update={"kind": "tool"}))
    return answer_schema(durations, [], edit_schema(card, item.tool))


def edit_schema(card: ApprovalCard, tool: ToolCall | None) -> dict[str, Any] | None:
    """The tool's own input schema where this card takes edits (issue 32), else None."""
    edits = card.policy is not None and bool(card.policy.edits)
    if not edits or tool is None or tool.input_schema is None or card.kind == "download":
        return None
    return {**tool.input_schema, "description": "approve with edits: the tool's whole input, as it should run"}


def answer_schema(durations: list[str], packages: list[str], edited: dict[str, Any] | None) -> dict[str, Any]:
    props: dict[str, Any] = {"approved": {"type": "boolean", "description": "true approves; false denies"}}
    if packages:
        props["packages"] = {
            "type": "array",
            "items": {"enum": packages},
            "uniqueItems": True,
            "description": "the packages approved (default: all of them)",
        }
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
    if edited is not None:
        props["edited_input"] = edited
        # an edit goes only with an approval, and approves this one call (no duration, no grant)
        rules.append(
            {"if": {"properties": {"approved": {"const": False}}}, "then": {"not": {"required": ["edited_input"]}}}
        )
        if durations:
            rules.append({"if": {"required": ["edited_input"]}, "then": {"not": {"required": ["duration"]}}})
    return {
        "$schema": JSON_SCHEMA,
        "type": "object",
        "properties": props,
        "required": ["approved"],
        "additionalProperties": False,
        "allOf": rules,
    }


def item_body(item: CardItem, card: ApprovalCard) -> dict[str, Any]:
    """One item of a batch card: `interruptId` (what its response entry names), `kind`, its
    `tool` (`name`, `input`, `fingerprint`, `truncated`) or `question`, and its `label`."""
    out: dict[str, Any] = {"interruptId": item.item_id, "kind": item.kind, "label": batch_words.item_label(item, STYLE)}
    if item.tool is not None:
        out["tool"] = item.tool.model_dump()
    if item.question is not None:
        out["question"] = item.question.model_dump()
    out["responseSchema"] = item_schema(card, item)
    return out


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
    if card.tool is not None and answer.edited_input is not None:  # R22: exactly what was approved
        out["proposed_input"] = card.tool.input
        out["proposed_fingerprint"] = card.tool.fingerprint
        out["approved_input"] = answer.edited_input
        out["approved_fingerprint"] = words.fingerprint_of(card.tool.name, answer.edited_input)
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
