"""A running chat-approvals server with the Slack front end mounted, a Slack stand-in, and a client
that sends correctly signed requests to it over real HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp
from aiohttp import web
from slack_sdk.models.blocks import Block
from slack_sdk.web.async_client import AsyncWebClient

from chat_approvals.bots.approvers import ApproverDirectory, SlackLookup
from chat_approvals.bots.config import ServerConfig
from chat_approvals.bots.server import build_app
from chat_approvals.bots.slack_app import SLACK, SlackFrontEnd
from chat_approvals.bots.slack_config import SlackConfig
from chat_approvals.bots.slack_install import TokenBox
from chat_approvals.cards import slack_blocks as sb
from chat_approvals.core.agent.factory import AgentFactory
from chat_approvals.core.bootstrap import Root, bootstrap
from chat_approvals.core.clock import ManualClock
from chat_approvals.core.identity import SlackUser
from chat_approvals.core.ports import InstallationRecords
from chat_approvals.core.protocol.policy import parse_policy
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.open import open_objects, open_rows
from tests.support import slack_payloads as P
from tests.support.slack_standin import CLIENT_ID, CLIENT_SECRET, SINGLE_TOKEN, Call, SlackStandIn

# Bolt reads SLACK_* itself (SLACK_CLIENT_ID + SLACK_CLIENT_SECRET would switch it to OAuth).
for _k in [k for k in os.environ if k.startswith("SLACK_")]:
    del os.environ[_k]

STATE_COOKIE = "slack-app-oauth-state"  # Bolt's default cookie for the OAuth state
OWNER = "U0OWNER"
OTHER = "U0OTHER"
OWNER_KEY = SlackUser(None, P.TEAM, OWNER).key  # R17: the identity grants and owners are keyed by
DM = "D0DMCHAN1"


def open_root(
    folder: Path,
    clock: ManualClock,
    factory: AgentFactory | None = None,
    policy: str | None = None,
    slack: SlackLookup | Callable[[InstallationRecords], SlackLookup | None] | None = None,
    store: str | None = None,
) -> Root[StoreIO]:
    """`slack`: the policy's Slack lookup, or how to make it on the store's installations (OAuth).
    `store`: a store URL (e.g. postgresql://...), rows and objects both; else a SQLite file in `folder`."""
    db = store or f"sqlite:///{folder}/rows.db"  # objects in the same file: the server's default (issue 12)
    io = StoreIO(open_rows(db), open_objects(db, clock))
    if callable(slack):
        slack = slack(io.ports().rows)
    if policy is None:
        return bootstrap(io, clock=clock, agent_factory=factory)
    p = parse_policy(policy)  # issue 13: the approval policy, with the approvers the server would build
    return bootstrap(io, clock=clock, agent_factory=factory, policy=p, approvers=ApproverDirectory(p, slack=slack))


def assert_valid_blocks(call: Call) -> list[dict[str, Any]]:
    """Every message the front end sent must round-trip through slack_sdk's Block Kit models."""
    blocks = call.args.get("blocks") or []
    assert isinstance(blocks, list) and len(blocks) <= sb.MAX_BLOCKS
    assert [b.to_dict() for b in Block.parse_all(blocks)] == blocks
    assert call.args.get("text"), "every message needs fallback text"
    return blocks


def buttons(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for b in blocks:
        out += [e for e in b.get("elements", []) if e.get("type") == "button"]
        if (b.get("accessory") or {}).get("type") == "button":
            out.append(b["accessory"])
    return out


class SlackRig:
    def __init__(
        self,
        folder: Path | None = None,
        *,
        socket_mode: bool = False,
        factory: AgentFactory | None = None,
        policy: str | None = None,
        server: dict[str, Any] | None = None,
        timers: bool = False,
        store: str | None = None,
        oauth: bool = False,
        resuming_after: float | None = 0.0,
    ) -> None:
        self.store_url = store  # a store URL for rows and objects (PostgreSQL); None: SQLite in the folder
        # "Resuming…" at once unless a test asks for the server's delay (None: serve's default), so the
        # tests of its order against the outcome see it every time.
        self.resuming_after = resuming_after
        self.oauth = oauth  # issue 31: installed by OAuth in many workspaces, no SLACK_BOT_TOKEN
        self.token_key = TokenBox.new_key()
        self.timers = timers  # issue 33: run the server's timer loop (reminders, escalation, expiry)
        self.factory = factory
        self.policy = policy
        self.server = server or {}  # ServerConfig fields (e.g. bots/admission.py's resume_workers)
        self._tmp = None if folder else tempfile.TemporaryDirectory()
        self.folder = folder or Path(self._tmp.name)  # type: ignore[union-attr]
        self.clock = ManualClock(time.time())
        self.socket_mode = socket_mode
        self.standin = SlackStandIn()
        self.session: aiohttp.ClientSession | None = None
        self.runner: web.AppRunner | None = None
        self.port = 0
        self._n = 0

    async def start(self, standin: SlackStandIn | None = None) -> SlackRig:
        if standin is not None:
            self.standin = standin
        else:
            await self.standin.start()
        # The policy's Slack lookup (workspace, user groups) asks the stand-in, as serve's asks Slack.
        lookup = SlackLookup(AsyncWebClient(token="xoxb-test-token", base_url=self.standin.api_url), self.clock)
        env = {
            "SLACK_BOT_TOKEN": "" if self.oauth else SINGLE_TOKEN,
            "SLACK_SIGNING_SECRET": "" if self.socket_mode else P.SIGNING_SECRET,
            "SLACK_APP_TOKEN": "xapp-1-test" if self.socket_mode else "",
            "CHAT_APPROVALS_SLACK_API_URL": self.standin.api_url,
            "SLACK_CLIENT_ID": CLIENT_ID if self.oauth else "",
            "SLACK_CLIENT_SECRET": CLIENT_SECRET if self.oauth else "",
            "CHAT_APPROVALS_SLACK_TOKEN_KEY": self.token_key if self.oauth else "",
            "CHAT_APPROVALS_SLACK_RESUMING_AFTER": "" if self.resuming_after is None else str(self.resuming_after),
        }
        if self.oauth:  # as serve builds it: each workspace's token from the store's installations
            cfg_slack = SlackConfig.from_env(env)
            self.root = open_root(
                self.folder,
                self.clock,
                self.factory,
                self.policy,
                lambda r: SlackLookup.of(cfg_slack, self.clock, r),
                self.store_url,
            )
        else:
            self.root = open_root(self.folder, self.clock, self.factory, self.policy, lookup, self.store_url)
        self.approvals, self.store = self.root.approvals, self.root.store
        # The server mounts Slack from the environment, as `chat-approvals serve` does.
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            cfg = ServerConfig(store=self.store_url or f"sqlite:///{self.folder}/rows.db", **self.server)
            app = build_app(self.approvals, cfg, sweep=False, timers=self.timers)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        self.front: SlackFrontEnd = app[SLACK]
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = self.runner.addresses[0][1]
        self.session = aiohttp.ClientSession()
        return self

    async def stop(self, *, standin: bool = True) -> None:
        if self.session is not None:
            await self.session.close()
        if self.runner is not None:
            await self.runner.cleanup()
        self.root.close()
        if standin:
            await self.standin.stop()
        if self._tmp is not None:
            self._tmp.cleanup()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/slack/events"

    # ------------------------------------------------------------------ signed requests

    async def send(
        self,
        body: bytes,
        ctype: str,
        *,
        timestamp: int | None = None,
        secret: str = P.SIGNING_SECRET,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, str]:
        assert self.session is not None
        h = P.signed_headers(body, ctype, secret=secret, timestamp=timestamp)
        h.update(headers or {})
        async with self.session.post(self.url, data=body, headers=h) as r:
            return r.status, await r.text()

    def next_ts(self) -> str:
        self._n += 1
        return f"{int(time.time())}.{self._n:06d}"

    async def dm(self, text: str, *, user: str = OWNER, event_id: str | None = None, **kw: Any) -> tuple[int, str]:
        ts = self.next_ts()
        payload = P.message_im(text=text, user=user, channel=DM, event_id=event_id or f"Ev{ts}", ts=ts)
        return await self.send(*P.json_body(payload), **kw)

    async def owner_says(self, text: str, thread_ts: str | None = None) -> list[Call]:
        """The owner writes in the DM (in `thread_ts`, when given); waits for and returns the
        cards it posted."""
        before = len(self.card_calls())
        ts = self.next_ts()
        payload = P.message_im(text=text, user=OWNER, channel=DM, event_id=f"Ev{ts}", ts=ts)
        if thread_ts:
            payload["event"]["thread_ts"] = thread_ts
        assert await self.send(*P.json_body(payload)) == (200, "")
        await self.standin.wait_for(lambda s: len(self.card_calls()) > before)
        await self.settle()
        return self.card_calls()[before:]

    def card_calls(self) -> list[Call]:
        return [c for c in self.standin.of("chat.postMessage") if buttons(c.args.get("blocks") or [])]

    def click_payload(
        self,
        card_call: Call,
        *,
        user: str = OWNER,
        action: str = sb.ACTION_APPROVE,
        state: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        blocks = assert_valid_blocks(card_call)
        value = next(b["value"] for b in buttons(blocks) if b["action_id"] == action)
        ts = card_call.result["ts"]
        message = self.standin.messages[(card_call.args["channel"], ts)]
        return P.block_actions(
            action_id=action, value=value, user=user, channel=card_call.args["channel"], message_ts=ts,
            message=message, thread_ts=card_call.args.get("thread_ts"), response_url=self.standin.response_url(),
            state=state,
        )  # fmt: skip

    async def click(self, payload: dict[str, Any], **kw: Any) -> tuple[int, str]:
        return await self.send(*P.interactive_body(payload), **kw)

    async def command(self, text: str, *, user: str = OWNER, channel: str = DM) -> tuple[int, str]:
        fields = P.slash_command(text=text, user=user, channel=channel, response_url=self.standin.response_url("cmd"))
        return await self.send(*P.form_body(fields))

    # ------------------------------------------------------------------ OAuth installs (issue 31)

    async def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, str, Any]:
        assert self.session is not None
        url = f"http://127.0.0.1:{self.port}{path}"
        async with self.session.get(url, headers=headers or {}, allow_redirects=False) as r:
            return r.status, await r.text(), r.headers

    async def begin_install(self) -> str:
        """GET /slack/install as a browser: the state Bolt issued, from the cookie it set (and the
        same state in the authorize link it shows)."""
        status, html, headers = await self.get("/slack/install")
        assert status == 200, html
        cookie = SimpleCookie(headers.get("Set-Cookie", ""))
        state = cookie[STATE_COOKIE].value
        assert f"state={state}" in html
        return state

    async def finish_install(self, state: str, code: str, *, cookie: str | None = None) -> tuple[int, str]:
        """The browser back from slack.com: the redirect with the code and the state (and the
        state's cookie, unless `cookie` says otherwise)."""
        query = urlencode({"code": code, "state": state})
        status, html, _ = await self.get(
            f"/slack/oauth_redirect?{query}", {"Cookie": f"{STATE_COOKIE}={state if cookie is None else cookie}"}
        )
        return status, html

    async def install(self, team: str | None, enterprise: str | None = None) -> str:
        """The whole install as a person does it; returns the bot token Slack issued."""
        state = await self.begin_install()
        before = set(self.standin.tokens)
        status, html = await self.finish_install(state, self.standin.consent(team, enterprise))
        assert status == 200, html
        (token,) = set(self.standin.tokens) - before
        return token

    # ------------------------------------------------------------------ store views

    async def snapshot(self, card_id: str) -> dict[str, Any]:
        """What a refused click must not change: the pointer, the grants, the audit trail."""
        io = self.store
        pointer = await io.run(io.rows.get_pointer_by_card, card_id)
        chat = pointer.chat if pointer else ""
        return {
            "pointer": pointer.model_dump() if pointer else None,
            "grants": [g.model_dump() for g in await self.approvals.grants(user=OWNER_KEY)],
            "audit": [e.model_dump() for e in await self.approvals.audit(chat)],
        }

    async def settle(self) -> None:
        await self.front.drain()
        await asyncio.sleep(0)


@contextlib.asynccontextmanager
async def running(rig: SlackRig) -> AsyncIterator[SlackRig]:
    """The one way a test starts and stops a rig (the `rig` fixture of tests/conftest.py, and a
    test file's own rig of another shape): stopped even when the test fails."""
    started = await rig.start()
    try:
        yield started
    finally:
        await started.stop()
