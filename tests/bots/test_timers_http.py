"""Issue 33 through the HTTP front end, over real HTTP to the running server with its timer loop
and the injected clock: a reminder is an audit event and a signed webhook delivery
`card.reminder`, once per reminder, only while the card waits; the card carries AG-UI's
`expiresAt` and `responseSchema`, and the schema accepts exactly what the resume accepts."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
import jsonschema
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from chat_approvals.bots.config import ServerConfig
from chat_approvals.bots.server import open_root, serve_app
from chat_approvals.bots.webhooks import verify
from chat_approvals.cards.http_json import BadRequest, parse_resume
from chat_approvals.core.bootstrap import Root
from chat_approvals.core.clock import ManualClock
from chat_approvals.core.models import ApprovalCard
from chat_approvals.core.protocol.card_kinds import answer_problem
from chat_approvals.store.aio import StoreIO
from tests.conftest import TOKEN, Api
from tests.support.agents import Counter, scripted_factory

SECRET = "whsec-timers-0123456789"
TICK = 0.05
MIN = 60.0
POLICY = """\
[defaults]
durations = ["once", "1h", "8h"]
default_duration = "8h"
expires_after = "2h"
remind_after = ["10m", "1h"]

[[rule]]
match = "escalate.example.org"
escalate_after = "30m"
escalate_to = ["sec-lead"]
"""
URL_TEXT = "please fetch https://data.example.org/table.csv"
ESCALATE_TEXT = "please fetch https://escalate.example.org/table.csv"


@dataclass
class Served:
    api: Api
    root: Root[StoreIO]
    clock: ManualClock
    hooks: list[dict[str, Any]]


@pytest.fixture
async def served(tmp_path: Path, clock: ManualClock, counter: Counter) -> AsyncIterator[Served]:
    hooks: list[dict[str, Any]] = []

    async def hook(request: web.Request) -> web.Response:
        body = await request.read()
        assert verify(SECRET, body, request.headers["X-Chat-Approvals-Signature"])
        hooks.append(json.loads(body))
        return web.Response(status=204)

    receiver = web.Application()
    receiver.router.add_post("/hook", hook)
    rserver = TestServer(receiver, host="127.0.0.1")
    await rserver.start_server()
    (tmp_path / "policy.toml").write_text(POLICY)
    cfg = ServerConfig(
        api_token=TOKEN,
        store=f"sqlite:///{tmp_path}/rows.db",
        policy=str(tmp_path / "policy.toml"),
        audit_webhook=[str(rserver.make_url("/hook"))],
        audit_webhook_secret=SECRET,
        audit_webhook_poll=0.05,
        timer_every=TICK,
    )
    root = open_root(cfg, clock=clock, factory=scripted_factory(counter))
    server = TestServer(serve_app(root, cfg, sweep=False, timers=True), host="127.0.0.1")
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as session:
            yield Served(Api(session, str(server.make_url("")).rstrip("/")), root, clock, hooks)
    finally:
        await server.close()
        await rserver.close()
        root.close()


async def until(check: Any, seconds: float = 10.0) -> None:
    async with asyncio.timeout(seconds):
        while not check():
            await asyncio.sleep(0.02)


def reminders(s: Served) -> list[dict[str, Any]]:
    return [h for h in s.hooks if h["kind"] == "card.reminder"]


async def test_a_reminder_is_an_audit_event_and_a_signed_webhook_delivery_once(served: Served) -> None:
    s, start = served, served.clock.now()
    code, body = await s.api.turn("chat-1", "alice", URL_TEXT)
    assert code == 200 and body["status"] == "awaiting_approval"
    card = body["card"]
    s.clock.set(start + 9 * MIN)
    await asyncio.sleep(TICK * 8)
    assert reminders(s) == []
    s.clock.set(start + 10 * MIN)
    await until(lambda: len(reminders(s)) == 1)
    first = reminders(s)[0]
    assert first["card_id"] == card["card_id"] and first["actor"] == "system"
    assert first["detail"] == {"timer": "remind:0", "after": 600}
    await asyncio.sleep(TICK * 8)
    assert len(reminders(s)) == 1  # once
    trail = await s.root.approvals.audit(card["chat"])
    assert [e.kind for e in trail].count("card.reminder") == 1
    # answered before 1 h: the second reminder finds nothing waiting and says nothing
    code, _ = await s.api.resume(card["card_id"], "alice", card["secret"], approved=False)
    assert code == 200
    s.clock.set(start + 61 * MIN)
    await asyncio.sleep(TICK * 8)
    assert len(reminders(s)) == 1
    s.clock.set(start + 121 * MIN)
    await asyncio.sleep(TICK * 8)
    assert [h["kind"] for h in s.hooks].count("expired") == 0  # an answered card does not expire


async def test_expiry_denies_once_and_the_card_never_counts_as_an_approval(served: Served) -> None:
    s, start = served, served.clock.now()
    _, body = await s.api.turn("chat-1", "alice", URL_TEXT)
    card = body["card"]
    s.clock.set(start + 120 * MIN - 5)  # just before the expiry shown on the card
    await until(lambda: any(h["kind"] == "expired" for h in s.hooks) and any(h["kind"] == "answered" for h in s.hooks))
    expired = [h for h in s.hooks if h["kind"] == "expired"]
    assert expired[0]["detail"]["why"] == "no answer in time" and expired[0]["actor"] == "system"
    answered = next(h for h in s.hooks if h["kind"] == "answered")
    assert answered["actor"] == "system" and answered["detail"]["approved"] is False
    code, reply = await s.api.resume(card["card_id"], "alice", card["secret"])
    assert code == 200 and reply["outcome"] == "replayed"  # the system's deny, replayed: never an approval
    assert reply["answer"] == {"approved": False} and reply["answered_by"] == "system"
    await asyncio.sleep(TICK * 8)
    assert [h["kind"] for h in s.hooks].count("expired") == 1


async def test_a_late_expiry_timer_expires_the_card_and_it_is_refused(served: Served) -> None:
    s, start = served, served.clock.now()
    _, body = await s.api.turn("chat-1", "alice", URL_TEXT)
    card = body["card"]
    s.clock.set(start + 121 * MIN)
    await until(lambda: any(h["kind"] == "expired" for h in s.hooks))
    code, reply = await s.api.resume(card["card_id"], "alice", card["secret"])
    assert code == 410 and reply["outcome"] == "expired"


async def test_the_card_carries_expires_at_and_a_response_schema_the_resume_agrees_with(served: Served) -> None:
    s, start = served, served.clock.now()
    _, body = await s.api.turn("chat-1", "alice", URL_TEXT)
    card = body["card"]
    assert datetime.fromisoformat(card["expiresAt"]).timestamp() == pytest.approx(start + 2 * 3600, abs=1)
    schema = card["responseSchema"]
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    payloads: list[Any] = [
        {"approved": True},
        {"approved": False},
        {"approved": True, "duration": "1h"},
        {"approved": True, "duration": "once"},
        {"approved": True, "duration": "2h"},  # not offered
        {"approved": False, "reason": "not today"},
        {"approved": True, "reason": "why not"},  # a reason with an approval
        {"approved": False, "duration": "1h"},  # a duration with a deny
        {"approved": "yes"},
        {"approved": True, "extra": 1},
        {"duration": "1h"},
        {"approved": False, "reason": "x" * 501},
    ]
    typed = ApprovalCard.model_validate(await _stored_card(s, card["card_id"]))
    for payload in payloads:
        raw = json.dumps(
            {
                "user": "alice",
                "secret": "s",
                "responses": [{"interruptId": card["card_id"], "status": "resolved", "payload": payload}],
            }
        ).encode()
        try:
            accepted = answer_problem(typed, parse_resume(card["card_id"], raw).answer) is None
        except BadRequest:
            accepted = False
        assert validator.is_valid(payload) == accepted, payload
    # and over the wire: what the schema refuses is a 422 that changes nothing
    code, _ = await s.api.resume(card["card_id"], "alice", card["secret"], duration="2h")
    assert code == 422
    code, reply = await s.api.resume(card["card_id"], "alice", card["secret"], duration="1h")
    assert code == 200 and reply["outcome"] == "resumed"


async def _stored_card(s: Served, card_id: str) -> dict[str, Any]:
    io = s.root.store
    p = await io.run(io.rows.get_pointer_by_card, card_id)
    assert p is not None
    return p.card.model_dump()


async def test_escalation_lets_the_escalation_approver_resume_once_and_not_before(served: Served) -> None:
    s, start = served, served.clock.now()
    _, body = await s.api.turn("chat-1", "alice", ESCALATE_TEXT)
    card = body["card"]
    s.clock.set(start + 29 * MIN)
    code, reply = await s.api.resume(card["card_id"], "sec-lead", card["secret"])
    assert code == 403 and reply["outcome"] == "forbidden"  # not escalated yet: a stranger
    s.clock.set(start + 30 * MIN)
    await until(lambda: any(h["kind"] == "card.escalated" for h in s.hooks))
    escalated = next(h for h in s.hooks if h["kind"] == "card.escalated")
    assert escalated["detail"]["escalated_to"] == ["sec-lead"] and escalated["card_id"] == card["card_id"]
    code, reply = await s.api.resume(card["card_id"], "sec-bob", card["secret"])
    assert code == 403  # only those named in escalate_to
    code, reply = await s.api.resume(card["card_id"], "sec-lead", card["secret"])
    assert code == 200 and reply["outcome"] == "resumed"
    code, reply = await s.api.resume(card["card_id"], "sec-lead", card["secret"])
    assert code == 200 and reply["outcome"] == "replayed"  # once
    trail = [e.kind for e in await s.root.approvals.audit(card["chat"]) if e.card_id == card["card_id"]]
    assert trail.count("claim_won") == 1 and trail.count("card.escalated") == 1
