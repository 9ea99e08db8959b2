"""R11 made harmless for downloads (issue 27.5): a served `--sandbox` process is SIGKILLed
mid-resume, after the approved download fetched and before the resume was marked done (the test
holds the SQLite write lock, so the done write waits); after its lease (2 s) lapses, another
served process takes the next claim, replays the same call and reuses what the first attempt
kept for it: the origin saw one fetch."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from tests.support.gate_support import start_site
from tests.support.serve_process import ROOT, free_port, stop, wait_healthy

TOKEN = "crash-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
URL = "http://files.test/rows.csv"


def _origin(hits: list[float]) -> web.Application:
    async def rows(_: web.Request) -> web.Response:
        hits.append(time.monotonic())
        return web.Response(text="a,b\n1,2\n3,4\n", content_type="text/csv")

    app = web.Application()
    app.router.add_get("/rows.csv", rows)
    return app


def _serve(tmp: Path, port: int, origin_port: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "CHAT_APPROVALS_"))}
    env.update(CHAT_APPROVALS_LEASE="2", PYTHONPATH=str(ROOT))
    args = [sys.executable, "-m", "chat_approvals", "serve", "--host", "127.0.0.1", "--port", str(port),
            "--api-token", TOKEN, "--store", f"sqlite:///{tmp}/rows.db", "--objects", str(tmp / "objects"),
            "--notes-dir", str(tmp / "var" / "notes"), "--sandbox",
            "--gate-resolve", f"files.test=127.0.0.1:{origin_port}"]  # fmt: skip
    log = (tmp / f"serve-{port}.log").open("wb")
    return subprocess.Popen(args, cwd=tmp, env=env, stdout=log, stderr=subprocess.STDOUT)


def _kept(tmp: Path) -> list[Path]:
    return [p for p in (tmp / "var" / "runs").rglob("*") if p.is_file()] if (tmp / "var" / "runs").exists() else []


async def _resume(session: aiohttp.ClientSession, base: str, card: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    body = {
        "user": "alice",
        "secret": card["secret"],
        "responses": [{"interruptId": card["card_id"], "status": "resolved", "payload": {"approved": True}}],
    }
    async with session.post(f"{base}/v1/interrupts/{card['card_id']}/resume", json=body, headers=AUTH) as r:
        return r.status, await r.json()


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
async def test_sigkill_mid_resume_then_the_next_claim_does_not_fetch_again(tmp_path: Path) -> None:
    hits: list[float] = []
    origin, origin_port = await start_site(_origin(hits))
    port_a, port_b = free_port(), free_port()
    a = _serve(tmp_path, port_a, origin_port)
    b: subprocess.Popen[bytes] | None = None
    lock: sqlite3.Connection | None = None
    try:
        await wait_healthy(a, port_a)
        base_a = f"http://127.0.0.1:{port_a}"
        async with aiohttp.ClientSession() as session:
            turn = {"chat": "chat-crash", "user": "alice", "text": f"download {URL}"}
            async with session.post(f"{base_a}/v1/turns", json=turn, headers=AUTH) as r:
                body = await r.json()
            assert body["status"] == "awaiting_approval", body
            card = body["card"]
            assert hits == []  # blocked by the gate: nothing fetched before the approval
            first = asyncio.ensure_future(_resume(session, base_a, card))
            deadline = time.monotonic() + 60
            while not hits and time.monotonic() < deadline:
                await asyncio.sleep(0.005)
            assert len(hits) == 1, "the approved run never fetched"
            # The fetch happened; hold the store's write lock so the resume cannot be marked done.
            lock = sqlite3.connect(tmp_path / "rows.db", isolation_level=None)
            lock.execute("BEGIN IMMEDIATE")
            while not _kept(tmp_path) and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert len(_kept(tmp_path)) == 1, "the first attempt kept no result"
            a.send_signal(signal.SIGKILL)  # ...and the worker dies before the resume is marked done
            a.wait(timeout=10)
            first.cancel()
            lock.execute("ROLLBACK")
            lock.close()
            lock = None
            b = _serve(tmp_path, port_b, origin_port)
            await wait_healthy(b, port_b)
            base_b = f"http://127.0.0.1:{port_b}"
            deadline = time.monotonic() + 30
            while True:
                status, res = await _resume(session, base_b, card)
                if res.get("outcome") != "in_progress" or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.2)  # the dead worker's lease is still live
            assert status == 200 and res["outcome"] == "resumed", res
            assert "Downloaded" in res["result"]["text"] and "2 rows" in res["result"]["text"], res
            assert len(hits) == 1, hits  # one fetch, not two
            async with session.get(f"{base_b}/v1/chats/chat-crash/audit", headers=AUTH) as r:
                kinds = [e["kind"] for e in (await r.json())["events"]]
            assert kinds.count("claim_won") == 2, kinds  # the call really did run a second time
    finally:
        if lock is not None:
            lock.close()
        if a.poll() is None:
            a.kill()
        if b is not None:
            await stop(b)
        await origin.cleanup()
