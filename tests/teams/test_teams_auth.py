"""Teams with authentication on, for real: a local OpenID configuration and JWKS with a key made
here, tokens signed with it (and forged ones), through the running server. Every bad token is a
401 that changes nothing; a slow key endpoint holds up only the request that waits for it."""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest
from aiohttp import ClientSession

from chat_approvals.bots.config import ServerConfig
from chat_approvals.bots.server import build_app
from chat_approvals.bots.teams_bot import TeamsConfig
from chat_approvals.bots.teams_compat import TeamsAuth
from chat_approvals.core.approvals import Approvals
from chat_approvals.core.bootstrap import bootstrap
from chat_approvals.core.clock import ManualClock
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.file_objects import FileObjects
from chat_approvals.store.sqlite_rows import SqliteRows
from tests.support.agents import Counter, scripted_factory
from tests.support.raw_http import raw_request
from tests.teams.harness import CHAT, fixture
from tests.teams.token_issuer import APP_ID, LocalIssuer, NoOutsideNames, new_key

SERVICE_URL = "http://127.0.0.1:9/_connector"  # never called: the activities below need no reply


@pytest.fixture
def no_outside() -> Iterator[NoOutsideNames]:
    with NoOutsideNames() as guard:
        yield guard
    assert guard.asked == [], f"the test tried to reach {guard.asked}"


@pytest.fixture
async def issuer() -> AsyncIterator[LocalIssuer]:
    i = await LocalIssuer().start()
    yield i
    await i.stop()


class Server:
    def __init__(
        self, base: str, session: ClientSession, approvals: Approvals, counter: Counter, store: StoreIO
    ) -> None:
        self.base, self.session, self.approvals, self.counter, self.store = base, session, approvals, counter, store

    async def post(self, activity: dict[str, Any], auth: str | bytes | None) -> tuple[int, str]:
        headers = {b"Content-Type": b"application/json"}
        if auth is not None:  # raw bytes: a header value that is not UTF-8 is one of the cases
            headers[b"Authorization"] = auth if isinstance(auth, bytes) else auth.encode()
        status, body = await raw_request(
            self.base, "POST", b"/api/messages", headers=headers, body=json.dumps(activity).encode()
        )
        return status, body.decode(errors="replace")


@pytest.fixture
async def server(tmp_path: Path, issuer: LocalIssuer, no_outside: NoOutsideNames) -> AsyncIterator[Server]:
    from aiohttp import web

    clock, counter = ManualClock(time.time()), Counter()
    store = StoreIO(SqliteRows(tmp_path / "r.db"), FileObjects(tmp_path / "o", clock=clock))
    approvals = bootstrap(store, clock=clock, agent_factory=scripted_factory(counter)).approvals
    auth = TeamsAuth(app_id=APP_ID, app_password="not-used-no-reply-is-sent")
    app = build_app(
        approvals,
        ServerConfig(host="127.0.0.1"),
        sweep=False,
        teams=TeamsConfig(auth=auth),
        teams_validator=issuer.validator(),
    )
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    async with ClientSession() as session:
        yield Server(f"http://127.0.0.1:{runner.addresses[0][1]}", session, approvals, counter, store)
    await runner.cleanup()
    store.close()


def message(text: str = "please fetch https://example.com/data.csv") -> dict[str, Any]:
    act = fixture("playground-message-text.json")
    act.update(serviceUrl=SERVICE_URL, id=str(uuid.uuid4()), text=text)
    return act


def unknown_card_click() -> dict[str, Any]:
    """An Execute click on a card this server never made: answered in the invoke body, no reply sent."""
    act = fixture("playground-invoke-adaptiveCard-action.json")
    act.update(serviceUrl=SERVICE_URL, id=str(uuid.uuid4()))
    data = {"card_id": "c_" + "u" * 22, "secret": "s"}
    act["value"] = {"action": {"type": "Action.Execute", "title": "Approve", "verb": "approve", "data": data}}
    return act


def b64(obj: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


async def test_a_valid_token_is_accepted(server: Server, issuer: LocalIssuer) -> None:
    status, body = await server.post(unknown_card_click(), f"Bearer {issuer.token(SERVICE_URL)}")
    assert status == 200, body
    assert "Unknown request" in body


async def test_every_bad_token_is_401_and_changes_nothing(server: Server, issuer: LocalIssuer) -> None:
    now = time.time()
    other = new_key()
    good = issuer.token(SERVICE_URL)
    head, payload, _sig = good.split(".")
    claims = jwt.decode(good, options={"verify_signature": False})
    cases: dict[str, str | bytes | None] = {
        "missing": None,
        "empty": "",
        "not bearer": f"Basic {good}",
        "garbage": "Bearer abc",
        "garbage segments": "Bearer a.b.c",
        "expired": f"Bearer {issuer.token(SERVICE_URL, now=now - 7200)}",
        "not yet valid": f"Bearer {issuer.token(SERVICE_URL, nbf=int(now) + 3600)}",
        "no expiry": f"Bearer {issuer.token(SERVICE_URL, exp=None)}",
        "wrong audience": f"Bearer {issuer.token(SERVICE_URL, aud='99999999-2222-3333-4444-555555555555')}",
        "wrong issuer": f"Bearer {issuer.token(SERVICE_URL, iss='https://sts.example.com')}",
        "wrong serviceurl": f"Bearer {issuer.token('http://127.0.0.1:8/_connector')}",
        "no serviceurl": f"Bearer {issuer.token(SERVICE_URL, serviceurl=None)}",
        "unknown kid": f"Bearer {issuer.token(SERVICE_URL, kid='key-unknown', key=other)}",
        "forged signature": f"Bearer {issuer.token(SERVICE_URL, key=other)}",
        "alg none": "Bearer " + b64({"alg": "none", "typ": "JWT", "kid": "key-1"}) + "." + b64(claims) + ".",
        "alg HS256": "Bearer "
        + jwt.encode(claims, "key-1-as-a-shared-secret-of-32-bytes", algorithm="HS256", headers={"kid": "key-1"}),
        "tampered claims": f"Bearer {head}.{b64({**claims, 'aud': APP_ID, 'extra': 1})}.{_sig}",
        "header only": f"Bearer {head}",
        "huge": "Bearer " + "a" * 8_000,  # longer headers aiohttp itself refuses (400)
        "not utf-8": b"Bearer \xff\xfe" + payload.encode(),
    }
    for name, auth in cases.items():
        for activity in (message(), unknown_card_click()):
            status, body = await server.post(activity, auth)
            assert status == 401, (name, status, body)
    # Nothing happened: no turn ran, no card, no audit, no delivery recorded.
    assert server.counter.calls() == 0
    store = server.store
    assert await store.run(store.rows.get_pointer, CHAT) is None
    assert await server.approvals.audit(CHAT) == []
    assert await server.approvals.first_delivery(f"teams:activity:{CHAT}:probe")


async def test_a_key_not_endorsed_for_the_channel_is_refused(server: Server, issuer: LocalIssuer) -> None:
    act = unknown_card_click()
    act["channelId"] = "webchat"  # the key is endorsed for msteams only
    status, _ = await server.post(act, f"Bearer {issuer.token(SERVICE_URL)}")
    assert status == 401


async def test_a_rolled_key_is_fetched_when_first_seen(server: Server, issuer: LocalIssuer) -> None:
    issuer.keys["key-2"] = new_key()
    status, body = await server.post(unknown_card_click(), f"Bearer {issuer.token(SERVICE_URL, kid='key-2')}")
    assert status == 200, body


async def test_a_slow_key_endpoint_holds_up_only_the_request_that_waits_for_it(
    server: Server, issuer: LocalIssuer
) -> None:
    issuer.delay = 60.0  # the JWKS endpoint now hangs (longer than the validator's 2 s fetch timeout)
    hits = issuer.jwks_hits
    forged = f"Bearer {issuer.token(SERVICE_URL, kid='key-new', key=new_key())}"
    waiting = asyncio.ensure_future(server.post(unknown_card_click(), forged))
    async with asyncio.timeout(10):
        while issuer.jwks_hits == hits:  # the unknown key id asked for a refresh, which now hangs
            await asyncio.sleep(0.01)
    # Meanwhile the server answers everything else: health, and a click with a known key.
    async with server.session.get(f"{server.base}/healthz") as r:
        assert r.status == 200
    status, body = await server.post(unknown_card_click(), f"Bearer {issuer.token(SERVICE_URL)}")
    assert status == 200, body
    assert not waiting.done()
    async with asyncio.timeout(10):  # bounded by the fetch timeout, then refused
        status, _ = await waiting
    assert status == 401


async def test_a_verified_token_is_remembered_and_every_other_check_still_runs(
    issuer: LocalIssuer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A token's signature is checked once; the same token again skips only that check and its
    thread hop: its expiry is checked against the clock again, its key must still be the cached
    one, and the channel's endorsement and the serviceurl are checked on every request. A rejected
    token is never remembered; the memory is bounded. No rule names the token check; R17's Teams
    identity (tenant + Entra object id) is only as good as it. The expiry needs PyJWT's own clock,
    so this waits about two seconds of real time."""
    from chat_approvals.bots import teams_auth
    from chat_approvals.bots.teams_auth import TokenRejected

    validator = issuer.validator()
    await validator.start()
    decoded: list[str] = []
    real = validator._decode

    def counting(token: str, key: Any) -> dict[str, Any]:
        decoded.append(token)
        return real(token, key)

    monkeypatch.setattr(validator, "_decode", counting)
    token = issuer.token(SERVICE_URL)
    try:
        first = await validator.validate(f"Bearer {token}", channel_id="msteams", service_url=SERVICE_URL)
        again = await validator.validate(f"Bearer {token}", channel_id="msteams", service_url=SERVICE_URL)
        assert again == first and again is not first and decoded == [token]
        with pytest.raises(TokenRejected, match="endorsed"):
            await validator.validate(f"Bearer {token}", channel_id="webchat", service_url=SERVICE_URL)
        with pytest.raises(TokenRejected, match="serviceurl"):
            await validator.validate(f"Bearer {token}", channel_id="msteams", service_url="http://127.0.0.1:8/x")
        assert decoded == [token]

        # past its expiry, the remembered token is refused as PyJWT refuses it (no leeway here)
        brief = issuer.token(SERVICE_URL, exp=int(time.time()) + 1)
        validator.leeway = 0.0
        await validator.validate(f"Bearer {brief}", channel_id="msteams", service_url=SERVICE_URL)
        assert brief in validator._verified
        await asyncio.sleep(max(0.0, int(time.time()) + 1.05 - time.time()) + 1.0)
        with pytest.raises(TokenRejected, match="ExpiredSignature"):
            await validator.validate(f"Bearer {brief}", channel_id="msteams", service_url=SERVICE_URL)
        assert brief not in validator._verified
        validator.leeway = 300.0

        # a refresh that replaces the key: checked in full again; one that drops it: refused
        await validator.validate(f"Bearer {token}", channel_id="msteams", service_url=SERVICE_URL)
        decoded.clear()
        await validator._refresh()
        await validator.validate(f"Bearer {token}", channel_id="msteams", service_url=SERVICE_URL)
        assert decoded == [token]
        issuer.keys = {"key-2": new_key()}
        await validator._refresh()
        with pytest.raises(TokenRejected, match="unknown"):
            await validator.validate(f"Bearer {token}", channel_id="msteams", service_url=SERVICE_URL)

        # rejected tokens are not remembered; the memory keeps the most recent MAX_VERIFIED
        forged = issuer.token(SERVICE_URL, kid="key-2", key=new_key())
        with pytest.raises(TokenRejected):
            await validator.validate(f"Bearer {forged}", channel_id="msteams", service_url=SERVICE_URL)
        assert forged not in validator._verified
        monkeypatch.setattr(teams_auth, "MAX_VERIFIED", 3)
        tokens = [issuer.token(SERVICE_URL, kid="key-2", jti=str(i)) for i in range(5)]
        for t in tokens:
            await validator.validate(f"Bearer {t}", channel_id="msteams", service_url=SERVICE_URL)
        assert list(validator._verified) == tokens[2:]
    finally:
        await validator.close()
