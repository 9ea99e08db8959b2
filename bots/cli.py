"""`chat-approvals`: serve, or work on the configured store from a shell."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from bots import teams_package
from bots.config import ServerConfig
from bots.gate import build_gate
from bots.server import build_app, build_approvals
from bots.slack_app import SlackConfig
from cards.http_json import grant_body, resume_body, turn_body
from core.approvals import Approvals
from core.models import Answer


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", help="rows: sqlite:///PATH (default sqlite:///var/approvals.db) or dynamodb://TABLE?...")
    p.add_argument("--objects", help="objects: a folder (default var/objects) or s3://BUCKET/prefix?...")
    p.add_argument("--model", help="scripted (offline, default) or provider:model_id")
    p.add_argument("--agent", help="module:function returning a Strands Agent")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="chat-approvals", description=__doc__)
    sub = top.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the server")
    _common(serve)
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--api-token", help="comma-separated bearer tokens for the HTTP front end (/v1)")
    serve.add_argument("--sandbox", action="store_true", default=None, help="register run_script (egress gate on)")
    serve.add_argument("--sandbox-timeout", type=float, help="run_script time limit in seconds (default 60)")
    serve.add_argument("--gate-host", help="address the egress gate listens on (default 127.0.0.1)")
    serve.add_argument("--gate-port", type=int, help="egress gate port (default: any free one)")
    serve.add_argument("--gate-allow", action="append", help="HOST, *.HOST, HOST:PORT or package:NAME; repeatable")
    serve.add_argument("--gate-deny", action="append", help="like --gate-allow; wins over allow and grants")
    serve.add_argument("--gate-resolve", action="append", help="HOST[:PORT]=IP:PORT (like curl --resolve)")
    serve.add_argument("--package-index", help="upstream PEP 503 index for pip, e.g. https://pypi.org/simple/")

    run = sub.add_parser("run", help="one turn from a shell")
    _common(run)
    run.add_argument("--chat", required=True)
    run.add_argument("--user", required=True)
    run.add_argument("--unattended", action="store_true")
    run.add_argument("text")

    resume = sub.add_parser("resume", help="answer a card from a shell")
    _common(resume)
    resume.add_argument("card_id")
    resume.add_argument("--user", required=True)
    resume.add_argument("--secret", required=True)
    choice = resume.add_mutually_exclusive_group(required=True)
    choice.add_argument("--approve", action="store_true")
    choice.add_argument("--deny", action="store_true")
    resume.add_argument("--packages", nargs="*", help="with --approve: only these of the card's packages")

    grants = sub.add_parser("grants", help="list or revoke grants")
    gsub = grants.add_subparsers(dest="action", required=True)
    glist = gsub.add_parser("list")
    _common(glist)
    glist.add_argument("--user", required=True)
    glist.add_argument("--chat")
    grevoke = gsub.add_parser("revoke")
    _common(grevoke)
    grevoke.add_argument("--user", required=True)
    grevoke.add_argument("--chat", help="default: every chat of the user")
    grevoke.add_argument("subject", help="a host, a package, or all")

    store = sub.add_parser("store", help="manage the durable store")
    ssub = store.add_subparsers(dest="action", required=True)
    sinit = ssub.add_parser("init", help="create the table(s) with TTL, and the bucket when asked (idempotent)")
    sinit.add_argument("--store", help="rows URL (default sqlite:///var/approvals.db), e.g. dynamodb://TABLE?region=R")
    sinit.add_argument("--objects", help="objects URL (default var/objects), e.g. s3://BUCKET/prefix?region=R")
    sinit.add_argument("--create-bucket", action="store_true", help="create the S3 bucket and its lifecycle rule")

    teams_package.add_arguments(sub.add_parser("teams-package", help="write the Teams app package (zip)"))

    audit = sub.add_parser("audit", help="the audit trail of a chat")
    _common(audit)
    audit.add_argument("chat")
    return top


def config_from(args: argparse.Namespace) -> ServerConfig:
    given = {k: v for k, v in vars(args).items() if v is not None and k in ServerConfig.model_fields}
    return ServerConfig(**given)


def _print(body: Any) -> None:
    print(json.dumps(body, indent=2, sort_keys=True))


async def _with_approvals(cfg: ServerConfig, work: Callable[[Approvals], Awaitable[int]]) -> int:
    approvals = build_approvals(cfg)
    try:
        return await work(approvals)
    finally:
        approvals.store.close()


def cmd_run(args: argparse.Namespace, cfg: ServerConfig) -> int:
    async def work(a: Approvals) -> int:
        turn = await a.run_turn(
            chat=args.chat, user=args.user, text=args.text, platform="cli", unattended=args.unattended
        )
        _print(turn_body(turn))
        if turn.offer is not None:
            print(
                f"\nanswer with: chat-approvals resume {turn.offer.card.card_id} --user {args.user} "
                f"--secret {turn.offer.secret} --approve",
                file=sys.stderr,
            )
        return 0

    return asyncio.run(_with_approvals(cfg, work))


def cmd_resume(args: argparse.Namespace, cfg: ServerConfig) -> int:
    answer = Answer(approved=bool(args.approve), packages=args.packages if args.approve else None)

    async def work(a: Approvals) -> int:
        res = await a.resume(card_id=args.card_id, user=args.user, secret=args.secret, answer=answer, platform="cli")
        _print(json.loads(resume_body(res)))
        return 0 if res.outcome in ("resumed", "replayed") else 1

    return asyncio.run(_with_approvals(cfg, work))


def cmd_grants(args: argparse.Namespace, cfg: ServerConfig) -> int:
    async def work(a: Approvals) -> int:
        if args.action == "list":
            _print({"grants": [grant_body(g) for g in await a.grants(user=args.user, chat=args.chat)]})
            return 0
        removed = await a.revoke(user=args.user, chat=args.chat, subject=args.subject)
        _print({"revoked": [grant_body(g) for g in removed]})
        return 0 if removed else 1

    return asyncio.run(_with_approvals(cfg, work))


def cmd_audit(args: argparse.Namespace, cfg: ServerConfig) -> int:
    async def work(a: Approvals) -> int:
        _print({"events": [json.loads(e.model_dump_json()) for e in await a.audit(args.chat)]})
        return 0

    return asyncio.run(_with_approvals(cfg, work))


def cmd_serve(args: argparse.Namespace, cfg: ServerConfig) -> int:
    gate = build_gate(cfg)
    approvals = build_approvals(cfg, gate=gate)
    app = build_app(approvals, cfg, gate=gate)
    front = "on" if cfg.tokens() else "off (set CHAT_APPROVALS_API_TOKEN or --api-token)"
    print(f"chat-approvals serving on http://{cfg.host}:{cfg.port} — store {cfg.store}, model {cfg.model}", flush=True)
    print(f"  HTTP front end /v1: {front}", flush=True)
    print(f"  Slack: {SlackConfig.from_env().describe()}", flush=True)
    print(f"  sandbox (run_script + egress gate): {'on' if gate else 'off (--sandbox)'}", flush=True)
    web.run_app(app, host=cfg.host, port=cfg.port, print=None)
    approvals.store.close()
    return 0


def cmd_store(args: argparse.Namespace, cfg: ServerConfig) -> int:
    from store.init import init_store

    print(init_store(cfg.store, cfg.objects, args.create_bucket, cfg.protocol()))
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace, ServerConfig], int]] = {
    "serve": cmd_serve,
    "run": cmd_run,
    "resume": cmd_resume,
    "grants": cmd_grants,
    "audit": cmd_audit,
    "store": cmd_store,
    "teams-package": lambda args, _cfg: teams_package.run(args),
}


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = parser().parse_args(argv)
    try:
        cfg = config_from(args)
        return COMMANDS[args.command](args, cfg)
    except ValueError as e:  # bad configuration: say so plainly
        print(f"chat-approvals: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
