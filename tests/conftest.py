from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from chat_approvals.bots.config import ServerConfig
from chat_approvals.bots.server import build_app
from chat_approvals.core.agent.factory import AgentFactory
from chat_approvals.core.approvals import Approvals
from chat_approvals.core.bootstrap import bootstrap
from chat_approvals.core.clock import ManualClock
from chat_approvals.core.models import Answer, CardOffer, ResumeResult
from chat_approvals.core.settings import Settings
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.file_objects import FileObjects
from chat_approvals.store.sqlite_rows import SqliteRows
from tests.support.agents import Counter, scripted_factory

if TYPE_CHECKING:
    from tests.support.slack_rig import SlackRig

TOKEN = "test-token"


def require_service(env: str, what: str) -> str:
    """A service's address from var/test-env; skip without it, but under CI a missing service fails."""
    value = os.environ.get(env)
    if not value:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{what} is required in CI but {env} is not set")
        pytest.skip(f"{what} not running ({env} unset); run scripts/test")
    return value


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def counter() -> Counter:
    return Counter()


@pytest.fixture
def store_paths(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "approvals.db", tmp_path / "objects"


@pytest.fixture
def store(store_paths: tuple[Path, Path], clock: ManualClock) -> Iterator[StoreIO]:
    db, objects = store_paths
    io = StoreIO(SqliteRows(db), FileObjects(objects, clock=clock))
    yield io
    io.close()


def make_approvals(store: StoreIO, clock: ManualClock, factory: AgentFactory, **settings: object) -> Approvals:
    return bootstrap(store, settings=Settings(**settings), clock=clock, agent_factory=factory).approvals  # type: ignore[arg-type]


@pytest.fixture
def approvals(store: StoreIO, clock: ManualClock, counter: Counter) -> Approvals:
    return make_approvals(store, clock, scripted_factory(counter))


async def click(
    a: Approvals, offer: CardOffer | None, *, user: str = "u", approved: bool = True, packages: list[str] | None = None
) -> ResumeResult:
    """One click on a card through the resume service, as its owner by default."""
    assert offer is not None, "the turn did not pause on a card"
    answer = Answer(approved=approved, packages=packages)
    return await a.resume(card_id=offer.card.card_id, user=user, secret=offer.secret, answer=answer)


class Api:
    """A client for the running server's /v1 front end, over real HTTP."""

    def __init__(self, session: aiohttp.ClientSession, base: str, token: str = TOKEN) -> None:
        self.session = session
        self.base = base
        self.headers = {"Authorization": f"Bearer {token}"}

    async def turn(self, chat: str, user: str, text: str, **extra: object) -> tuple[int, dict]:
        async with self.session.post(
            f"{self.base}/v1/turns", json={"chat": chat, "user": user, "text": text, **extra}, headers=self.headers
        ) as r:
            return r.status, await r.json()

    async def resume_raw(self, card_id: str, body: object) -> tuple[int, str]:
        async with self.session.post(
            f"{self.base}/v1/interrupts/{card_id}/resume", json=body, headers=self.headers
        ) as r:
            return r.status, await r.text()

    async def resume(
        self, card_id: str, user: str, secret: str, approved: bool = True, status: str = "resolved", **payload: object
    ) -> tuple[int, dict]:
        import json

        body = {
            "user": user,
            "secret": secret,
            "responses": [{"interruptId": card_id, "status": status, "payload": {"approved": approved, **payload}}],
        }
        code, text = await self.resume_raw(card_id, body)
        return code, json.loads(text)

    async def get(self, path: str) -> tuple[int, dict]:
        async with self.session.get(f"{self.base}{path}", headers=self.headers) as r:
            return r.status, await r.json()

    async def delete(self, path: str) -> tuple[int, dict]:
        async with self.session.delete(f"{self.base}{path}", headers=self.headers) as r:
            return r.status, await r.json()


async def serve(approvals: Approvals) -> TestServer:
    cfg = ServerConfig(api_token=TOKEN)
    server = TestServer(build_app(approvals, cfg, sweep=False), host="127.0.0.1")
    await server.start_server()
    return server


@pytest.fixture
async def api(approvals: Approvals) -> AsyncIterator[Api]:
    server = await serve(approvals)
    async with aiohttp.ClientSession() as session:
        yield Api(session, str(server.make_url("")).rstrip("/"))
    await server.close()


@pytest.fixture
async def rig() -> AsyncIterator[SlackRig]:
    """The Slack rig every Slack test file shares (tests/support/slack_rig.py): a real server with the
    default agent and a Slack stand-in. A file that needs another shape (a policy, socket mode,
    a gated tool) overrides `rig` with `running(SlackRig(...))`."""
    from tests.support.slack_rig import SlackRig, running  # only the Slack tests pay for importing it

    async with running(SlackRig()) as r:
        yield r
