"""No request from the network produces a 5xx: every route of the running server (HTTP /v1,
Slack, Teams unauthenticated and authenticated, health), swept with junk paths, headers, query
strings and bodies sent as raw bytes. Each cause was fixed where it was; this test finds new ones."""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import quote

import pytest
from aiohttp import web

from chat_approvals.bots.config import ServerConfig
from chat_approvals.bots.server import build_app
from chat_approvals.bots.teams_bot import TeamsConfig
from chat_approvals.bots.teams_compat import TeamsAuth
from chat_approvals.core.bootstrap import bootstrap
from chat_approvals.core.clock import ManualClock
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.file_objects import FileObjects
from chat_approvals.store.sqlite_rows import SqliteRows
from tests.conftest import TOKEN
from tests.support import slack_payloads as P
from tests.support.agents import Counter, scripted_factory
from tests.support.raw_http import raw_request
from tests.support.slack_standin import SlackStandIn
from tests.teams.token_issuer import APP_ID, LocalIssuer, NoOutsideNames

PARAMS = [
    "x",
    "%ff%fe",
    "%00",
    "..%2F..%2Fetc",
    "%2e%2e",
    "c_" + "a" * 4998,
    "\xff".encode("latin-1").decode("latin-1"),
    "%ED%A0%80",  # a lone surrogate, percent-encoded (issue 27)
    "%E2%80%AEevil",  # a bidi override
]
QUERIES = [
    b"",
    b"?user=%ff%fe",
    b"?user=a%00b",
    b"?user=" + b"a" * 3000,
    b"?%zz=1",
    b"?user=%ED%A0%80",
    b"?user=+alice",
]
rng = random.Random(7)
BODIES = [
    b"",
    b"\xff\xfe\xfd",
    b"{",
    b"[]",
    b"null",
    b"1e999999",
    b'{"a": 1, "a": 2}',
    b'{"team": 5, "authorizations": 5, "enterprise": [1], "user": 3}',
    b"payload=%ff",
    b"payload=%7B",
    b"payload=%5B1%5D",
    b"authorizations=x&ssl_check=0",
    b"[" * 50_000,
    b'{"type": "message", "from": 5, "conversation": "x", "channelData": 7}',
    b'{"type": "invoke", "name": "adaptiveCard/action", "value": {"action": {"type": "Action.Execute"}}}',
    *(rng.randbytes(rng.randrange(1, 300)) for _ in range(6)),
    *(
        JUNK := [
            # issue 27: lone surrogates (valid JSON, not UTF-8 text), UTF-16 and BOM bodies, deep nesting,
            # non-object JSON, and the shapes Slack and Teams never send.
            b'{"chat": "c\\ud800", "user": "u\\udfff", "text": "x\\ud800y"}',
            b'{"user": "alice", "secret": "s\\ud800", "responses": [{"interruptId": "x", "status": "cancelled"}]}',
            b'{"type": "message", "text": "\\ud800", "from": {"id": "\\udc00"}}',
            '{"chat": "c", "user": "u", "text": "t"}'.encode("utf-16"),
            b'\xef\xbb\xbf{"chat": "c", "user": "u", "text": "t"}',
            b'{"a":' * 5000 + b"1" + b"}" * 5000,
            b'"just a string"',
            b"5",
            b"true",
            b'{"type": "event_callback", "event": 5}',
            b'{"type": "event_callback", "event": {"type": "message", "text": ["x"]}}',
            b"payload=" + quote('{"type": "block_actions", "actions": []}').encode(),
            b"payload=" + quote('{"type": "block_actions", "actions": {"0": {"action_id": "approve"}}}').encode(),
            b"payload="
            + quote(
                '{"type": "block_actions", "actions": [{"action_id": "approve", "value": "' + "[" * 5000 + '"}]}'
            ).encode(),
            b"payload=" + quote('{"type": "block_actions", "user": {"id": "\\ud800"}}').encode(),
            b'{"type": "invoke", "name": "adaptiveCard/action", "value": [1], "from": {"id": 5}}',
        ]
    ),
]
CONTENT_TYPES = [None, b"application/json", b"application/x-www-form-urlencoded", b"text/plain", b"\xff/\xfe"]
AUTH = [None, f"Bearer {TOKEN}".encode(), b"Bearer \xff\xfe", b"Bearer a.b.c", b"\xff"]
SLACK = [{}, {b"X-Slack-Request-Timestamp": b"soon", b"X-Slack-Signature": b"v0=zz"}, {b"X-Slack-Signature": b"\xff"}]


async def _serve(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"


@pytest.fixture
async def servers(tmp_path: Path) -> AsyncIterator[list[tuple[web.Application, str]]]:
    issuer = await LocalIssuer().start()
    standin = SlackStandIn()
    await standin.start()
    clock = ManualClock()
    store = StoreIO(SqliteRows(tmp_path / "r.db"), FileObjects(tmp_path / "o", clock=clock))
    approvals = bootstrap(store, clock=clock, agent_factory=scripted_factory(Counter())).approvals
    env = {
        "SLACK_BOT_TOKEN": "xoxb-test",
        "SLACK_SIGNING_SECRET": P.SIGNING_SECRET,
        "CHAT_APPROVALS_SLACK_API_URL": standin.api_url,
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        cfg = ServerConfig(host="127.0.0.1", api_token=TOKEN)
        open_app = build_app(approvals, cfg, sweep=False, teams=TeamsConfig())
        authed = TeamsConfig(auth=TeamsAuth(app_id=APP_ID, app_password="pw"))
        auth_app = build_app(approvals, cfg, sweep=False, teams=authed, teams_validator=issuer.validator())
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    running = [await _serve(open_app), await _serve(auth_app)]
    yield [(open_app, running[0][1]), (auth_app, running[1][1])]
    for runner, _ in running:
        await runner.cleanup()
    store.close()
    await issuer.stop()
    await standin.stop()


def _targets(app: web.Application) -> list[tuple[str, bytes]]:
    out: list[tuple[str, bytes]] = []
    for route in app.router.routes():
        info = route.resource.get_info() if route.resource is not None else {}
        method = route.method if route.method != "*" else "POST"
        if method == "HEAD":
            continue
        if "path" in info:
            paths = [info["path"].encode()]
        else:
            formatter: str = info.get("formatter", "")
            names = [part.split("}")[0] for part in formatter.split("{")[1:]]
            paths = [formatter.format(**dict.fromkeys(names, p)).encode("utf-8", "surrogateescape") for p in PARAMS]
            paths.append(formatter.format(**dict.fromkeys(names, "x")).encode().replace(b"x", b"\xff", 1))
        out += [(method, p) for p in paths]
    return out


async def test_every_route_answers_junk_with_a_4xx_never_a_5xx(servers: list[tuple[web.Application, str]]) -> None:
    failures: list[tuple[str, bytes, int]] = []
    seen: dict[int, int] = {}
    sent = 0
    with NoOutsideNames() as guard:
        for app, base in servers:
            requests = []
            for method, path in _targets(app):
                for i, body in enumerate(BODIES):
                    # Every combination of body with a rotating choice of the others keeps it under a minute.
                    headers: dict[bytes, bytes] = {}
                    ctype, auth = CONTENT_TYPES[i % len(CONTENT_TYPES)], AUTH[(i // 2) % len(AUTH)]
                    if ctype is not None:
                        headers[b"Content-Type"] = ctype
                    if auth is not None:
                        headers[b"Authorization"] = auth
                    headers.update(SLACK[i % len(SLACK)])
                    target = path + QUERIES[i % len(QUERIES)]
                    requests.append((method, target, headers, body))
            for start in range(0, len(requests), 25):
                batch = requests[start : start + 25]
                results = await asyncio.gather(*(raw_request(base, m, t, headers=h, body=b) for m, t, h, b in batch))
                for (m, t, _h, _b), (status, _) in zip(batch, results, strict=True):
                    sent += 1
                    seen[status] = seen.get(status, 0) + 1
                    if status >= 500:
                        failures.append((m, t[:80], status))
    assert guard.asked == []
    assert sent > 500 and not failures, failures[:10]
    assert {400, 401, 404, 422} <= set(seen)  # the junk reached every kind of refusal


async def test_signed_slack_junk_and_authorized_junk_answer_a_4xx(servers: list[tuple[web.Application, str]]) -> None:
    """The junk above again, past the door: signed for Slack, with the right bearer token for /v1,
    as JSON for Teams (the loopback app needs no token). Issue 27.3: each was a 500 or worse."""
    _, base = servers[0]
    failures: list[tuple[bytes, int]] = []
    requests: list[tuple[bytes, dict[bytes, bytes], bytes]] = []
    for body in [*JUNK, *BODIES[:16]]:
        ctype = "application/json" if not body.startswith(b"payload=") else "application/x-www-form-urlencoded"
        signed = {k.encode(): v.encode() for k, v in P.signed_headers(body, ctype).items()}
        requests.append((b"/slack/events", signed, body))
        bearer = {b"Authorization": f"Bearer {TOKEN}".encode(), b"Content-Type": b"application/json"}
        requests += [(b"/v1/turns", bearer, body), (b"/v1/interrupts/c_" + b"a" * 22 + b"/resume", bearer, body)]
        requests.append((b"/api/messages", {b"Content-Type": b"application/json"}, body))
    with NoOutsideNames():
        for start in range(0, len(requests), 20):
            batch = requests[start : start + 20]
            results = await asyncio.gather(*(raw_request(base, "POST", t, headers=h, body=b) for t, h, b in batch))
            failures += [
                (t + b" " + b[:40], status)
                for (t, _h, b), (status, _) in zip(batch, results, strict=True)
                if not 400 <= status < 500 and not (t == b"/api/messages" and status in (200, 201))
            ]
    assert not failures, failures[:10]
