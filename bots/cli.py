"""`chat-approvals`: serve, or work on the configured store from a shell."""

from __future__ import annotations

import argparse
import asyncio
import errno
import json
import logging
import os
import re
import secrets
import socket
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import web
from pydantic import ValidationError
from strands.sandbox import ExecutionResult
from strands.sandbox.errors import SandboxTimeoutError

import chat_approvals.core.observe.tracing as tracing
from chat_approvals import __version__
from chat_approvals.bots import teams_package
from chat_approvals.bots.cli_checks import argument_problem
from chat_approvals.bots.config import ServerConfig
from chat_approvals.bots.cpus import pin_process
from chat_approvals.bots.gate import confinement_line, gate_config
from chat_approvals.bots.logs import LEVELS, AccessLog, holding, say, setup_logging
from chat_approvals.bots.server import freeze_heap_at_startup, open_root, serve_app
from chat_approvals.bots.slack_app import SlackConfig
from chat_approvals.bots.teams_bot import TeamsConfig
from chat_approvals.cards.http_json import grant_body, resume_body, turn_body
from chat_approvals.core.approvals import Approvals
from chat_approvals.core.models import ONCE, InvalidAnswer, read_answer
from chat_approvals.core.sandbox import LIMIT_MARK, GatedLocalSandbox, NotConfined, detect_confinement
from chat_approvals.core.sandbox.egress import Gate


def _common(p: argparse.ArgumentParser, *, agent: bool = True) -> None:
    """The store and log options; with `agent`, the options of the agent a turn or a resume runs on."""
    p.add_argument("--store", help="rows: sqlite:///PATH or dynamodb://TABLE?...")
    p.add_argument(
        "--objects",
        help="objects: a folder, sqlite:///PATH or s3://BUCKET/prefix?... "
        "(var/objects if that folder holds files, or the store is not SQLite)",
    )
    _log_options(p)
    if not agent:
        return
    p.add_argument("--model", help="scripted (offline) or provider:model_id, e.g. bedrock:MODEL_ID")
    p.add_argument("--agent", help="module:function returning a Strands Agent (its folder on PYTHONPATH)")
    p.add_argument("--policy", help="approval policy file (TOML): approvers, quorum, durations (docs/policy.md)")
    p.add_argument(
        "--confirm-tools",
        help="tools that ask a person before they run: NAME,GLOB*,… or *,!NAME (the HumanInTheLoop syntax)",
    )
    p.add_argument("--notes-dir", help="where the default agent's save_note writes")


def _log_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--log-format", choices=["text", "json"], help="text, or json: every line one JSON object")
    p.add_argument("--log-level", choices=LEVELS, help="debug adds the internal lines (heap frozen, ...)")


EXAMPLES = {
    "serve": """
  chat-approvals serve                                  # 127.0.0.1:3978, var/approvals.db, scripted model
  chat-approvals serve --sandbox --confirm-tools save_note
  chat-approvals serve --agent myagents.support:build --model bedrock:MODEL_ID
  CHAT_APPROVALS_API_TOKEN=secret chat-approvals serve --port 8080 --log-format json""",
    "run": """
  chat-approvals run --chat demo --user me "fetch https://example.com/data.csv"
  chat-approvals run --agent myagents.support:build --chat demo --user me hello""",
    "resume": """
  chat-approvals resume CARD_ID --user me --secret=SECRET --approve
  chat-approvals resume CARD_ID --user me --secret=SECRET --approve --duration 1h
  chat-approvals resume CARD_ID --user me --secret=SECRET --deny --reason "not that site"
  (with the same --agent as the run that paused the turn)""",
    "grants list": """
  chat-approvals grants list --user me
  chat-approvals grants list --user me --chat demo""",
    "grants revoke": """
  chat-approvals grants revoke --user me example.com
  chat-approvals grants revoke --user me --chat demo all""",
    "store init": """
  chat-approvals store init
  chat-approvals store init --store "dynamodb://approvals?region=eu-west-1" \\
      --objects "s3://my-bucket/approvals?region=eu-west-1" --create-bucket
  chat-approvals store init --store "postgresql://approvals@db.internal:5432/approvals\"""",
    "teams-package": """
  chat-approvals teams-package --app-id 00000000-0000-0000-0000-000000000000 --out teams.zip""",
    "sandbox run": """
  chat-approvals sandbox run --chat demo --user me fetch.py
  chat-approvals sandbox run --chat demo --user me --gate-allow example.com job.sh arg1""",
    "audit": """
  chat-approvals audit demo
  chat-approvals audit --all --since 2026-01-31T00:00:00Z --format jsonl""",
}


def _sub(
    subs: argparse._SubParsersAction,
    name: str,
    help_text: str,
    examples: str | None = None,
) -> argparse.ArgumentParser:
    """A subcommand with its examples below its options."""
    epilog = f"examples:{EXAMPLES[examples or name]}" if (examples or name) in EXAMPLES else None
    p: argparse.ArgumentParser = subs.add_parser(
        name, help=help_text, description=help_text, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    return p


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="chat-approvals",
        description=__doc__,
        epilog="Every option also reads a CHAT_APPROVALS_* variable (shown in each command's --help); "
        "a flag wins over the variable. See docs/cli.md.",
    )
    top.add_argument("--version", action="version", version=f"chat-approvals {__version__}")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = _sub(sub, "serve", "run the server (Slack, Teams and the HTTP API)")
    _common(serve)
    serve.add_argument("--host", help="address to listen on")
    serve.add_argument("--port", type=int, help="port to listen on")
    serve.add_argument("--api-token", help="comma-separated bearer tokens for the HTTP front end (/v1); empty: off")
    serve.add_argument("--sandbox", action="store_true", default=None, help="register run_script (egress gate on)")
    serve.add_argument("--no-metrics", dest="metrics", action="store_false", default=None, help="no GET /metrics")
    serve.add_argument(
        "--audit-webhook", action="append", help="POST every audit event to URL (repeatable); needs the secret"
    )
    serve.add_argument("--audit-webhook-secret", help="HMAC-SHA256 key for the X-Chat-Approvals-Signature header")
    serve.add_argument("--audit-webhook-backoff-cap", type=float, help="longest wait between retries, s")
    serve.add_argument("--readyz-timeout", type=float, help="seconds the store's read may take for /readyz")
    serve.add_argument("--cpus", help="pin the server to these cores (Linux CPU list: 0, 0-3, 0,2); one per replica")
    _sandbox_flags(serve)

    run = _sub(sub, "run", "one turn from a shell (prints the card's resume command if it pauses)")
    _common(run)
    run.add_argument("--chat", required=True, help="the chat (conversation) id")
    run.add_argument("--user", required=True, help="who asks")
    run.add_argument("--unattended", action="store_true", help="nobody to ask: pause nothing, refuse instead")
    run.add_argument("text", help="what the user says")

    resume = _sub(sub, "resume", "answer a card from a shell (with the --agent that paused the turn)")
    _common(resume)
    resume.add_argument("card_id")
    resume.add_argument("--user", required=True, help="who answers")
    resume.add_argument("--secret", required=True, help="the card's secret; write --secret=VALUE (it may start with -)")
    choice = resume.add_mutually_exclusive_group(required=True)
    choice.add_argument("--approve", action="store_true")
    choice.add_argument("--deny", action="store_true")
    resume.add_argument("--packages", nargs="*", help="with --approve: only these of the card's packages")
    resume.add_argument("--duration", help="with --approve: one of the card's durations (once, 1h, ...)")
    resume.add_argument("--once", action="store_true", help="with --approve: --duration once (a tool card: no grant)")
    resume.add_argument("--reason", help="with --deny: why (the agent reads it; at most 500 characters)")

    grants = _sub(sub, "grants", "list or revoke grants")
    gsub = grants.add_subparsers(dest="action", required=True)
    glist = _sub(gsub, "list", "the live grants of a user", "grants list")
    _common(glist, agent=False)
    glist.add_argument("--user", required=True)
    glist.add_argument("--chat", help="only this chat")
    grevoke = _sub(gsub, "revoke", "revoke grants of a user", "grants revoke")
    _common(grevoke, agent=False)
    grevoke.add_argument("--user", required=True)
    grevoke.add_argument("--chat", help="only this chat (default: every chat of the user)")
    grevoke.add_argument("subject", help="a host, a package, tool:NAME, or all")

    store = _sub(sub, "store", "manage the durable store")
    ssub = store.add_subparsers(dest="action", required=True)
    sinit = _sub(ssub, "init", "create or migrate the tables, and the bucket when asked (idempotent)", "store init")
    sinit.add_argument("--store", help="rows URL, e.g. dynamodb://TABLE?region=R")
    sinit.add_argument("--objects", help="objects URL (default: as serve), e.g. s3://BUCKET/prefix?region=R")
    sinit.add_argument("--create-bucket", action="store_true", help="create the S3 bucket and its lifecycle rule")
    _log_options(sinit)

    teams_package.add_arguments(_sub(sub, "teams-package", "write the Teams app package (zip)"))

    sandbox = _sub(sub, "sandbox", "run a file in the agent's sandbox, behind the same gate")
    sbsub = sandbox.add_subparsers(dest="action", required=True)
    sbrun = _sub(sbsub, "run", "run FILE (Python; sh for .sh) like run_script, as USER in CHAT", "sandbox run")
    sbrun.add_argument("--store", help="rows URL")
    sbrun.add_argument("--objects", help="objects URL (default: as serve)")
    sbrun.add_argument("--chat", required=True)
    sbrun.add_argument("--user", required=True)
    _sandbox_flags(sbrun)
    _log_options(sbrun)
    sbrun.add_argument("file")
    sbrun.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")

    audit = _sub(sub, "audit", "the audit trail of a chat, or of every chat (--all)")
    _common(audit, agent=False)
    audit.add_argument("chat", nargs="?")
    audit.add_argument("--all", action="store_true", help="every chat's events (an export: it may scan the store)")
    audit.add_argument("--since", help="with --all: events at or after TIME (ISO 8601, or epoch seconds)")
    audit.add_argument("--format", choices=["json", "jsonl"], default="json", help="jsonl: one event per line")
    _document_settings(top)
    return top


def _document_settings(top: argparse.ArgumentParser) -> None:
    """Every option that is a ServerConfig field gets its default and its CHAT_APPROVALS_* variable
    in its help, from the one place they are defined (a help text cannot drift from the code)."""
    fields = ServerConfig.model_fields
    for p in _parsers(top):
        for action in p._actions:
            if action.dest not in fields or not action.option_strings:
                continue
            default = fields[action.dest].get_default(call_default_factory=True)
            shown = "off" if default is False else "on" if default is True else default
            parts = [f"env CHAT_APPROVALS_{action.dest.upper()}"]
            if shown not in ("", None, []):
                parts.append(f"default: {shown}")
            elif action.dest == "objects":
                parts.append("default: the SQLite store's own file")
            action.help = f"{action.help or ''} [{'; '.join(parts)}]".strip()


def _parsers(p: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [p]
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                found += _parsers(child)
    return found


def _sandbox_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sandbox-unconfined", action="store_true", default=None,
                   help="run scripts even where bubblewrap cannot confine them (every result says so)")  # fmt: skip
    p.add_argument("--sandbox-timeout", type=float, help="wall time per run, seconds")
    p.add_argument("--sandbox-cpu", type=int, help="CPU seconds per run")
    p.add_argument("--sandbox-memory-mb", type=int, help="address space per process, MiB")
    p.add_argument("--sandbox-nproc", type=int, help="processes per run")
    p.add_argument("--sandbox-file-size-mb", type=int, help="largest file, MiB")
    p.add_argument("--sandbox-disk-mb", type=int, help="bytes written in the run folder and /tmp, MiB")
    p.add_argument("--sandbox-open-files", type=int, help="open files per process")
    p.add_argument("--gate-host", help="address the egress gate listens on")
    p.add_argument("--gate-port", type=int, help="egress gate port (0: any free one)")
    p.add_argument("--gate-allow", action="append", help="HOST, *.HOST, HOST:PORT or package:NAME; repeatable")
    p.add_argument("--gate-deny", action="append", help="like --gate-allow; wins over allow and grants")
    p.add_argument("--gate-resolve", action="append", help="HOST[:PORT]=IP:PORT (as curl resolves)")
    p.add_argument("--gate-grant-recheck", type=float, help="seconds between re-checks of an open granted connection")
    p.add_argument("--package-index", help="upstream PEP 503 index for pip, e.g. https://pypi.org/simple/")


def config_from(args: argparse.Namespace) -> ServerConfig:
    given = {k: v for k, v in vars(args).items() if v is not None and k in ServerConfig.model_fields}
    return ServerConfig(**given)


def _print(body: Any) -> None:
    print(json.dumps(body, indent=2, sort_keys=True))


async def _with_approvals(cfg: ServerConfig, work: Callable[[Approvals], Awaitable[int]]) -> int:
    root = open_root(cfg)
    try:
        return await work(root.approvals)
    finally:
        root.close()


def cmd_run(args: argparse.Namespace, cfg: ServerConfig) -> int:
    async def work(a: Approvals) -> int:
        turn = await a.run_turn(
            chat=args.chat, user=args.user, text=args.text, platform="cli", unattended=args.unattended
        )
        _print(turn_body(turn))
        if turn.offer is not None:
            agent = f" --agent {cfg.agent}" if cfg.agent else ""  # a resume needs the agent that paused
            print(
                f"\nanswer with: chat-approvals resume {turn.offer.card.card_id} --user {args.user} "
                f"--secret={turn.offer.secret}{agent} --approve",
                file=sys.stderr,
            )
        return 0

    return asyncio.run(_with_approvals(cfg, work))


def cmd_resume(args: argparse.Namespace, cfg: ServerConfig) -> int:
    if (args.once and not args.approve) or (args.reason is not None and not args.deny):
        raise ValueError("--once goes with --approve, --reason with --deny")
    if args.once and args.duration is not None and args.duration != ONCE:
        raise ValueError("--once and --duration name different durations")
    payload: dict[str, Any] = {"approved": bool(args.approve)}
    if args.approve and args.packages is not None:
        payload["packages"] = args.packages
    if args.once:
        payload["duration"] = ONCE
    elif args.duration is not None:
        payload["duration"] = args.duration
    if args.reason is not None:
        payload["reason"] = args.reason
    try:
        answer = read_answer("resolved", payload)  # R15: the same checks as every front end
    except InvalidAnswer as e:
        raise ValueError(str(e)) from None

    async def work(a: Approvals) -> int:
        res = await a.resume(card_id=args.card_id, user=args.user, secret=args.secret, answer=answer, platform="cli")
        _print(json.loads(resume_body(res)))
        if res.outcome in ("resumed", "replayed"):
            return 0
        print(f"chat-approvals: {res.outcome}: {res.message}", file=sys.stderr)
        return 1

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


def parse_time(value: str) -> float:
    """ISO 8601 (a date, or a date and time; naive means UTC) or epoch seconds."""
    try:
        return float(value)
    except ValueError:
        pass
    try:
        t = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as e:
        raise ValueError(f"--since {value!r}: expected ISO 8601 (2026-01-31T12:00:00Z) or epoch seconds") from e
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp()


def cmd_audit(args: argparse.Namespace, cfg: ServerConfig) -> int:
    if args.all == bool(args.chat):
        raise ValueError("audit: name one CHAT, or pass --all")
    if args.since and not args.all:
        raise ValueError("audit: --since goes with --all")
    since = parse_time(args.since) if args.since else 0.0

    async def work(a: Approvals) -> int:
        events = await (a.audit_since(since) if args.all else a.audit(args.chat))
        docs = [json.loads(e.model_dump_json()) for e in events]
        if args.format == "jsonl":
            for d in docs:
                print(json.dumps(d, sort_keys=True, separators=(",", ":")))
        else:
            _print({"events": docs})
        return 0

    return asyncio.run(_with_approvals(cfg, work))


def cmd_serve(args: argparse.Namespace, cfg: ServerConfig) -> int:
    cpus = pin_process(cfg.cpus)  # first: the threads started below inherit it
    SlackConfig.from_env().check()  # a half-configured Slack names its missing variable, before anything opens
    TeamsConfig.from_env(os.environ)  # and so does Teams
    sock = bind(cfg.host, cfg.port)  # before anything starts or is announced: a busy port is one line
    try:
        exporting = tracing.setup_export()
        root = open_root(cfg)
        approvals = root.approvals
    except BaseException:
        sock.close()
        raise
    try:
        with holding() as front_ends:
            app = serve_app(root, cfg)  # a mistake found here is said before any banner
        freeze_heap_at_startup(app)
        front = "on" if cfg.tokens() else "off (set CHAT_APPROVALS_API_TOKEN or --api-token)"
        where = _http(cfg.host, cfg.port)
        from chat_approvals.store.open import shown_url

        say(f"chat-approvals {__version__} serving on {where} — store {shown_url(cfg.store)}, model {cfg.model}")
        say(f"  agent: {approvals.settings.agent_name} (resume a card with the --agent that paused it)")
        say(f"  HTTP front end /v1: {front}")
        say(f"  CPUs: {cpus}")
        say(f"  Slack: {SlackConfig.from_env().describe()}")
        for line in front_ends:
            say(f"  {line}")
        say(f"  sandbox (run_script + egress gate): {confinement_line(cfg)}")
        say(f"  approval policy: {policy_line(approvals)}")
        hooks = f"{len(cfg.audit_webhook)} audit webhook(s)" if cfg.audit_webhook else "no audit webhook"
        say(f"  /metrics: {'on' if cfg.metrics else 'off'}; traces: {'OTLP' if exporting else 'off'}; {hooks}")

        async def ready(_: web.Application) -> None:  # the last start-up step: every front end is up
            say(ready_line(cfg))

        app.on_startup.append(ready)
        web.run_app(app, sock=sock, print=None, backlog=LISTEN_BACKLOG, access_log_class=AccessLog)
    finally:
        sock.close()
        root.close()
    return 0


def _http(host: str, port: int) -> str:
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def ready_line(cfg: ServerConfig) -> str:
    """The last line serve prints: where a person goes next."""
    if cfg.playground_url:
        return f"Ready: open {cfg.playground_url} (Teams Playground); Ctrl-C to stop"
    return f"Ready: {_http(cfg.host, cfg.port)} ; Ctrl-C to stop"


# Connections the kernel holds for the server before it accepts them. At aiohttp's 128, a burst
# of clicks (1,000 at once, each on its own connection, issue 34) overflowed the queue and each
# connection past it waited for the client's retry, a second later. The kernel caps it
# (net.core.somaxconn).
LISTEN_BACKLOG = 4096


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound before anything is announced. A busy port is one line, not a
    traceback from inside the server's start-up."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as e:
        raise ValueError(f"--host {host!r}: {e.strerror}") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as aiohttp does: no wait after a restart
        sock.bind(address)
        sock.listen(LISTEN_BACKLOG)
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise ValueError(
                f"port {port} is already in use (another chat-approvals? stop it, or pass --port)"
            ) from None
        if e.errno == errno.EACCES:
            raise ValueError(f"port {port}: permission denied (ports below 1024 need root; pass --port)") from None
        raise ValueError(f"cannot listen on {host}:{port}: {e.strerror}") from None
    return sock


def policy_line(approvals: Approvals) -> str:
    p = approvals.policy
    if p is None:
        hours = approvals.settings.grant_ttl / 3600
        return f"none (only the person who asked answers; grants last {hours:g} h: CHAT_APPROVALS_GRANT_TTL, seconds)"
    routed = [k for k, v in (("Slack", p.routing.slack_channel), ("Teams", p.routing.teams_conversation)) if v]
    return f"{len(p.rule)} rule(s), defaults: approvers={p.defaults.approvers} quorum={p.defaults.quorum}" + (
        f"; cards also posted to the approvers' channel in {', '.join(routed)}" if routed else ""
    )


def cmd_sandbox(args: argparse.Namespace, cfg: ServerConfig) -> int:
    """`sandbox run`: the same confined sandbox behind the same gate as run_script, for an operator."""
    path = Path(args.file)
    try:
        code = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ValueError(f"cannot read {args.file}: {e}") from e
    language = "sh" if path.suffix == ".sh" else "python"
    confinement = detect_confinement()
    if not confinement.confined and not cfg.sandbox_unconfined:
        raise NotConfined(f"{confinement.note}. Install bubblewrap, or pass --sandbox-unconfined to accept that")
    print(f"chat-approvals sandbox: {confinement.note}", file=sys.stderr, flush=True)
    root = open_root(cfg, gate=lambda backend: Gate(gate_config(cfg), backend=backend))
    gate = root.gate
    assert gate is not None  # built on the grant book by the root

    async def work() -> int:
        await gate.start()
        try:
            box = GatedLocalSandbox(gate_unix_socket=gate.unix_path, gate_port=gate.port,
                                    confinement=confinement, limits=cfg.sandbox_limits())  # fmt: skip
            turn_id = f"sandbox-run-{secrets.token_hex(6)}"
            exit_code = 1
            with gate.run(user=args.user, chat=args.chat, turn_id=turn_id) as run:
                stderr = ""
                try:
                    async for item in box.execute_code_streaming(
                        code, language, env=gate.sandbox_env(run), args=list(args.args)
                    ):
                        if isinstance(item, ExecutionResult):
                            exit_code, stderr = item.exit_code, item.stderr
                        elif item.stream_type == "stderr":
                            sys.stderr.write(item.data)
                        else:
                            sys.stdout.write(item.data)
                except SandboxTimeoutError as e:
                    exit_code, stderr = 124, e.stderr
                sys.stdout.flush()
                for line in stderr.splitlines():
                    if line.startswith(LIMIT_MARK):
                        print(f"chat-approvals sandbox: limit hit: {line[len(LIMIT_MARK) : -1]}", file=sys.stderr)
                if run.blocked_subjects():
                    print(f"chat-approvals sandbox: blocked: {', '.join(run.blocked_subjects())} "
                          f"(recorded for turn {turn_id})", file=sys.stderr)  # fmt: skip
                if run.denied_subjects():
                    print(f"chat-approvals sandbox: denied by policy: {', '.join(run.denied_subjects())}",
                          file=sys.stderr)  # fmt: skip
            return exit_code
        finally:
            await gate.close()

    async def closing() -> int:
        try:
            return await work()
        finally:
            root.close()

    return asyncio.run(closing())


def cmd_store(args: argparse.Namespace, cfg: ServerConfig) -> int:
    from chat_approvals.core.settings import retention_days
    from chat_approvals.store.init import init_store

    print(init_store(cfg.store, cfg.objects_url(), args.create_bucket, retention_days(cfg.protocol())))
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace, ServerConfig], int]] = {
    "serve": cmd_serve,
    "run": cmd_run,
    "resume": cmd_resume,
    "grants": cmd_grants,
    "audit": cmd_audit,
    "store": cmd_store,
    "sandbox": cmd_sandbox,
    "teams-package": lambda args, _cfg: teams_package.run(args),
}


def _env_secrets() -> list[str]:
    names = ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN", "CHAT_APPROVALS_TEAMS_APP_PASSWORD",
             "SLACK_CLIENT_SECRET", "CHAT_APPROVALS_SLACK_TOKEN_KEY")  # fmt: skip
    return [os.environ.get(n, "") for n in names]


def main(argv: list[str] | None = None) -> int:
    """Exit codes: 0 done; 1 the command ran and said no (a refused resume, nothing revoked, a
    sandboxed script's own code); 2 a usage or configuration mistake, said in one line on stderr."""
    args = parser().parse_args(argv)
    problem = argument_problem(args)  # R20: before any command opens the store
    if problem is not None:
        return _mistake(problem)
    try:
        cfg = config_from(args)
        setup_logging(cfg.log_format, [*cfg.secrets(), *_env_secrets()], level=cfg.log_level)
        return COMMANDS[args.command](args, cfg)
    except ValidationError as e:  # a CHAT_APPROVALS_* variable or a flag of the wrong shape
        return _mistake("; ".join(_field_error(err) for err in e.errors()))
    except ValueError as e:  # bad configuration: say so plainly
        return _mistake(str(e))
    except KeyboardInterrupt:
        return 130
    except Exception:
        if os.environ.get("CHAT_APPROVALS_LOG_FORMAT") == "json" or getattr(args, "log_format", None) == "json":
            # a bug, not a mistake: its traceback too stays one JSON object (exc_info), as every line does
            logging.getLogger("chat_approvals").exception("chat-approvals stopped on an unexpected error")
            return 1
        raise


def _mistake(message: str) -> int:
    print(f"chat-approvals: {' '.join(message.split())}", file=sys.stderr)  # one line, whatever it held
    return 2


def _field_error(err: Any) -> str:
    name = str(err["loc"][0]) if err.get("loc") else ""
    where = f"--{name.replace('_', '-')} / CHAT_APPROVALS_{name.upper()}" if name else "configuration"
    return f"{where}: {re.sub(r'^Value error, ', '', err['msg'])}"


if __name__ == "__main__":
    sys.exit(main())
