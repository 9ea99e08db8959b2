"""Issue 33: two real `chat-approvals serve` processes on one SQLite store; the one holding the
timers' lease is killed (SIGKILL) just before a card's expiry timer is due. The other takes the
lease once it lapses and fires the timer: the card is expired (denied, or marked expired when the
takeover comes after the expiry itself) and the trail records it once.
Real time, bounded: a 6 s card life, a 1.5 s lease, a look every 0.1 s."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import aiohttp

from chat_approvals.store.sqlite_rows import SqliteRows
from tests.support.serve_process import ROOT, free_port, stop, wait_healthy

LIFE = 6.0
LEASE = 1.5


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "CHAT_APPROVALS_"))}
    env.update(CHAT_APPROVALS_CARD_EXPIRY=str(LIFE), CHAT_APPROVALS_LEASE=str(LEASE), CHAT_APPROVALS_TIMER_EVERY="0.1")
    return env


def _start(db: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "chat_approvals", "serve", "--port", str(port), "--api-token", "t",
           "--store", f"sqlite:///{db}"]  # fmt: skip
    with log.open("wb") as out:
        return subprocess.Popen(cmd, cwd=ROOT, env=_env(), stdout=out, stderr=subprocess.STDOUT)


def _holder(db: Path) -> str | None:
    with sqlite3.connect(db) as c:
        row = c.execute("SELECT holder FROM timer_leases WHERE name = 'timers'").fetchone()
    return str(row[0]) if row else None


async def test_the_timers_holder_killed_before_a_timer_is_due_the_other_fires_it_once(tmp_path: Path) -> None:
    db = tmp_path / "rows.db"
    ports = [free_port(), free_port()]
    procs = [_start(db, p, tmp_path / f"serve-{i}.log") for i, p in enumerate(ports)]
    try:
        for proc, port in zip(procs, ports, strict=True):
            await wait_healthy(proc, port)
        async with aiohttp.ClientSession() as s:
            body = {"chat": "c1", "user": "alice", "text": "please fetch https://data.example.org/table.csv"}
            async with s.post(
                f"http://127.0.0.1:{ports[1]}/v1/turns", json=body, headers={"Authorization": "Bearer t"}
            ) as r:
                card = (await r.json())["card"]
        with sqlite3.connect(db) as c:  # the expiry timer fires a little before the card's expiry
            due = float(
                c.execute(
                    "SELECT due_at FROM timers WHERE card_id = ? AND name = 'expire'", (card["card_id"],)
                ).fetchone()[0]
            )
        assert card["expires_at"] - 1 <= due < card["expires_at"]
        holder = _holder(db)
        assert holder is not None  # one of them took the lease at its first look
        by_pid = {str(p.pid): p for p in procs}
        dead = by_pid[holder.split(":")[1]]
        while time.time() < due - 0.5:  # just before the timer is due
            await asyncio.sleep(0.05)
        dead.send_signal(signal.SIGKILL)
        dead.wait(timeout=10)
        rows = SqliteRows(db)
        try:
            deadline = time.monotonic() + 20
            while "expired" not in [e.kind for e in rows.list_audit(card["chat"])]:
                assert time.monotonic() < deadline, "the expiry timer never fired"
                await asyncio.sleep(0.1)
            trail = rows.list_audit(card["chat"])
            assert next(e for e in trail if e.kind == "expired").at >= due  # not before it was due
            await asyncio.sleep(1.0)  # more looks: nothing fires it again
            kinds = [e.kind for e in rows.list_audit(card["chat"])]
            assert kinds.count("expired") == 1 and kinds.count("answered") <= 1
            survivor = _holder(db)
            assert survivor is not None and survivor != holder
            assert rows.get_pointer(card["chat"]).state in ("expired", "done")  # type: ignore[union-attr]
        finally:
            rows.close()
    finally:
        for p in procs:
            if p.poll() is None:
                await stop(p)
