"""R21 for Teams replies (issue 27.2): the outbound connector token is fetched off the event loop,
cached and reused. The identity endpoint is made slow where botbuilder calls it (MSAL's synchronous
fetch, which needs https and the internet, is replaced by a sleeping stand-in); a served app with
a Microsoft App id answers a message meanwhile, and /healthz stays under 100 ms at p99."""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession, web
from botframework.connector.auth import MicrosoftAppCredentials

from chat_approvals.bots.config import ServerConfig
from chat_approvals.bots.server import build_app
from chat_approvals.bots.teams_bot import TeamsConfig
from chat_approvals.bots.teams_compat import TeamsAuth
from chat_approvals.core.bootstrap import bootstrap
from chat_approvals.core.clock import ManualClock
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.file_objects import FileObjects
from chat_approvals.store.sqlite_rows import SqliteRows
from tests.support.agents import Counter, scripted_factory
from tests.support.health_poller import HealthPoller
from tests.teams.harness import MockConnector, fixture
from tests.teams.token_issuer import APP_ID, LocalIssuer, NoOutsideNames

SLOW = 1.5  # seconds the identity endpoint takes


def _fake_token() -> str:
    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none'})}.{part({'exp': int(time.time()) + 3600})}.sig"


class SlowIdentity:
    def __init__(self) -> None:
        self.calls = 0
        self.token = _fake_token()
        self.fail = False  # MSAL's refusal after the wait (an endpoint that answers an error)

    def __call__(self) -> str:
        self.calls += 1
        time.sleep(SLOW)  # what MSAL does on a slow endpoint: a blocking HTTP call
        if self.fail:
            raise PermissionError("the identity endpoint answered 503")
        return self.token


@pytest.fixture
async def served(
    tmp_path: Path, connector: tuple[MockConnector, str], monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[str, LocalIssuer, SlowIdentity]]:
    identity = SlowIdentity()
    monkeypatch.setattr(MicrosoftAppCredentials, "get_access_token", lambda _self, force_refresh=False: identity())
    issuer = await LocalIssuer().start()
    clock = ManualClock(time.time())
    store = StoreIO(SqliteRows(tmp_path / "r.db"), FileObjects(tmp_path / "o", clock=clock))
    approvals = bootstrap(store, clock=clock, agent_factory=scripted_factory(Counter())).approvals
    auth = TeamsAuth(app_id=APP_ID, app_password="pw")
    app = build_app(
        approvals, ServerConfig(host="127.0.0.1"), sweep=False, teams=TeamsConfig(auth=auth),
        teams_validator=issuer.validator(),
    )  # fmt: skip
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}", issuer, identity
    await runner.cleanup()
    store.close()
    await issuer.stop()


async def test_a_slow_identity_endpoint_delays_only_the_reply(
    served: tuple[str, LocalIssuer, SlowIdentity], connector: tuple[MockConnector, str]
) -> None:
    base, issuer, identity = served
    mock, service_url = connector
    with NoOutsideNames() as guard:
        async with ClientSession() as session:
            for n in range(2):  # the second message reuses the cached token: no second fetch
                act = fixture("playground-message-text.json")
                act.update(serviceUrl=service_url, id=str(uuid.uuid4()), text="hello there")
                headers = {"Authorization": f"Bearer {issuer.token(service_url)}"}

                async def post(a: dict[str, Any] = act, h: dict[str, str] = headers) -> int:
                    async with session.post(f"{base}/api/messages", json=a, headers=h) as r:
                        return r.status

                async def replied(count: int = n + 1) -> None:
                    while len(mock.posts()) < count:
                        await asyncio.sleep(0.02)

                async with HealthPoller(base) as health:
                    sent = asyncio.ensure_future(post())
                    await asyncio.wait_for(replied(), timeout=15)
                    assert await sent < 300
                assert len(health.took) >= (5 if n == 0 else 1) and health.p99() < 0.1, (
                    health.p99(),
                    sorted(health.took)[-5:],
                    health.errors,
                )
    assert guard.asked == []
    assert identity.calls == 1
    assert all(p["auth"] == f"Bearer {identity.token}" for p in mock.posts())


async def _metric(session: ClientSession, base: str, line: str) -> float | None:
    async with session.get(f"{base}/metrics") as r:
        text = await r.text()
    for row in text.splitlines():
        if row.startswith(line + " "):
            return float(row.rsplit(" ", 1)[1])
    return None


async def test_a_failing_identity_endpoint_shows_on_metrics_and_in_one_warning(
    served: tuple[str, LocalIssuer, SlowIdentity],
    connector: tuple[MockConnector, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 27.2: the trouble is visible: every fetch counted by result on /metrics with its time,
    one warning line however many replies fail, one info line when the endpoint is back."""
    base, issuer, identity = served
    mock, service_url = connector
    identity.fail = True
    failed = 'chat_approvals_teams_token_fetches_total{result="failed"}'
    ok = 'chat_approvals_teams_token_fetches_total{result="ok"}'
    caplog.set_level("INFO", logger="chat_approvals.teams.token")
    async with ClientSession() as session:

        async def say(text: str) -> None:
            act = fixture("playground-message-text.json")
            act.update(serviceUrl=service_url, id=str(uuid.uuid4()), text=text)
            headers = {"Authorization": f"Bearer {issuer.token(service_url)}"}
            async with session.post(f"{base}/api/messages", json=act, headers=headers) as r:
                assert r.status < 500

        async def metric_reaches(line: str, value: float) -> None:
            while (await _metric(session, base, line) or 0.0) < value:
                await asyncio.sleep(0.05)

        assert await _metric(session, base, failed) == 0.0  # there from the start, for a rate()
        for n in range(2):
            await say(f"hello {n}")
            await asyncio.wait_for(metric_reaches(failed, n + 1), timeout=15)
        assert mock.posts() == []  # no token, no reply
        warnings = [r for r in caplog.records if r.name == "chat_approvals.teams.token" and r.levelname == "WARNING"]
        assert len(warnings) == 1 and "503" in warnings[0].getMessage(), [r.getMessage() for r in warnings]
        identity.fail = False
        await say("hello again")
        await asyncio.wait_for(metric_reaches(ok, 1), timeout=15)
        fetches = (await _metric(session, base, failed) or 0.0) + (await _metric(session, base, ok) or 0.0)
        assert fetches == identity.calls  # each fetch counted once (a failed reply's error card tries too)
        assert await _metric(session, base, "chat_approvals_teams_token_fetch_seconds_count") == fetches
        assert (await _metric(session, base, "chat_approvals_teams_token_fetch_seconds_sum") or 0.0) >= fetches * SLOW
    back = [r for r in caplog.records if r.name == "chat_approvals.teams.token" and r.levelname == "INFO"]
    assert len(back) == 1 and "fetched again" in back[0].getMessage()
