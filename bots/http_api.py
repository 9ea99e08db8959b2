"""The plain JSON front end (/v1): the reference client of the resume service.

The caller is a trusted backend that states the user; it proves itself with a bearer token.
"""

from __future__ import annotations

import hmac
import json
from typing import Any

from aiohttp import web

from chat_approvals.bots.text_edge import target_problem
from chat_approvals.bots.turn_limits import MAX_TURN_BODY, turn_text_problem
from chat_approvals.cards.http_json import (
    HTTP_STATUS,
    BadRequest,
    grant_body,
    parse_resume,
    parse_turn,
    resume_body,
    turn_body,
)
from chat_approvals.core.approvals import Approvals
from chat_approvals.core.identity import stated_http_user
from chat_approvals.core.ids import is_card_id
from chat_approvals.core.models import ResumeResult
from chat_approvals.core.protocol import UNKNOWN
from chat_approvals.core.text import display_problem, json_text_problem

APPROVALS: web.AppKey[Approvals] = web.AppKey("approvals", Approvals)
TOKENS: web.AppKey[list[str]] = web.AppKey("tokens", list)


def _json(status: int, body: dict[str, Any]) -> web.Response:
    return web.json_response(body, status=status)


def _invalid(message: str) -> web.Response:
    return _json(422, {"outcome": "invalid", "status": "invalid", "message": message})


def _too_large() -> web.Response:
    message = f"the body is larger than {MAX_TURN_BODY // 1024} KiB"
    return _json(413, {"outcome": "invalid", "status": "too_large", "message": message})


@web.middleware
async def bearer_auth(request: web.Request, handler: Any) -> web.StreamResponse:
    if _is_v1(request):
        header = request.headers.get("Authorization", "")
        given = header[7:].strip() if header.startswith("Bearer ") else ""
        # aiohttp hands non-UTF-8 header bytes over as surrogates: compare bytes, never fail on them.
        raw = given.encode("utf-8", "surrogateescape")
        ok = any(hmac.compare_digest(raw, t.encode("utf-8", "surrogateescape")) for t in request.app[TOKENS])
        if not given or not ok:
            if _is_resume(request):
                request.app[APPROVALS].metrics.resumes.labels("http", "unauthorized").inc()
            return _json(401, {"outcome": "unauthorized", "status": "unauthorized", "message": "bad bearer token"})
        problem = target_problem(request)  # R20: before any handler reads the path or the query
        if problem is not None:
            if _is_resume(request):
                request.app[APPROVALS].metrics.resumes.labels("http", "invalid").inc()
            return _invalid(problem)
    resp: web.StreamResponse = await handler(request)
    return resp


async def post_turn(request: web.Request) -> web.Response:
    if request.content_length is not None and request.content_length > MAX_TURN_BODY:
        return _too_large()  # before reading it
    raw = await request.content.read(MAX_TURN_BODY + 1)  # a chunked body is cut here too
    if len(raw) > MAX_TURN_BODY:
        return _too_large()
    try:
        problem = json_text_problem(raw)  # R20: before the turn takes its lease
        if problem is not None:
            raise BadRequest(problem)
        req = parse_turn(raw)
    except BadRequest as e:
        return _invalid(str(e))
    problem = display_problem(req.chat, "chat") or turn_text_problem(req.text)  # shown on cards; what a turn carries
    if problem is not None:
        return _invalid(problem)
    turn = await request.app[APPROVALS].run_turn(
        chat=req.chat, user=req.user, text=req.text, platform="http", unattended=req.unattended
    )
    return _json(200, turn_body(turn))


def _is_v1(request: web.Request) -> bool:
    """A /v1 route of this app, wherever it is mounted: under `add_subapp("/approvals", app)` the
    path is /approvals/v1/..., so the matched route counts, not only the path's first segment."""
    return request.match_info.route.handler in _V1_HANDLERS or request.path.startswith("/v1/")


def _is_resume(request: web.Request) -> bool:
    return request.method == "POST" and request.match_info.route.handler is post_resume


async def post_resume(request: web.Request) -> web.Response:
    card_id = request.match_info["card_id"]
    metrics = request.app[APPROVALS].metrics  # refusals made here never reach the facade: count them here
    if not is_card_id(card_id):  # before it is used anywhere: `/`, `..`, NUL, 5,000 characters
        metrics.resumes.labels("http", "unknown").inc()
        res = ResumeResult(outcome="unknown", message=UNKNOWN)
        return web.Response(text=resume_body(res), status=HTTP_STATUS[res.outcome], content_type="application/json")
    raw = await request.read()
    try:
        problem = json_text_problem(raw)  # R20: before anything is claimed or written
        if problem is not None:
            raise BadRequest(problem)
        req = parse_resume(card_id, raw)
    except BadRequest as e:
        metrics.resumes.labels("http", "invalid").inc()
        return _invalid(str(e))
    res = await request.app[APPROVALS].resume(
        card_id=card_id, user=req.user, secret=req.secret, answer=req.answer, platform="http"
    )
    return web.Response(text=resume_body(res), status=HTTP_STATUS[res.outcome], content_type="application/json")


def _user(request: web.Request) -> str | None:
    # Verbatim, as /v1/turns keeps it: `" alice"` is refused here too, never taken for `alice`.
    return stated_http_user(request.query.get("user", ""))


async def get_grants(request: web.Request) -> web.Response:
    user = _user(request)
    if user is None:
        return _invalid("the user query parameter is required (an HTTP user, not slack:… or teams:…)")
    grants = await request.app[APPROVALS].grants(user=user, chat=request.match_info["chat"])
    return _json(200, {"grants": [grant_body(g) for g in grants]})


async def delete_grant(request: web.Request) -> web.Response:
    user = _user(request)
    if user is None:
        return _invalid("the user query parameter is required (an HTTP user, not slack:… or teams:…)")
    removed = await request.app[APPROVALS].revoke(
        user=user, chat=request.match_info["chat"], subject=request.match_info["subject"]
    )
    return _json(200 if removed else 404, {"revoked": [grant_body(g) for g in removed]})


async def get_audit(request: web.Request) -> web.Response:
    events = await request.app[APPROVALS].audit(request.match_info["chat"])
    return _json(200, {"events": [json.loads(e.model_dump_json()) for e in events]})


_V1_HANDLERS = frozenset({post_turn, post_resume, get_grants, delete_grant, get_audit})


def mount_http_api(app: web.Application, approvals: Approvals, tokens: list[str]) -> None:
    app[APPROVALS] = approvals
    app[TOKENS] = tokens
    app.middlewares.append(bearer_auth)
    app.router.add_post("/v1/turns", post_turn)
    app.router.add_post("/v1/interrupts/{card_id}/resume", post_resume)
    app.router.add_get("/v1/chats/{chat}/grants", get_grants)
    app.router.add_delete("/v1/chats/{chat}/grants/{subject}", delete_grant)
    app.router.add_get("/v1/chats/{chat}/audit", get_audit)
