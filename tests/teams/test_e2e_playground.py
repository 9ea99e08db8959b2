"""End to end in a real Teams-like client: the Microsoft 365 Agents Playground (started by
scripts/test.d/40-teams.sh, pointed at TEAMS_E2E_BOT_PORT) in headless Debian Chromium, driven by
playwright-core. This test starts the real server there, runs tests/teams/e2e_playground.js, and
checks the store. Screenshots go to artifacts/teams/ (in-invoke/card-download.png: the open
card alone, which scripts/card-pictures copies to docs/img/teams-card.png)."""

from __future__ import annotations

import asyncio
import os
import secrets
from pathlib import Path

import pytest
from aiohttp import web

from chat_approvals.bots.config import ServerConfig
from chat_approvals.bots.server import build_app
from chat_approvals.bots.teams_bot import TEAMS, TeamsConfig
from chat_approvals.core.bootstrap import bootstrap
from chat_approvals.core.clock import SystemClock
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.file_objects import FileObjects
from chat_approvals.store.sqlite_rows import SqliteRows
from tests.support.card_pictures import png_size

ROOT = Path(__file__).resolve().parents[2]
NEEDED = ("TEAMS_PLAYGROUND_URL", "TEAMS_E2E_BOT_PORT", "TEAMS_PLAYWRIGHT")
TENANT = "00000000-0000-0000-0000-0000000000001"
OWNER = f"teams:{TENANT}:00000000-0000-0000-0000-0000000000020"  # the Playground's default user (Alex Wilber)
CHAT = f"teams:{TENANT}:personal-e2e"  # 40-teams.sh starts it with --conversation-id personal-e2e


def require_playground() -> dict[str, str]:
    missing = [n for n in NEEDED if not os.environ.get(n)]
    if missing:
        reason = f"Agents Playground not running ({', '.join(missing)} unset): run scripts/test"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return {n: os.environ[n] for n in NEEDED}


async def run_browser(env: dict[str, str], shots: Path, extra: dict[str, str]) -> str:
    """Run e2e_playground.js (bounded), save its log beside the screenshots, fail on a non-zero exit."""
    shots.mkdir(parents=True, exist_ok=True)
    proc = await asyncio.create_subprocess_exec(
        "node",
        str(Path(__file__).with_name("e2e_playground.js")),
        env={
            **os.environ,
            "PLAYGROUND_URL": env["TEAMS_PLAYGROUND_URL"],
            "PLAYWRIGHT": env["TEAMS_PLAYWRIGHT"],
            "CHROMIUM": os.environ.get("TEAMS_CHROMIUM", "/usr/bin/chromium"),
            "SHOTS": str(shots),
            "E2E_TOKEN": secrets.token_hex(4),
            **extra,
        },
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout=240)  # bounded: a real browser
    except TimeoutError:
        proc.kill()
        await proc.wait()
        pytest.fail("the Playwright run did not finish in 240 s")
    log = out.decode(errors="replace")
    (shots / "e2e.log").write_text(log)
    assert proc.returncode == 0, log
    return log


@pytest.mark.e2e
@pytest.mark.parametrize("invoke_budget", [2.0, 0.0], ids=["in-invoke", "late-proactive"])
@pytest.mark.slow  # over 2 s in scripts/test's --durations
async def test_e2e_approve_in_playground_then_revoke(tmp_path: Path, invoke_budget: float) -> None:
    """in-invoke: the click's answer is the outcome card. late-proactive: the click is answered with
    "resuming…" at once and the outcome replaces the card later, from the stored reference."""
    env = require_playground()
    clock = SystemClock()
    store = StoreIO(SqliteRows(tmp_path / "rows.db"), FileObjects(tmp_path / "objects", clock=clock))
    approvals = bootstrap(store, clock=clock).approvals
    cfg = ServerConfig(host="127.0.0.1", port=int(env["TEAMS_E2E_BOT_PORT"]))
    app = build_app(approvals, cfg, sweep=False, teams=TeamsConfig(invoke_budget=invoke_budget))
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", cfg.port).start()
    shots = ROOT / "artifacts" / "teams" / ("late" if invoke_budget == 0 else "in-invoke")
    (shots / "card-download.png").unlink(missing_ok=True)  # an older run's picture must not pass for this one's
    try:
        log = await run_browser(env, shots, {})
        assert "0 failed" in log and "5 passed" in log, log
        # The bot's side: the click resumed the turn once, and Revoke removed the grant.
        await app[TEAMS].bot.drain()
        kinds = [e.kind for e in await approvals.audit(CHAT)]
        assert kinds.count("claim_won") == 1, kinds
        assert "revoke" in kinds, kinds
        assert await approvals.grants(user=OWNER, chat=CHAT) == []
        for name in ("02-approval-card.png", "03-approved-and-reply.png", "05-revoked.png"):
            assert (shots / name).stat().st_size > 10_000
        # The open card alone (docs/img/teams-card.png is made from it): a PNG of a card's size.
        width, height = png_size(shots / "card-download.png")
        assert 300 <= width <= 1400 and 200 <= height <= 1000, (width, height)
    finally:
        await runner.cleanup()
        store.close()


@pytest.mark.e2e
@pytest.mark.slow  # over 2 s in scripts/test's --durations
async def test_e2e_package_choice_in_playground(tmp_path: Path) -> None:
    """R15 in the real client: the multi-select on the card reaches the bot merged into the
    Execute data, and only the chosen package is granted."""
    from tests.support.agents import policy_factory
    from tests.teams.test_teams_bot import packages_policy

    env = require_playground()
    clock = SystemClock()
    store = StoreIO(SqliteRows(tmp_path / "rows.db"), FileObjects(tmp_path / "objects", clock=clock))
    approvals = bootstrap(store, clock=clock, agent_factory=policy_factory(packages_policy)).approvals
    cfg = ServerConfig(host="127.0.0.1", port=int(env["TEAMS_E2E_BOT_PORT"]))
    runner = web.AppRunner(build_app(approvals, cfg, sweep=False, teams=TeamsConfig()))
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", cfg.port).start()
    try:
        log = await run_browser(env, ROOT / "artifacts" / "teams" / "packages", {"E2E_FLOW": "packages"})
        assert "2 passed, 0 failed" in log, log
        grants = await approvals.grants(user=OWNER, chat=CHAT)
        assert [(g.kind, g.name) for g in grants] == [("package", "pandas")]
    finally:
        await runner.cleanup()
        store.close()


GROUP_POLICY = """\
[approvers]
teams = ["00000000-0000-0000-0000-0000000000021"]  # Megan Bowen, the Playground's second user

[[rule]]
match = "*.corp.example.com"
approvers = "approvers"
"""


@pytest.mark.e2e
@pytest.mark.slow  # over 2 s in scripts/test's --durations
async def test_e2e_group_chat_approval_answered_by_a_second_user(tmp_path: Path) -> None:
    """Issue 13 in the real client: in the Playground's Group Chat the requester (the UI's own user)
    is refused under `approvers = "approvers"`; the second member of the group chat, an approver,
    answers through the Playground's invoke API (its UI cannot switch users: see the JS)."""
    from chat_approvals.bots.approvers import ApproverDirectory
    from chat_approvals.core.protocol.policy import parse_policy

    env = require_playground()
    clock = SystemClock()
    store = StoreIO(SqliteRows(tmp_path / "rows.db"), FileObjects(tmp_path / "objects", clock=clock))
    policy = parse_policy(GROUP_POLICY)
    approvals = bootstrap(store, clock=clock, policy=policy, approvers=ApproverDirectory(policy)).approvals
    cfg = ServerConfig(host="127.0.0.1", port=int(env["TEAMS_E2E_BOT_PORT"]))
    app = build_app(approvals, cfg, sweep=False, teams=TeamsConfig())
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", cfg.port).start()
    shots = ROOT / "artifacts" / "teams" / "group-approver"
    try:
        log = await run_browser(env, shots, {"E2E_FLOW": "group-approver"})
        assert "0 failed" in log and "7 passed" in log, log
        await app[TEAMS].bot.drain()
        megan = f"teams:{TENANT}:00000000-0000-0000-0000-0000000000021"
        (grant,) = await approvals.grants(user=OWNER)  # the requester's grant, in the group chat
        assert grant.name == "files.corp.example.com" and grant.chat != CHAT
        events = await approvals.audit(grant.chat)
        assert [e.actor for e in events if e.kind == "refused_answer"] == [OWNER], events
        assert [e.actor for e in events if e.kind == "answered"] == [megan], events
    finally:
        await runner.cleanup()
        store.close()


@pytest.mark.e2e
@pytest.mark.slow  # over 2 s in scripts/test's --durations
@pytest.mark.parametrize(("flow", "saved_first"), [("note", "hello-"), ("batch", "first-")])
async def test_e2e_gated_note_cards_in_playground_save_each_approved_note_once(
    tmp_path: Path, flow: str, saved_first: str
) -> None:
    """In the real client, save_note gated with --confirm-tools. `note` (issue 14): `save a note:
    hello` -> a tool card -> Approve once -> the note is saved, once. `batch` (issue 32): `save two
    notes: A | B` -> one batch card; its two ChoiceSets set to Approve once and Deny, Decide each ->
    a reason -> Send: the first note is saved, once; the second never."""
    from chat_approvals.core.agent.demo_tools import notes_file
    from chat_approvals.core.agent.factory import default_factory, gated_factory

    env = require_playground()
    clock = SystemClock()
    store = StoreIO(SqliteRows(tmp_path / "rows.db"), FileObjects(tmp_path / "objects", clock=clock))
    notes = tmp_path / "notes"
    factory = gated_factory(default_factory("scripted", notes_dir=notes), "save_note")
    approvals = bootstrap(store, clock=clock, agent_factory=factory).approvals
    cfg = ServerConfig(host="127.0.0.1", port=int(env["TEAMS_E2E_BOT_PORT"]))
    app = build_app(approvals, cfg, sweep=False, teams=TeamsConfig())
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", cfg.port).start()
    try:
        log = await run_browser(env, ROOT / "artifacts" / "teams" / flow, {"E2E_FLOW": flow})
        assert "2 passed, 0 failed" in log, log
        await app[TEAMS].bot.drain()
        lines = notes_file(notes, CHAT).read_text().splitlines()
        assert len(lines) == 1 and lines[0].startswith(saved_first), lines
        kinds = [e.kind for e in await approvals.audit(CHAT)]
        assert kinds.count("claim_won") == 1, kinds
    finally:
        await runner.cleanup()
        store.close()


@pytest.mark.e2e
async def test_e2e_offline_demo_fetch_approve_rows_note_and_deny_with_a_reason(tmp_path: Path) -> None:
    """Issue 28 in the real client, as scripts/run serves it: the demo origin behind the real egress
    gate (resolve, as --gate-resolve), the sandbox's run_script and save_note gated. Fetch ->
    Approve -> the agent reports the rows; save a note -> Approve once; deny with a reason -> the
    reply shows the reason, not the model's instruction. Screenshots in artifacts/teams/demo/."""
    import subprocess
    import sys

    from chat_approvals.core.agent.factory import default_factory, gated_factory
    from chat_approvals.core.sandbox.egress import Gate, GateConfig
    from chat_approvals.core.sandbox.tools import make_run_script

    env = require_playground()
    port_file = tmp_path / "origin.port"
    origin = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "demo_origin.py"), str(port_file)])
    clock = SystemClock()
    store = StoreIO(SqliteRows(tmp_path / "rows.db"), FileObjects(tmp_path / "objects", clock=clock))
    try:
        for _ in range(200):
            if port_file.exists():
                break
            await asyncio.sleep(0.02)
        gate = Gate(GateConfig(resolve=[f"data.example.test=127.0.0.1:{int(port_file.read_text())}"]), clock=clock)
        tools = [make_run_script(gate, timeout=30)]
        factory = gated_factory(default_factory("scripted", tools, notes_dir=tmp_path / "notes"), "save_note")
        approvals = bootstrap(store, clock=clock, agent_factory=factory).approvals
        cfg = ServerConfig(host="127.0.0.1", port=int(env["TEAMS_E2E_BOT_PORT"]))
        app = build_app(approvals, cfg, sweep=False, teams=TeamsConfig(), gate=gate)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", cfg.port).start()
        try:
            log = await run_browser(env, ROOT / "artifacts" / "teams" / "demo", {"E2E_FLOW": "demo"})
            assert "4 passed, 0 failed" in log, log
            await app[TEAMS].bot.drain()
            kinds = [e.kind for e in await approvals.audit(CHAT)]
            assert kinds.count("claim_won") == 3, kinds
        finally:
            await runner.cleanup()
    finally:
        origin.terminate()
        origin.wait(10)
        store.close()


@pytest.mark.e2e
@pytest.mark.slow  # over 2 s in scripts/test's --durations
async def test_e2e_reminder_in_playground(tmp_path: Path) -> None:
    """Issue 33 in the real client: the server's timer loop, its clock moved past `remind_after`
    once the card exists; the reminder reaches the Playground's chat, @mentioning the requester."""
    import time

    from chat_approvals.bots.approvers import ApproverDirectory
    from chat_approvals.core.clock import ManualClock
    from chat_approvals.core.protocol.policy import parse_policy

    env = require_playground()
    clock = ManualClock(time.time())
    store = StoreIO(SqliteRows(tmp_path / "rows.db"), FileObjects(tmp_path / "objects", clock=clock))
    policy = parse_policy('[defaults]\nremind_after = "10m"\n')
    approvals = bootstrap(store, clock=clock, policy=policy, approvers=ApproverDirectory(policy)).approvals
    cfg = ServerConfig(host="127.0.0.1", port=int(env["TEAMS_E2E_BOT_PORT"]), timer_every=0.1)
    app = build_app(approvals, cfg, sweep=False, timers=True, teams=TeamsConfig())
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", cfg.port).start()
    try:
        browser = asyncio.ensure_future(
            run_browser(env, ROOT / "artifacts" / "teams" / "reminder", {"E2E_FLOW": "reminder"})
        )
        async with asyncio.timeout(120):
            while (await store.run(store.rows.get_pointer, CHAT)) is None or not (
                (await store.run(store.rows.get_pointer, CHAT)).card_location  # type: ignore[union-attr]
            ):
                await asyncio.sleep(0.2)
        clock.advance(10 * 60 + 1)
        log = await browser
        assert "3 passed, 0 failed" in log, log
        kinds = [e.kind for e in await approvals.audit(CHAT)]
        assert kinds.count("card.reminder") == 1, kinds
    finally:
        await runner.cleanup()
        store.close()
