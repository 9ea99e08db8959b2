"""Bare click handlers: only the platform's part of a click, for bench.bench_cpu (issue 34, target 2).

    .venv/bin/python -m bench.bare_handlers --platform slack --port 8123 --api URL [--durable | --least | --libraries]
    .venv/bin/python -m bench.bare_handlers --platform teams --port 8123 [--durable | --least | --libraries]

Slack (POST /slack/events): the signature verified (slack_sdk's SignatureVerifier, what Bolt uses),
the block_actions payload read, the 200 ack, then one `chat.update` of the clicked message through
slack_sdk's AsyncWebClient (at `--api`, the bench's Web API stand-in).
Teams (POST /api/messages): the invoke parsed into botbuilder's Activity, answered with an adaptive
card invoke response, and one reply posted to the activity's serviceUrl (the bench's connector).
No store, no agent, no queue, no access log: what any server must do for a click on that platform.
The libraries run with the server's generic speed-ups to them (`bare_speedups`): slack_sdk's URL
made once per method, msrest's mapped keys worked out once per model and its replies serialised from
the attributes that are set, so that the bare handler is never dearer than the server at the same
step.

`--durable` adds what a durable approval click cannot do without, and nothing else (the bench's
bound for target 2): the card's claim and the turn's finish, each one fsync'd SQLite commit
(WAL, synchronous=FULL, as the server's) through a thread, the claim reading a snapshot-sized blob
back and the finish writing one; and for Slack one more Web API call, the resumed turn's reply
(`chat.postMessage`; Teams's bare handler already posts its reply). No audit, no card, no policy.

`--least` is `--durable` with the agent's part in the same process: between the claim and the
finish each click resumes a Strands Agent paused here beforehand (bench.bench_peers' agent, the
bench's agent in memory; `POST /prepare?n=N` pauses N of them, outside the measured burst), as the
server resumes the turn it holds. The least click any durable server on Strands can serve, run for
real: its CPU is the bound the bench prints, where `--durable` plus the agent timed alone is only
arithmetic (the agent alone runs with warm caches, between nothing else).

`--libraries` is `--least` on the libraries DESIGN names for each front end, used as the server uses
them: for Slack the outcome and the reply built with slack_sdk's Block Kit models
(`slack_sdk.models.blocks`); for Teams the invoke handed to botbuilder-core (the server's own
`teams_compat.process` and adapter: the R20 edge check, botbuilder's CloudAdapter without an app
id, as the bench's server runs), a TeamsActivityHandler answering it in its turn and sending the
reply through the turn's connector client. Still no audit, card, policy or protocol.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sqlite3
import tempfile
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import aiohttp
from aiohttp import web
from botbuilder.core import InvokeResponse, TurnContext
from botbuilder.core.teams import TeamsActivityHandler
from botbuilder.schema import Activity, ActivityTypes
from slack_sdk.models.blocks import MarkdownTextObject, SectionBlock
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient
from strands import Agent

from bench.bench_peers import _pause, _resume, new_agent
from chat_approvals.bots import slack_compat, teams_compat, teams_deserializer
from chat_approvals.bots.cli import LISTEN_BACKLOG
from chat_approvals.bots.cpus import pin_process
from chat_approvals.bots.slack_config import remember_urls
from chat_approvals.bots.teams_activity import SentActivity, text_activity
from chat_approvals.bots.teams_serializer import PresentOnlySerializer
from tests.support.slack_payloads import SIGNING_SECRET

OUTCOME_TEXT, REPLY_TEXT = "Approved by <@U0BENCH>", "Fetched: 200 OK, 1,204 bytes."
OUTCOME = [{"type": "section", "text": {"type": "mrkdwn", "text": OUTCOME_TEXT}}]
REPLY = [{"type": "section", "text": {"type": "mrkdwn", "text": REPLY_TEXT}}]
SNAPSHOT = 1500  # bytes: the bench agent's stored snapshot and history are 1.3-1.8 KB each
ROWS = 4096  # cards, reused in turn: the finish opens its row again


def bare_speedups() -> None:
    """The server's speed-ups to the libraries that apply to any handler (bots/slack_config.py
    `remember_urls`, bots/slack_compat.py, bots/teams_compat.py workaround 14; workaround 12's
    serialiser (with 16's plans) is used for the reply below, workaround 15's reader (with 17's
    plans) for the invoke): the bare handler must not pay for a step more than the server does."""
    remember_urls()
    slack_compat.apply()
    teams_deserializer.apply()


REPLY_SERIALIZER = PresentOnlySerializer(Activity._infer_class_models())
REPLY_SERIALIZER.client_side_validation = False  # as the server's connector clients (workaround 10)


class DurableSteps:
    """The two commits of a durable click, each through a thread: the claim (`UPDATE ... WHERE
    open RETURNING` the snapshot) and the finish (the new snapshot written, the row done; here
    opened again, so rows are reused). One writer at a time, as the server's WriteGate."""

    def __init__(self, folder: Path) -> None:
        self.path = str(folder / "bare.db")
        self._local = threading.local()
        self._write = threading.Lock()
        self._pool = ThreadPoolExecutor(4, thread_name_prefix="bare-store")
        self._next = 0
        blob = os.urandom(SNAPSHOT)
        c = self._conn()
        c.execute("CREATE TABLE cards (n INTEGER PRIMARY KEY, state TEXT NOT NULL, snapshot BLOB NOT NULL)")
        c.execute("BEGIN")
        c.executemany("INSERT INTO cards VALUES (?, 'open', ?)", [(n, blob) for n in range(ROWS)])
        c.execute("COMMIT")

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            self._local.conn = conn
        return conn

    def _commit(self, sql: str, args: tuple[Any, ...]) -> list[Any]:
        conn = self._conn()
        with self._write:
            conn.execute("BEGIN IMMEDIATE")
            rows = conn.execute(sql, args).fetchall()
            conn.execute("COMMIT")
        return rows

    async def click(self, resume: Callable[[], Awaitable[None]] | None = None) -> None:
        """The claim's commit, `resume` (--least: the held agent), the finish's commit."""
        n, self._next = self._next, (self._next + 1) % ROWS
        loop = asyncio.get_running_loop()
        claim = "UPDATE cards SET state = 'claimed' WHERE n = ? AND state = 'open' RETURNING snapshot"
        (row,) = await loop.run_in_executor(self._pool, self._commit, claim, (n,))
        if resume is not None:
            await resume()
        finish = "UPDATE cards SET state = 'open', snapshot = ? WHERE n = ? AND state = 'claimed'"
        await loop.run_in_executor(self._pool, self._commit, finish, (bytes(reversed(row[0])), n))

    def close(self) -> None:
        self._pool.shutdown()


class HeldAgents:
    """--least: Agents paused in this process before a burst, one resumed by each click, in turn."""

    def __init__(self) -> None:
        self._held: deque[tuple[Agent, str]] = deque()

    async def prepare(self, request: web.Request) -> web.Response:
        for _ in range(int(request.query["n"])):
            agent = new_agent()
            self._held.append((agent, await _pause(agent)))
        return web.Response(status=200)

    async def resume(self) -> None:
        agent, interrupt_id = self._held.popleft()
        await _resume(agent, interrupt_id)


def block_kit(text: str) -> list[dict[str, Any]]:
    """--libraries: a message's blocks built with slack_sdk's models, as DESIGN has the server build them."""
    return [SectionBlock(text=MarkdownTextObject(text=text)).to_dict()]


def slack_app(
    api_url: str,
    secret: str = SIGNING_SECRET,
    durable: DurableSteps | None = None,
    held: HeldAgents | None = None,
    libraries: bool = False,
) -> web.Application:
    verifier = SignatureVerifier(secret)
    client = AsyncWebClient(token="xoxb-bare", base_url=api_url.rstrip("/") + "/")
    tasks: set[asyncio.Task[Any]] = set()

    async def start(_: web.Application) -> None:
        client.session = aiohttp.ClientSession()  # one pooled session, as the server keeps (bots/slack_web.py)

    async def stop(_: web.Application) -> None:
        if client.session is not None:
            await client.session.close()

    def ended(task: asyncio.Task[Any]) -> None:
        tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:  # seen, not swallowed: the bench counts calls
            logging.error("a click failed after its ack", exc_info=task.exception())

    async def durably(channel: str, ts: str) -> None:
        assert durable is not None
        await durable.click(None if held is None else held.resume)
        outcome, reply = (block_kit(OUTCOME_TEXT), block_kit(REPLY_TEXT)) if libraries else (OUTCOME, REPLY)
        await client.chat_update(channel=channel, ts=ts, text="Approved", blocks=outcome)
        await client.chat_postMessage(channel=channel, thread_ts=ts, text="Fetched.", blocks=reply)

    async def click(request: web.Request) -> web.Response:
        body = await request.read()
        if not verifier.is_valid_request(body, dict(request.headers)):
            return web.Response(status=401)
        payload = json.loads(parse_qs(body.decode())["payload"][0])
        channel, ts = payload["channel"]["id"], payload["message"]["ts"]
        if durable is None:
            task = asyncio.ensure_future(client.chat_update(channel=channel, ts=ts, text="Approved", blocks=OUTCOME))
        else:
            task = asyncio.ensure_future(durably(channel, ts))
        # after the ack, as a server must (Slack's 3 s)
        tasks.add(task)
        task.add_done_callback(ended)
        return web.Response(status=200)

    app = web.Application()
    app.router.add_post("/slack/events", click)
    app.router.add_get("/readyz", ready)
    if held is not None:
        app.router.add_post("/prepare", held.prepare)
    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    return app


TEAMS_REPLY = "Approved: fetched."


def approved_invoke() -> dict[str, Any]:
    """The invoke's answer: the card replaced by its outcome (built per click, as a server builds it)."""
    card = {
        "type": "AdaptiveCard",
        "version": "1.4",
        "body": [{"type": "TextBlock", "text": "Approved by Alex Wilber", "wrap": True}],
    }
    return {"statusCode": 200, "type": "application/vnd.microsoft.card.adaptive", "value": card}


def teams_app(durable: DurableSteps | None = None, held: HeldAgents | None = None) -> web.Application:
    holder: dict[str, aiohttp.ClientSession] = {}

    async def start(_: web.Application) -> None:
        holder["http"] = aiohttp.ClientSession()

    async def stop(_: web.Application) -> None:
        await holder["http"].close()

    async def invoke(request: web.Request) -> web.Response:
        activity = teams_deserializer.read_activity(await request.json())  # as the server reads it
        conversation = activity.conversation.id
        answer = Activity(type="message", text=TEAMS_REPLY, reply_to_id=activity.id)
        reply = REPLY_SERIALIZER._serialize(answer)
        url = f"{activity.service_url.rstrip('/')}/v3/conversations/{conversation}/activities"
        if durable is not None:
            await durable.click(None if held is None else held.resume)
        async with holder["http"].post(url, json=reply) as r:
            await r.read()
        return web.json_response(approved_invoke())

    app = web.Application()
    app.router.add_post("/api/messages", invoke)
    app.router.add_get("/readyz", ready)
    if held is not None:
        app.router.add_post("/prepare", held.prepare)
    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    return app


class LeastTeamsBot(TeamsActivityHandler):
    """--libraries: the least Teams click in botbuilder's turn, sent as the server's bot sends."""

    def __init__(self, durable: DurableSteps, held: HeldAgents) -> None:
        super().__init__()
        self._durable, self._held = durable, held

    async def on_invoke_activity(self, turn_context: TurnContext) -> InvokeResponse | None:
        await self._durable.click(self._held.resume)
        await turn_context.send_activity(text_activity(TEAMS_REPLY))
        answer = teams_compat.invoke_response(200, approved_invoke())
        await turn_context.send_activity(SentActivity(type=ActivityTypes.invoke_response, value=answer))
        return answer


def teams_library_app(durable: DurableSteps, held: HeldAgents) -> web.Application:
    adapter = teams_compat.make_adapter(teams_compat.TeamsAuth())
    bot = LeastTeamsBot(durable, held)

    async def invoke(request: web.Request) -> web.Response:
        return await teams_compat.process(adapter, request, bot, auth_enabled=False)

    async def stop(_: web.Application) -> None:
        await teams_compat.close_clients(adapter)

    app = web.Application()
    app.router.add_post("/api/messages", invoke)
    app.router.add_get("/readyz", ready)
    app.router.add_post("/prepare", held.prepare)
    app.on_cleanup.append(stop)
    return app


async def ready(_: web.Request) -> web.Response:
    return web.Response(status=200)  # as `chat-approvals serve`, for bench/server_process.py


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--platform", choices=("slack", "teams"), required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--api", help="Slack Web API base URL (with --platform slack)")
    modes = p.add_mutually_exclusive_group()
    modes.add_argument("--durable", action="store_true", help="also the claim's and the finish's commits")
    modes.add_argument("--least", action="store_true", help="--durable with the agent resumed in between (the bound)")
    modes.add_argument("--libraries", action="store_true", help="--least on the libraries DESIGN names")
    args = p.parse_args()
    if args.platform == "slack" and not args.api:
        p.error("--platform slack needs --api")
    pin_process(os.environ.get("CHAT_APPROVALS_CPUS", ""))
    bare_speedups()
    with tempfile.TemporaryDirectory(prefix="bare-") as folder:
        durable = DurableSteps(Path(folder)) if args.durable or args.least or args.libraries else None
        held = HeldAgents() if args.least or args.libraries else None
        if args.platform == "slack":
            app = slack_app(args.api, durable=durable, held=held, libraries=args.libraries)
        elif args.libraries:
            assert durable is not None and held is not None
            app = teams_library_app(durable, held)
        else:
            app = teams_app(durable, held)
        try:
            web.run_app(app, host=args.host, port=args.port, access_log=None, print=None, backlog=LISTEN_BACKLOG)
        finally:
            if durable is not None:
                durable.close()


if __name__ == "__main__":
    main()
