"""The least a Slack ack can cost: a reference for bench.bench_slack's ack ratio.

A server that reads the request, checks its signature with the server's own check
(`bots.slack_ingress.refuse_unsigned`: what every endpoint must do before it may answer 200), answers
200 and does nothing else: no payload read, no queue, no resume, no access log. bench_slack sends it
the same signed clicks, from the same kind of client, in the same run and the same arrangement (in
its process, or as N processes) as the real server. The real server does all of this and more for
each click, so its ack p99 in the burst cannot be below the floor's (up to the noise between two
bursts): its ratio cannot be below the floor's p99 over its own 1-at-a-time ack p50. That is the
client's, the kernel's and aiohttp's cost on this machine, which no change to the server removes. By
hand:

    .venv/bin/python -m bench.ack_floor --port 8123 [--secret S]
"""

from __future__ import annotations

import argparse
import os

from aiohttp import web

from chat_approvals.bots.cli import LISTEN_BACKLOG
from chat_approvals.bots.cpus import pin_process
from chat_approvals.bots.slack_ingress import refuse_unsigned
from tests.support.slack_payloads import SIGNING_SECRET


def floor_app(secret: str = SIGNING_SECRET) -> web.Application:
    async def ack(request: web.Request) -> web.Response:
        refused = refuse_unsigned(secret, await request.read(), request.headers)
        return refused if refused is not None else web.Response(status=200)

    async def ready(_: web.Request) -> web.Response:
        return web.Response(status=200)

    app = web.Application()
    app.router.add_post("/slack/events", ack)
    app.router.add_get("/readyz", ready)  # as `chat-approvals serve`, for bench/server_process.py
    return app


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--secret", default=SIGNING_SECRET, help="Slack signing secret (default: the tests')")
    args = p.parse_args()
    pin_process(os.environ.get("CHAT_APPROVALS_CPUS", ""))  # as the server it stands for (bench_slack --pin)
    web.run_app(
        floor_app(args.secret), host=args.host, port=args.port, access_log=None, print=None, backlog=LISTEN_BACKLOG
    )  # as `chat-approvals serve` listens


if __name__ == "__main__":
    main()
