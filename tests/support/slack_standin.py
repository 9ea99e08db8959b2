"""A local stand-in for the Slack Web API, response_url webhooks and Socket Mode, on 127.0.0.1.

It records every call (method, args, monotonic time) so tests can assert on what the front end
sent, can fail chosen calls (rate limits, `message_not_found`), and pushes Socket Mode envelopes
over a WebSocket, returning the ack the app sends back.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from aiohttp import WSMsgType, web

TEAM = "T0APPROV1"
BOT_USER = "U0BOTUSER"
BOT_ID = "B0BOTID01"
SINGLE_TOKEN = "xoxb-test-token"  # the one workspace's token (SLACK_BOT_TOKEN in the rigs)
CLIENT_ID = "1111.2222"  # the OAuth app's credentials (issue 31)
CLIENT_SECRET = "test-client-secret"


@dataclass
class Grant:
    """A token the stand-in issued by OAuth: whose it is, until when, and whether it still works."""

    team: str | None  # None: an org-wide install (the enterprise's)
    enterprise: str | None
    expires_at: float | None = None
    expired: bool = False  # the test says this token no longer works (time passed, or revoked)


@dataclass
class Call:
    method: str  # "chat.update", or "response_url" for webhook posts
    args: dict[str, Any]
    token: str | None
    at: float = field(default_factory=time.monotonic)
    result: dict[str, Any] = field(default_factory=dict)  # what the stand-in answered


class SlackStandIn:
    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.messages: dict[tuple[str, str], dict[str, Any]] = {}
        self.fail: dict[str, list[str]] = {}  # method -> errors to answer with, in order
        self.usergroups: dict[str, list[str]] = {}  # S… -> its members' user ids
        self.hold: dict[str, asyncio.Event] = {}  # method -> answered only once the event is set
        # OAuth (issue 31): codes a person's consent would give, the tokens issued, and how they rotate.
        self.codes: dict[str, Grant] = {}
        self.tokens: dict[str, Grant] = {}
        self.refresh_tokens: dict[str, str] = {}  # refresh token -> the access token it replaces
        self.token_lifetime: int | None = None  # seconds; None: tokens that never expire (no rotation)
        self.refresh_fails = False
        self._n = itertools.count(1)
        self._ts = itertools.count(1)
        self._ws: web.WebSocketResponse | None = None
        self._connected = asyncio.Event()
        self._acks: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.changed = asyncio.Condition()
        app = web.Application()
        app.router.add_post("/api/{method}", self._api)
        app.router.add_get("/api/{method}", self._api)  # slack_sdk GETs a few (usergroups.users.list)
        app.router.add_post("/response/{hook}", self._webhook)
        app.router.add_get("/link", self._link)
        self._app = app

    async def start(self) -> SlackStandIn:
        self._runner = web.AppRunner(self._app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        if self._ws is not None:
            await self._ws.close()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/"

    def response_url(self, hook: str = "hook") -> str:
        return f"http://127.0.0.1:{self.port}/response/{hook}"

    # ------------------------------------------------------------------ inspection

    def of(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    async def wait_for(self, predicate: Any, timeout: float = 10.0) -> None:
        """Wait (bounded) until predicate(self) holds; re-checked after every recorded call."""
        async with asyncio.timeout(timeout), self.changed:
            await self.changed.wait_for(lambda: predicate(self))

    async def _record(self, call: Call) -> None:
        self.calls.append(call)
        async with self.changed:
            self.changed.notify_all()

    # ------------------------------------------------------------------ Web API

    @staticmethod
    async def _args(request: web.Request) -> dict[str, Any]:
        if request.method == "GET":
            return dict(request.query)
        raw = await request.text()
        if "json" in request.headers.get("Content-Type", "") and raw:
            args: dict[str, Any] = json.loads(raw)
            return args
        args = {k: v[0] for k, v in parse_qs(raw).items()}
        for k in ("blocks", "attachments"):
            if isinstance(args.get(k), str):
                args[k] = json.loads(args[k])
        return args

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args = await self._args(request)
        auth = request.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None
        basic = auth.removeprefix("Basic ") if auth.startswith("Basic ") else None
        call = Call(method, args, token)

        def ok(**body: Any) -> web.Response:
            call.result = {"ok": True, **body}
            return web.json_response(call.result)

        def err(error: str, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
            call.result = {"ok": False, "error": error}
            return web.json_response(call.result, status=status, headers=headers)

        held = self.hold.get(method)
        if held is not None:
            await held.wait()  # a slow Slack: the test sets the event (and bounds its own wait)
        try:
            return self._answer(method, args, token, ok, err, basic)
        finally:
            await self._record(call)  # recorded with its answer, so waiters see both

    # ------------------------------------------------------------------ OAuth (issue 31)

    def consent(self, team: str | None, enterprise: str | None = None) -> str:
        """What a person's "Allow" on slack.com gives the redirect: a one-time code. `team` None with
        an enterprise: an org-wide install on Enterprise Grid."""
        code = f"code-{next(self._n)}"
        self.codes[code] = Grant(team, enterprise)
        return code

    def _issue(self, grant: Grant) -> dict[str, Any]:
        n = next(self._n)
        token = f"xoxb-{grant.team or grant.enterprise}-{n}"
        body: dict[str, Any] = {"access_token": token, "token_type": "bot"}
        issued = Grant(grant.team, grant.enterprise)
        if self.token_lifetime is not None:
            issued.expires_at = time.time() + self.token_lifetime
            refresh = f"xoxe-1-{grant.team or grant.enterprise}-{n}"
            self.refresh_tokens[refresh] = token
            body.update(refresh_token=refresh, expires_in=self.token_lifetime)
        self.tokens[token] = issued
        return body

    def _oauth(self, args: dict[str, Any], basic: str | None, ok: Any, err: Any) -> web.Response:
        if basic != base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode():
            return err("invalid_client_id")
        if args.get("grant_type") == "refresh_token":
            old = self.refresh_tokens.pop(str(args.get("refresh_token")), None)
            if old is None or self.refresh_fails:
                return err("invalid_refresh_token")
            return ok(**self._issue(self.tokens[old]))
        grant = self.codes.pop(str(args.get("code")), None)  # a code works once
        if grant is None:
            return err("invalid_code")
        org_wide = grant.team is None
        return ok(
            app_id="A0APPROV1",
            authed_user={"id": "U0INSTALLER"},
            scope="chat:write,commands",
            bot_user_id=BOT_USER,
            team=None if org_wide else {"id": grant.team, "name": f"Team {grant.team}"},
            enterprise={"id": grant.enterprise, "name": "Grid"} if grant.enterprise else None,
            is_enterprise_install=org_wide,
            **self._issue(grant),
        )

    def whose(self, token: str | None) -> Grant | None:
        """The workspace a token belongs to: one the stand-in issued by OAuth, else any other bot
        token is the single-token mode's one workspace."""
        if token in self.tokens:
            return self.tokens[token]
        return Grant(TEAM, None) if (token or "").startswith("xoxb-") else None

    def _answer(
        self, method: str, args: dict[str, Any], token: str | None, ok: Any, err: Any, basic: str | None = None
    ) -> web.Response:
        if method == "apps.connections.open":
            if not (token or "").startswith("xapp-"):
                return err("invalid_auth")
            return ok(url=f"ws://127.0.0.1:{self.port}/link")
        if method == "oauth.v2.access":
            return self._oauth(args, basic, ok, err)
        grant = self.whose(token)
        if grant is None:
            return err("invalid_auth")
        if grant.expired or (grant.expires_at is not None and grant.expires_at < time.time()):
            return err("token_expired")
        pending = self.fail.get(method)
        if pending:
            error = pending.pop(0)
            if error == "ratelimited":
                return err(error, status=429, headers={"Retry-After": "0"})
            return err(error)
        if method == "auth.test":
            team, bot = grant.team, BOT_ID if token not in self.tokens else f"B0{grant.team or grant.enterprise}"
            return ok(team_id=team, enterprise_id=grant.enterprise, team="Approvals Test", user_id=BOT_USER,
                      bot_id=bot, url="https://x/", is_enterprise_install=team is None)  # fmt: skip
        if method in ("chat.postMessage", "chat.update"):
            channel = args.get("channel")
            if not channel or not (args.get("text") or args.get("blocks")):
                return err("no_text" if channel else "channel_not_found")
            if isinstance(args.get("blocks"), list) and len(args["blocks"]) > 50:
                return err("invalid_blocks")
            ts = f"{1_800_000_000 + next(self._ts)}.000100" if method == "chat.postMessage" else str(args.get("ts"))
            if method == "chat.update" and (channel, ts) not in self.messages:
                return err("message_not_found")
            message = {"type": "message", "ts": ts, "text": args.get("text"), "blocks": args.get("blocks") or []}
            if args.get("thread_ts"):
                message["thread_ts"] = args["thread_ts"]
            elif (channel, ts) in self.messages and "thread_ts" in self.messages[(channel, ts)]:
                message["thread_ts"] = self.messages[(channel, ts)]["thread_ts"]
            self.messages[(channel, str(ts))] = message
            return ok(channel=channel, ts=ts, message=message)
        if method == "usergroups.users.list":
            group = str(args.get("usergroup", ""))
            if group not in self.usergroups:
                return err("no_such_subteam")
            return ok(users=list(self.usergroups[group]))
        if method == "chat.getPermalink":
            channel, ts = str(args.get("channel", "")), str(args.get("message_ts", ""))
            if (channel, ts) not in self.messages:
                return err("message_not_found")
            link = f"https://approvals-test.slack.com/archives/{channel}/p{ts.replace('.', '')}"
            return ok(channel=channel, permalink=link)
        if method == "views.open":  # the Approve with edits modal (issue 32)
            if not args.get("trigger_id") or not args.get("view"):
                return err("invalid_arguments")
            return ok(view={"id": f"V{next(self._ts)}"})
        if method == "chat.postEphemeral":
            if not args.get("user") or not args.get("channel"):
                return err("user_not_in_channel")
            return ok(message_ts=f"{1_800_000_000 + next(self._ts)}.000200")
        return err("unknown_method")

    async def _webhook(self, request: web.Request) -> web.Response:
        args = await self._args(request)
        args["_hook"] = request.match_info["hook"]
        await self._record(Call("response_url", args, None))
        return web.Response(text="ok")

    # ------------------------------------------------------------------ Socket Mode

    async def _link(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self._ws = ws
        await ws.send_json({"type": "hello", "num_connections": 1, "connection_info": {"app_id": "A0APPROV1"}})
        self._connected.set()
        async for msg in ws:
            if msg.type != WSMsgType.TEXT:
                continue
            ack = json.loads(msg.data)
            fut = self._acks.pop(str(ack.get("envelope_id")), None)
            if fut is not None and not fut.done():
                fut.set_result(ack)
        return ws

    async def push(self, envelope: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
        """Send one envelope to the connected app and return its ack."""
        async with asyncio.timeout(timeout):
            await self._connected.wait()
            assert self._ws is not None
            fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
            self._acks[envelope["envelope_id"]] = fut
            await self._ws.send_json(envelope)
            return await fut
