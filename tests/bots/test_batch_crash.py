"""Issue 32 with R11: a served process is SIGKILLed mid-resume of a batch card (two gated calls
in one step, one approved, one denied... and both approved), after the approved bodies wrote their
lines and before the resume was marked done; another served process takes the next claim, runs
the same resumed step again, and each approved body has still run once, each denied one never."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.bots.test_crash_side_effects import AUTH, _lines, _serve
from tests.support.serve_process import free_port, stop, wait_healthy

AGENT = "tests.support.crash_agents:note_pair_hold_agent"


async def _answer(
    session: aiohttp.ClientSession, base: str, card: dict[str, Any], decisions: list[bool]
) -> tuple[int, dict[str, Any]]:
    entries = [
        {"interruptId": i["interruptId"], "status": "resolved", "payload": {"approved": ok}}
        for i, ok in zip(card["items"], decisions, strict=True)
    ]
    body = {"user": "alice", "secret": card["secret"], "responses": entries}
    async with session.post(f"{base}/v1/interrupts/{card['card_id']}/resume", json=body, headers=AUTH) as r:
        return r.status, await r.json()


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
@pytest.mark.parametrize("decisions", [[True, True], [False, True]])
async def test_sigkill_mid_resume_of_a_batch_then_each_approved_body_has_run_once(
    tmp_path: Path, decisions: list[bool]
) -> None:
    hold = tmp_path / "hold"
    want = sorted(t for t, ok in zip(["first note", "second note"], decisions, strict=True) if ok)
    port_a, port_b = free_port(), free_port()
    a = _serve(tmp_path, port_a, hold, AGENT)
    b: subprocess.Popen[bytes] | None = None
    try:
        await wait_healthy(a, port_a)
        base_a = f"http://127.0.0.1:{port_a}"
        async with aiohttp.ClientSession() as session:
            turn = {"chat": "chat-crash", "user": "alice", "text": "save both"}
            async with session.post(f"{base_a}/v1/turns", json=turn, headers=AUTH) as r:
                body = await r.json()
            assert body["status"] == "awaiting_approval" and body["card"]["kind"] == "batch", body
            card = body["card"]
            hold.write_text("hold")
            first = asyncio.ensure_future(_answer(session, base_a, card, decisions))
            deadline = time.monotonic() + 30
            while sorted(_lines(tmp_path)) != want and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert sorted(_lines(tmp_path)) == want  # the approved bodies ran...
            a.send_signal(signal.SIGKILL)  # ...and the worker dies before the resume is marked done
            a.wait(timeout=10)
            first.cancel()
            hold.unlink()
            b = _serve(tmp_path, port_b, hold, AGENT)
            await wait_healthy(b, port_b)
            base_b = f"http://127.0.0.1:{port_b}"
            deadline = time.monotonic() + 30
            while True:
                status, res = await _answer(session, base_b, card, decisions)
                if res["outcome"] != "in_progress" or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.2)  # the dead worker's lease is still live
            assert status == 200 and res["outcome"] == "resumed", res
            assert sorted(_lines(tmp_path)) == want  # each approved body once, the denied one never
            async with session.get(f"{base_b}/v1/chats/chat-crash/audit", headers=AUTH) as r:
                kinds = [e["kind"] for e in (await r.json())["events"]]
            assert kinds.count("claim_won") == 2, kinds  # the step really did run a second time
    finally:
        if a.poll() is None:
            a.kill()
        if b is not None:
            await stop(b)
