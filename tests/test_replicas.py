"""Two real server processes (`chat-approvals serve`) sharing one DynamoDB (dynalite) table and one
S3 (moto) bucket, or one PostgreSQL database (rows and objects), driven over HTTP through the /v1
front end.

R10: a card posted through one replica is resumed through the other; 20 concurrent clicks split
across both resume the turn exactly once. R11: the replica holding the claim is killed mid-resume;
the other resumes the same turn once the dead one's lease has run out (a short lease from config;
this is a real wait, bounded).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections import Counter as Tally
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from chat_approvals.store.base import RowStore
from chat_approvals.store.dynamodb_rows import create_table, delete_table
from chat_approvals.store.open import open_rows
from tests.support.agents import BLOCK_ENV, TURN_BLOCK_ENV, TURN_LOG_ENV, WORK_LOG_ENV
from tests.support.store_backends import BUCKET, DYNALITE, MOTO, REGION, ensure_bucket, pg_schema, require_env

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "replica-token"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Replica:
    name: str
    proc: subprocess.Popen[bytes]
    base: str

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)


class Cluster:
    def __init__(self, tmp: Path, backend: str = "dynamodb") -> None:
        self._cleanup = ExitStack()
        if backend == "postgresql":  # rows and objects in one fresh schema, migrated by store init's code
            self.rows_url = self.objects_url = self._cleanup.enter_context(pg_schema())
        else:
            env = require_env(DYNALITE, MOTO)
            table = "rep" + secrets.token_hex(5)
            self.rows_url = f"dynamodb://{table}?region={REGION}&endpoint_url={env[DYNALITE]}"
            self.objects_url = f"s3://{BUCKET}/r{secrets.token_hex(5)}?region={REGION}&endpoint_url={env[MOTO]}"
            create_table(self.rows_url)
            ensure_bucket(env[MOTO])
            self._cleanup.callback(delete_table, self.rows_url)
        self.tmp = tmp
        self.work_log = tmp / "work.log"
        self.replicas: list[Replica] = []

    def start(self, name: str, *, lease: float = 30.0, extra_env: dict[str, str] | None = None) -> Replica:
        port = _free_port()
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            WORK_LOG_ENV: str(self.work_log),
            "CHAT_APPROVALS_LEASE": str(lease),
            "CHAT_APPROVALS_HEARTBEAT_EVERY": str(max(0.2, lease / 5)),
            **(extra_env or {}),
        }
        log = open(self.tmp / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        cmd = [
            sys.executable,
            "-m",
            "chat_approvals",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--store",
            self.rows_url,
            "--objects",
            self.objects_url,
            "--agent",
            "tests.support.agents:work_agent",
            "--api-token",
            TOKEN,
        ]
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        replica = Replica(name, proc, f"http://127.0.0.1:{port}")
        self.replicas.append(replica)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise AssertionError(f"{name} exited: {(self.tmp / f'{name}.log').read_text()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                return replica
            except OSError:
                time.sleep(0.1)
        raise AssertionError(f"{name} did not listen within 60 s")

    def work(self) -> list[dict[str, object]]:
        if not self.work_log.exists():
            return []
        return [json.loads(line) for line in self.work_log.read_text().splitlines()]

    def stop(self) -> None:
        for r in self.replicas:
            if r.proc.poll() is None:
                r.proc.terminate()
                try:
                    r.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    r.kill()
        self._cleanup.close()

    def rows(self) -> RowStore:
        """The shared store, as a third process would open it."""
        rows = open_rows(self.rows_url)
        self._cleanup.callback(rows.close)
        return rows


@pytest.fixture(params=["dynamodb", "postgresql"])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path, request.param)
    try:
        yield c
    finally:
        c.stop()


async def _turn(s: aiohttp.ClientSession, r: Replica, chat: str) -> dict:
    async with s.post(
        f"{r.base}/v1/turns", json={"chat": chat, "user": "alice", "text": "go"}, headers=HEADERS
    ) as resp:
        assert resp.status == 200, await resp.text()
        body: dict = await resp.json()
    assert body["status"] == "awaiting_approval", body
    return body["card"]


async def _click(s: aiohttp.ClientSession, r: Replica, card: dict) -> tuple[int, dict]:
    body = {
        "user": "alice",
        "secret": card["secret"],
        "responses": [{"interruptId": card["card_id"], "status": "resolved", "payload": {"approved": True}}],
    }
    async with s.post(f"{r.base}/v1/interrupts/{card['card_id']}/resume", json=body, headers=HEADERS) as resp:
        return resp.status, await resp.json()


async def test_r10_card_posted_through_one_replica_is_resumed_through_the_other(cluster: Cluster) -> None:
    a, b = cluster.start("a"), cluster.start("b")
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as s:
        card = await _turn(s, a, "http:two")
        status, res = await _click(s, b, card)
        assert (status, res["outcome"]) == (200, "resumed"), res
        assert res["result"]["text"].startswith("work done")
        status, again = await _click(s, a, card)
        assert (status, again["outcome"]) == (200, "replayed")
        assert again["result"] == res["result"]
    assert [w["pid"] for w in cluster.work()] == [b.proc.pid]
    p = cluster.rows().get_pointer("http:two")
    assert p is not None and p.state == "done" and p.claim_count == 1


async def test_r10_twenty_concurrent_clicks_split_across_two_replicas_resume_once(cluster: Cluster) -> None:
    a, b = cluster.start("a"), cluster.start("b")
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as s:
        card = await _turn(s, a, "http:race")
        results = await asyncio.gather(*[_click(s, (a, b)[i % 2], card) for i in range(20)])
    tally = Tally(res["outcome"] for _, res in results)
    assert tally["resumed"] == 1, tally
    assert set(tally) <= {"resumed", "in_progress", "replayed"}, tally
    assert len(cluster.work()) == 1  # the post-approval work ran once, in one of the two processes
    p = cluster.rows().get_pointer("http:race")
    assert p is not None and p.state == "done" and p.claim_count == 1


@pytest.mark.slow  # over 2 s in scripts/test's --durations
async def test_r11_replica_killed_mid_resume_then_the_other_resumes_after_the_lease(cluster: Cluster) -> None:
    block = cluster.tmp / "block"
    block.write_text("hold")
    lease = 3.0
    a = cluster.start("a", lease=lease, extra_env={BLOCK_ENV: str(block)})
    b = cluster.start("b", lease=lease)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as s:
        card = await _turn(s, b, "http:kill")
        hung = asyncio.create_task(_click(s, a, card))
        deadline = time.monotonic() + 60
        while not cluster.work() and time.monotonic() < deadline:  # a has claimed and is in the work
            await asyncio.sleep(0.05)
        assert [w["pid"] for w in cluster.work()] == [a.proc.pid], "replica a never reached its work"
        a.kill()
        with pytest.raises(aiohttp.ClientError):
            await hung
        block.unlink()
        outcomes = []
        deadline = time.monotonic() + 10 * lease
        while time.monotonic() < deadline:
            status, res = await _click(s, b, card)
            outcomes.append(res["outcome"])
            if res["outcome"] != "in_progress":
                break
            await asyncio.sleep(0.25)
    assert outcomes[-1] == "resumed" and set(outcomes[:-1]) <= {"in_progress"}, outcomes
    assert [w["pid"] for w in cluster.work()] == [a.proc.pid, b.proc.pid]
    p = cluster.rows().get_pointer("http:kill")
    assert p is not None and p.state == "done" and p.claim_count == 2
    assert p.worker is not None and f":{b.proc.pid}:" in p.worker  # the survivor holds the final claim
    print("clicks on the survivor:", outcomes)


async def test_one_turn_per_chat_first_messages_reaching_two_replicas_at_once_run_one_turn(cluster: Cluster) -> None:
    """Issue 10 finding 7: the durable per-chat turn lease. The turn that wins is held open (its
    model's first call waits on a file), so the other message cannot come after it: it must be
    answered "busy" and run nothing. Then the lease is released and the chat goes on."""
    block, turns = cluster.tmp / "turn-block", cluster.tmp / "turns.log"
    block.write_text("hold")
    env = {TURN_BLOCK_ENV: str(block), TURN_LOG_ENV: str(turns)}
    a, b = cluster.start("a", extra_env=env), cluster.start("b", extra_env=env)

    async def first(s: aiohttp.ClientSession, r: Replica, user: str) -> dict:
        body = {"chat": "http:once", "user": user, "text": "go"}
        async with s.post(f"{r.base}/v1/turns", json=body, headers=HEADERS) as resp:
            assert resp.status == 200, await resp.text()
            out: dict = await resp.json()
            return out

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as s:
        tasks = [asyncio.create_task(first(s, a, "alice")), asyncio.create_task(first(s, b, "bob"))]
        done, pending = await asyncio.wait(tasks, timeout=30, return_when=asyncio.FIRST_COMPLETED)
        assert len(done) == 1 and len(pending) == 1, "neither replica answered while the other held the turn"
        loser = done.pop().result()
        assert loser["status"] == "busy" and "still working" in loser["text"], loser
        deadline = time.monotonic() + 30  # the winner holds the lease; its model call may come a bit later
        while not (turns.exists() and turns.read_text()) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert len(turns.read_text().splitlines()) == 1  # one turn started, the other ran nothing
        block.unlink()
        winner = await pending.pop()
        assert winner["status"] == "awaiting_approval", winner
        # The lease was released at the end of the turn: the next message in the chat runs at once
        # (the card is open, so its owner gets it back; nobody is told "busy").
        owner = "alice" if winner["card"]["owner"] == "alice" else "bob"
        again = await first(s, b, owner)
        assert again["status"] == "awaiting_approval" and again["card"]["card_id"] == winner["card"]["card_id"]
    assert len(turns.read_text().splitlines()) == 1
    rows = cluster.rows()
    p = rows.get_pointer("http:once")
    assert p is not None and p.state == "pending" and p.card.card_id == winner["card"]["card_id"]
    assert rows.take_turn("http:once", "probe", time.time(), time.time() + 5)  # nobody holds the turn
