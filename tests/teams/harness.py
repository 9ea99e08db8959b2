"""A real Teams front end on a real aiohttp server (127.0.0.1, ephemeral port), a mock Bot Connector
standing in for Teams' serviceUrl, and the captured Playground activities to send it."""

from __future__ import annotations

import copy
import json
import uuid
from pathlib import Path
from typing import Any, ClassVar

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from chat_approvals.bots.admission import DEFAULT_CAPACITY, DEFAULT_PATIENCE, DEFAULT_WORKERS
from chat_approvals.bots.approvers import ApproverDirectory
from chat_approvals.bots.config import ServerConfig
from chat_approvals.bots.server import build_app
from chat_approvals.bots.teams_bot import TEAMS, TeamsConfig
from chat_approvals.core.agent.factory import AgentFactory
from chat_approvals.core.bootstrap import bootstrap
from chat_approvals.core.clock import ManualClock
from chat_approvals.core.models import Pointer
from chat_approvals.core.protocol.policy import parse_policy
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.file_objects import FileObjects
from chat_approvals.store.sqlite_rows import SqliteRows
from tests.teams.schema import assert_valid_card

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "teams"
TENANT = "00000000-0000-0000-0000-0000000000001"
OWNER_AAD = "00000000-0000-0000-0000-0000000000020"
OWNER = f"teams:{TENANT}:{OWNER_AAD}"  # R17: tenant + Entra object id, as owners and grants hold it
CHAT = f"teams:{TENANT}:f62ca891-03b2-45a6-b15b-0e20fc6f66b1"
OTHER = {"id": "user-id-1", "name": "Megan Bowen", "aadObjectId": "00000000-0000-0000-0000-0000000000021"}


def fixture(name: str) -> dict[str, Any]:
    return copy.deepcopy(json.loads((FIXTURES / name).read_text())["activity"])


class MockConnector:
    """Records every call the bot makes to its serviceUrl and answers like the Playground does."""

    MEMBERS: ClassVar[dict[str, dict[str, str]]] = {
        OWNER_AAD: {"id": "user-id-0", "name": "Alex Wilber", "aadObjectId": OWNER_AAD},
        "user-id-0": {"id": "user-id-0", "name": "Alex Wilber", "aadObjectId": OWNER_AAD},
    }

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self._next = 1796220926142
        self.fail_cards = 0  # answer this many card posts (POSTs with attachments) with a 500

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/_connector/{tail:.*}", self.handle)
        return app

    async def handle(self, req: web.Request) -> web.Response:
        body = await req.json() if req.can_read_body else None
        self.calls.append(
            {"method": req.method, "path": req.path, "body": body, "auth": req.headers.get("Authorization")}
        )
        last = req.path.rsplit("/", 1)[1]
        if req.method == "GET" and "/members/" in req.path:
            member = self.MEMBERS.get(last)
            return web.json_response(member) if member else web.json_response({"error": "not found"}, status=404)
        if req.method == "PUT":
            return web.json_response({"id": last})
        if self.fail_cards and req.method == "POST" and (body or {}).get("attachments"):
            self.fail_cards -= 1
            return web.json_response({"error": {"code": "ServiceError", "message": "injected"}}, status=500)
        self._next += 1
        return web.json_response({"id": str(self._next)}, status=201)

    def posts(self) -> list[dict[str, Any]]:
        return [c for c in self.calls if c["method"] == "POST"]

    def puts(self) -> list[dict[str, Any]]:
        return [c for c in self.calls if c["method"] == "PUT"]

    def cards(self) -> list[dict[str, Any]]:
        """Every Adaptive Card the bot sent or put, in order."""
        out = []
        for c in self.calls:
            for att in (c["body"] or {}).get("attachments") or []:
                out.append(att["content"])
        return out

    def texts(self) -> list[str]:
        return [c["body"]["text"] for c in self.posts() if c["body"] and c["body"].get("text")]


class Bot:
    """One bot process: its own facade, adapter and server over a shared store folder."""

    def __init__(
        self,
        folder: Path,
        clock: ManualClock,
        connector_url: str,
        *,
        invoke_budget: float = 5.0,
        message_budget: float = 5.0,
        agent_factory: AgentFactory | None = None,
        policy: str | None = None,
        resume_workers: int = DEFAULT_WORKERS,
        resume_queue: int = DEFAULT_CAPACITY,
        resume_patience: float | None = DEFAULT_PATIENCE,
        timer_every: float | None = None,
        store: str | None = None,
    ) -> None:
        self.store_url = store  # a store URL for rows and objects (PostgreSQL); None: SQLite + files in the folder
        self.timer_every = timer_every  # issue 33: run the server's timer loop, looking this often
        self.agent_factory = agent_factory
        self.resume_workers, self.resume_queue = resume_workers, resume_queue  # bots/admission.py
        self.resume_patience = resume_patience
        self.policy = parse_policy(policy) if policy is not None else None  # issue 13
        self.folder, self.clock, self.connector_url = folder, clock, connector_url
        self.invoke_budget, self.message_budget = invoke_budget, message_budget
        self.notes: list[str] = []

    async def __aenter__(self) -> Bot:
        self.folder.mkdir(parents=True, exist_ok=True)
        if self.store_url is not None:
            from chat_approvals.store.open import open_objects, open_rows

            store = StoreIO(open_rows(self.store_url), open_objects(self.store_url, self.clock))
        else:
            store = StoreIO(SqliteRows(self.folder / "rows.db"), FileObjects(self.folder / "objects", clock=self.clock))
        approvers = ApproverDirectory(self.policy) if self.policy is not None else None
        self.store = store
        self.approvals = bootstrap(
            store, clock=self.clock, agent_factory=self.agent_factory, policy=self.policy, approvers=approvers
        ).approvals
        cfg = ServerConfig(
            host="127.0.0.1",
            store=self.store_url or f"sqlite:///{self.folder}/rows.db",
            objects=self.store_url or str(self.folder),
            resume_workers=self.resume_workers,
            resume_queue=self.resume_queue,
            resume_patience=self.resume_patience,
            **({"timer_every": self.timer_every} if self.timer_every else {}),
        )
        self.app = build_app(
            self.approvals,
            cfg,
            sweep=False,
            timers=self.timer_every is not None,
            teams=TeamsConfig(invoke_budget=self.invoke_budget, message_budget=self.message_budget),
        )
        self.client = TestClient(TestServer(self.app, host="127.0.0.1"))
        await self.client.start_server()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.app[TEAMS].bot.drain()
        await self.client.close()
        self.store.close()

    def activity(self, name: str, **over: Any) -> dict[str, Any]:
        act = fixture(name)
        act["serviceUrl"] = self.connector_url
        act["id"] = str(uuid.uuid4())
        act.update(over)
        return act

    async def post(self, activity: dict[str, Any], headers: dict[str, str] | None = None) -> tuple[int, Any]:
        resp = await self.client.post("/api/messages", json=activity, headers=headers or {})
        text = await resp.text()
        try:
            return resp.status, (json.loads(text) if text else None)
        except ValueError:
            return resp.status, text

    async def say(self, text: str, **over: Any) -> tuple[int, Any]:
        return await self.post(self.activity("playground-message-text.json", text=text, **over))

    async def click(self, verb: str, data: dict[str, Any], **over: Any) -> tuple[int, Any]:
        act = self.activity("playground-invoke-adaptiveCard-action.json", **over)
        act["value"] = {"action": {"type": "Action.Execute", "title": verb.title(), "verb": verb, "data": data}}
        return await self.post(act)

    async def pointer(self, card_id: str) -> Pointer | None:
        store = self.store
        return await store.run(store.rows.get_pointer_by_card, card_id)

    async def drain(self) -> None:
        await self.app[TEAMS].bot.drain()


def card_data(card: dict[str, Any]) -> dict[str, Any]:
    """The data of the Approve button of an approval card (card id + secret)."""
    approve = next(a for a in card.get("actions", []) if a.get("verb") == "approve")
    return dict(approve["data"])


def card_text(card: dict[str, Any]) -> str:
    return json.dumps(card)


CONTENT = "application/vnd.microsoft.card.adaptive"


def invoke_card(status: int, body: Any) -> dict[str, Any]:
    """The card a click's invoke reply carries (HTTP 200, an invoke response of type CONTENT),
    checked against the Adaptive Card schema: the one reading of it every Teams test shares."""
    assert status == 200, body
    assert body["statusCode"] == 200 and body["type"] == CONTENT
    card: dict[str, Any] = body["value"]
    assert_valid_card(card)
    return card
