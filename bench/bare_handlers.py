"""Bare click handlers: only the platform's part of a click, for bench.bench_cpu (issue 34, target 2).

    .venv/bin/python -m bench.bare_handlers --platform slack --port 8123 --api URL
    .venv/bin/python -m bench.bare_handlers --platform teams --port 8123

Slack (POST /slack/events): the signature verified (slack_sdk's SignatureVerifier, what Bolt uses),
the block_actions payload read, the 200 ack, then one `chat.update` of the clicked message through
slack_sdk's AsyncWebClient (at `--api`, the bench's Web API stand-in).
Teams (POST /api/messages): the invoke parsed into botbuilder's Activity, answered with an adaptive
card invoke response, and one reply posted to the activity's serviceUrl (the bench's connector).
No store, no agent, no queue, no access log: what any server must do for a click on that platform.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from typing import Any
from urllib.parse import parse_qs

import aiohttp
from aiohttp import web
from botbuilder.schema import Activity
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient

from chat_approvals.bots.cli import LISTEN_BACKLOG
from chat_approvals.bots.cpus import pin_process
from tests.support.slack_payloads import SIGNING_SECRET

OUTCOME = [{"type": "section", "text": {"type": "mrkdwn", "text": "Approved by <@U0BENCH>"}}]


def slack_app(api_url: str, secret: str = SIGNING_SECRET) -> web.Application:
    verifier = SignatureVerifier(secret)
    client = AsyncWebClient(token="xoxb-bare", base_url=api_url.rstrip("/") + "/")
    tasks: set[asyncio.Task[Any]] = set()

    async def start(_: web.Application) -> None:
        client.session = aiohttp.ClientSession()  # one pooled session, as the server keeps (bots/slack_web.py)

    async def stop(_: web.Application) -> None:
        if client.session is not None:
            await client.session.close()

    async def click(request: web.Request) -> web.Response:
        body = await request.read()
        if not verifier.is_valid_request(body, dict(request.headers)):
            return web.Response(status=401)
        payload = json.loads(parse_qs(body.decode())["payload"][0])
        update = client.chat_update(
            channel=payload["channel"]["id"], ts=payload["message"]["ts"], text="Approved", blocks=OUTCOME
        )
        task = asyncio.ensure_future(update)  # after the ack, as a server must (Slack's 3 s)
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        return web.Response(status=200)

    app = web.Application()
    app.router.add_post("/slack/events", click)
    app.router.add_get("/readyz", ready)
    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    return app


def teams_app() -> web.Application:
    holder: dict[str, aiohttp.ClientSession] = {}

    async def start(_: web.Application) -> None:
        holder["http"] = aiohttp.ClientSession()

    async def stop(_: web.Application) -> None:
        await holder["http"].close()

    async def invoke(request: web.Request) -> web.Response:
        activity = Activity().deserialize(await request.json())
        conversation = activity.conversation.id
        card = {
            "type": "AdaptiveCard",
            "version": "1.4",
            "body": [{"type": "TextBlock", "text": "Approved by Alex Wilber", "wrap": True}],
        }
        reply = Activity(type="message", text="Approved: fetched.", reply_to_id=activity.id).serialize()
        url = f"{activity.service_url.rstrip('/')}/v3/conversations/{conversation}/activities"
        async with holder["http"].post(url, json=reply) as r:
            await r.read()
        return web.json_response({"statusCode": 200, "type": "application/vnd.microsoft.card.adaptive", "value": card})

    app = web.Application()
    app.router.add_post("/api/messages", invoke)
    app.router.add_get("/readyz", ready)
    app.on_startup.append(start)
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
    args = p.parse_args()
    if args.platform == "slack" and not args.api:
        p.error("--platform slack needs --api")
    pin_process(os.environ.get("CHAT_APPROVALS_CPUS", ""))
    app = slack_app(args.api) if args.platform == "slack" else teams_app()
    web.run_app(app, host=args.host, port=args.port, access_log=None, print=None, backlog=LISTEN_BACKLOG)


if __name__ == "__main__":
    main()
