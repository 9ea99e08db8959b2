"""R11 made harmless where it can be (issue 27.5): a served process is SIGKILLed mid-resume, after
the approved `save_note` wrote its line and before the resume was marked done; after its lease
(2 s) lapses, another served process takes the next claim and runs the same approved call again,
which writes nothing: one note."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.conftest import TOKEN
from tests.support.crash_agents import HOLD_ENV, NOTES_ENV
from tests.support.serve_process import ROOT, free_port, stop, wait_healthy

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _serve(
    tmp: Path, port: int, hold: Path, agent: str = "tests.support.crash_agents:note_hold_agent"
) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "CHAT_APPROVALS_"))}
    env.update(
        CHAT_APPROVALS_STORE=f"sqlite:///{tmp}/rows.db",
        CHAT_APPROVALS_LEASE="2",
        PYTHONPATH=str(ROOT),
        **{NOTES_ENV: str(tmp / "notes"), HOLD_ENV: str(hold)},
    )
    cli = os.path.join(os.path.dirname(sys.executable), "chat-approvals")
    args = [cli, "serve", "--host", "127.0.0.1", "--port", str(port), "--api-token", TOKEN,
            "--agent", agent, "--confirm-tools", "save_note"]  # fmt: skip
    return subprocess.Popen(args, cwd=tmp, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _lines(tmp: Path) -> list[str]:
    return [line for f in (tmp / "notes").rglob("notes.txt") for line in f.read_text().splitlines()]


async def _resume(session: aiohttp.ClientSession, base: str, card: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    body = {
        "user": "alice",
        "secret": card["secret"],
        "responses": [{"interruptId": card["card_id"], "status": "resolved", "payload": {"approved": True}}],
    }
    async with session.post(f"{base}/v1/interrupts/{card['card_id']}/resume", json=body, headers=AUTH) as r:
        return r.status, await r.json()


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
async def test_sigkill_mid_resume_then_the_next_claim_writes_no_second_note(tmp_path: Path) -> None:
    hold = tmp_path / "hold"
    port_a, port_b = free_port(), free_port()
    a = _serve(tmp_path, port_a, hold)
    b: subprocess.Popen[bytes] | None = None
    try:
        await wait_healthy(a, port_a)
        base_a = f"http://127.0.0.1:{port_a}"
        async with aiohttp.ClientSession() as session:
            turn = {"chat": "chat-crash", "user": "alice", "text": "save a note please"}
            async with session.post(f"{base_a}/v1/turns", json=turn, headers=AUTH) as r:
                body = await r.json()
            assert body["status"] == "awaiting_approval" and body["card"]["kind"] == "tool", body
            card = body["card"]
            hold.write_text("hold")
            first = asyncio.ensure_future(_resume(session, base_a, card))
            deadline = time.monotonic() + 30
            while not _lines(tmp_path) and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert _lines(tmp_path) == ["remember the milk"]  # the side effect happened...
            a.send_signal(signal.SIGKILL)  # ...and the worker dies before the resume is marked done
            a.wait(timeout=10)
            first.cancel()
            hold.unlink()
            b = _serve(tmp_path, port_b, hold)
            await wait_healthy(b, port_b)
            base_b = f"http://127.0.0.1:{port_b}"
            deadline = time.monotonic() + 30
            while True:
                status, res = await _resume(session, base_b, card)
                if res["outcome"] != "in_progress" or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.2)  # the dead worker's lease is still live
            assert status == 200 and res["outcome"] == "resumed", res
            assert _lines(tmp_path) == ["remember the milk"]  # one note, not two
            async with session.get(f"{base_b}/v1/chats/chat-crash/audit", headers=AUTH) as r:
                kinds = [e["kind"] for e in (await r.json())["events"]]
            assert kinds.count("claim_won") == 2, kinds  # the call really did run a second time
    finally:
        if a.poll() is None:
            a.kill()
        if b is not None:
            await stop(b)
