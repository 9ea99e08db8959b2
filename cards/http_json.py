"""The plain JSON front end's shapes: rendering results, and parsing a resume body into a typed answer."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from core.models import Answer, ApprovalCard, Grant, ResumeResult, TurnResult, parse_answer


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
    answer: Answer | None  # None: the entry list was not exactly one well-formed entry for this card


class BadRequest(ValueError):
    """The body is not the shape this endpoint takes; the message says why."""


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")


def parse_resume(card_id: str, raw: bytes) -> ResumeRequest:
    """R15 for HTTP: exactly one entry naming this card; its status and payload are read fail-closed."""
    try:
        body = _ResumeBody.model_validate_json(raw)
    except ValidationError as e:
        raise BadRequest(_first_error(e)) from e
    if not body.user or not body.secret:
        raise BadRequest("user and secret must be non-empty")
    if len(body.responses) != 1 or body.responses[0].interruptId != card_id:
        return ResumeRequest(user=body.user, secret=body.secret, answer=None)
    entry = body.responses[0]
    return ResumeRequest(user=body.user, secret=body.secret, answer=parse_answer(entry.status, entry.payload))


def parse_turn(raw: bytes) -> TurnRequest:
    try:
        req = TurnRequest.model_validate_json(raw)
    except ValidationError as e:
        raise BadRequest(_first_error(e)) from e
    if not req.chat or not req.user or not req.text.strip():
        raise BadRequest("chat, user and text must be non-empty")
    return req


def _first_error(e: ValidationError) -> str:
    err = e.errors()[0]
    where = ".".join(str(p) for p in err.get("loc", ())) or "body"
    return f"{where}: {err.get('msg', 'invalid')}"


def card_body(card: ApprovalCard, secret: str | None = None) -> dict[str, Any]:
    body = card.model_dump()
    body["expires_at_iso"] = iso(card.expires_at)
    if secret is not None:
        body["secret"] = secret
    return body


def turn_body(turn: TurnResult) -> dict[str, Any]:
    body: dict[str, Any] = {"status": turn.status, "text": turn.text}
    if turn.offer is not None:
        body["card"] = card_body(turn.offer.card, turn.offer.secret)
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
    text = json.dumps(head, sort_keys=True, separators=(",", ":"))
    if res.result is None:
        return text
    result = json.dumps(turn_body(res.result), sort_keys=True, separators=(",", ":"))
    return text[:-1] + ',"result":' + result + "}"


def grant_body(g: Grant) -> dict[str, Any]:
    body = g.model_dump()
    body["expires_at_iso"] = iso(g.expires_at)
    return body


HTTP_STATUS = {
    "resumed": 200,
    "replayed": 200,
    "in_progress": 409,
    "expired": 410,
    "unknown": 404,
    "forbidden": 403,
    "invalid": 422,
    "unauthorized": 401,
}
