"""`chat-approvals serve` as a real OS process, for tests that need one: a free port, a bounded
wait until it answers /healthz, and a clean stop."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def wait_healthy(proc: subprocess.Popen[bytes], port: int, seconds: float = 60) -> None:
    """A real process: a bounded wait for it to listen (the loop keeps running meanwhile)."""
    deadline = time.monotonic() + seconds
    async with aiohttp.ClientSession() as session:
        while True:
            try:
                async with session.get(f"http://127.0.0.1:{port}/healthz") as r:
                    if r.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(f"chat-approvals serve did not start (exit {proc.poll()})")
            await asyncio.sleep(0.1)


async def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGINT, then a bounded wait that keeps this loop (and any stand-in on it) running, since the
    server finishes its in-flight calls before it exits."""
    proc.send_signal(signal.SIGINT)
    deadline = time.monotonic() + 20
    while proc.poll() is None and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=10)


async def note_card_cycle(
    s: aiohttp.ClientSession, base: str, token: str, notes: Path, payload: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """`save a note: hello` as alice over /v1 of a server run with `--confirm-tools save_note`: the
    tool card comes first and nothing is written before it is answered (R1); then the answer with
    `payload`. Returns the card, the resume body (to send again) and the resume's reply."""
    auth = {"Authorization": f"Bearer {token}"}
    turn = {"chat": "chat-1", "user": "alice", "text": "save a note: hello"}
    async with s.post(f"{base}/v1/turns", json=turn, headers=auth) as r:
        body = await r.json()
    assert body["status"] == "awaiting_approval", body
    card: dict[str, Any] = body["card"]
    assert card["kind"] == "tool" and card["tool"]["name"] == "save_note"
    assert not notes.exists()  # asked first: the tool has not run
    answer = {"interruptId": card["card_id"], "status": "resolved", "payload": payload}
    resume = {"user": "alice", "secret": card["secret"], "responses": [answer]}
    async with s.post(f"{base}/v1/interrupts/{card['card_id']}/resume", json=resume, headers=auth) as r:
        res: dict[str, Any] = await r.json()
    assert res["outcome"] == "resumed", res
    assert res["result"] == {"status": "answered", "text": "Saved the note: hello"}
    return card, resume, res
