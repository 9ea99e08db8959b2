"""`chat-approvals serve --sandbox` as a real process: the flags reach the gate, the start-up
output says whether the sandbox is isolated, and a turn goes blocked -> card -> approve ->
downloaded over the HTTP front end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import aiohttp

from chat_approvals.core.sandbox.runner import detect_confinement
from tests.support.gate_support import origin_app, start_site
from tests.support.serve_process import ROOT, free_port, stop, wait_healthy

TOKEN = "serve-token"


async def test_serve_with_sandbox_flags_end_to_end(tmp_path: Path) -> None:
    origin, origin_port = await start_site(origin_app("http"))
    port = free_port()
    log = tmp_path / "serve.log"
    cmd = [sys.executable, "-m", "chat_approvals", "serve", "--port", str(port), "--api-token", TOKEN,
           "--store", f"sqlite:///{tmp_path}/rows.db", "--objects", str(tmp_path / "objects"),
           "--sandbox", "--gate-resolve", f"files.test=127.0.0.1:{origin_port}",
           "--gate-deny", "evil.test"]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    try:
        await wait_healthy(proc, port)
        assert detect_confinement().note in log.read_text()  # said at start-up, before any run
        h = {"Authorization": f"Bearer {TOKEN}"}
        async with aiohttp.ClientSession(headers=h) as s:
            base = f"http://127.0.0.1:{port}/v1"
            url = "http://files.test/hello"
            async with s.post(f"{base}/turns", json={"chat": "c1", "user": "u1", "text": f"fetch {url}"}) as r:
                body = await r.json()
            assert body["status"] == "awaiting_approval" and body["card"]["sites"] == ["files.test"], body
            card = body["card"]
            answer = {"user": "u1", "secret": card["secret"],
                      "responses": [{"interruptId": card["card_id"], "status": "resolved",
                                     "payload": {"approved": True}}]}  # fmt: skip
            async with s.post(f"{base}/interrupts/{card['card_id']}/resume", json=answer) as r:
                res = await r.json()
        assert res["outcome"] == "resumed"
        assert res["result"]["text"] == f"Downloaded {url}: one line, “hello from files.test over http” (32 bytes)."
    finally:
        await stop(proc)
        await origin.cleanup()
    text = log.read_text()
    assert "sandbox (run_script + egress gate): on; sandbox confined (bubblewrap)" in text
    assert "egress gate on 127.0.0.1:" in text


def test_serve_rejects_a_bad_gate_flag_plainly(tmp_path: Path) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "chat_approvals", "serve", "--store", f"sqlite:///{tmp_path}/r.db",
         "--objects", str(tmp_path / "o"), "--sandbox", "--gate-resolve", "files.test=not-an-ip:80"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert p.returncode == 2
    assert (
        p.stderr.strip() == "chat-approvals: --gate-resolve 'files.test=not-an-ip:80': 'not-an-ip' is not an IP address"
    )
    assert not (tmp_path / "r.db").exists()  # refused before anything was opened
