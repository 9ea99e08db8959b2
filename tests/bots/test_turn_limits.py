"""What a turn may carry (issue 27.2): a served `chat-approvals serve` process refuses a 1 MB turn
of 35,000 URLs with a 413, more URLs or hosts than a turn may name or a text past its size with a
422, at once; /healthz, asked from another thread meanwhile, stays under 100 ms at p99."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from chat_approvals.bots.turn_limits import MAX_HOSTS, MAX_TURN_TEXT, MAX_URLS
from tests.conftest import TOKEN
from tests.support.health_poller import HealthPoller
from tests.support.serve_process import ROOT, free_port, stop, wait_healthy

AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "CHAT_APPROVALS_"))}
    env["CHAT_APPROVALS_STORE"] = f"sqlite:///{tmp_path}/rows.db"
    cli = os.path.join(os.path.dirname(sys.executable), "chat-approvals")
    args = [cli, "serve", "--host", "127.0.0.1", "--port", str(port), "--api-token", TOKEN]
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        await wait_healthy(proc, port)
        yield f"http://127.0.0.1:{port}"
    finally:
        await stop(proc)


def _turn(text: str, chat: str) -> bytes:
    return json.dumps({"chat": chat, "user": "alice", "text": text}).encode()


async def test_big_turns_are_refused_at_once_and_healthz_stays_fast(served: str) -> None:
    urls = " ".join(f"https://h{i % 50}.ex.org/{i}" for i in range(35_000))  # under aiohttp's own 1 MiB cap
    cases = [
        (_turn(urls, "c-big"), 413),
        (_turn(" ".join(f"https://a.example.org/{i}" for i in range(MAX_URLS + 1)), "c-urls"), 422),
        (_turn(" ".join(f"https://h{i}.example.org/" for i in range(MAX_HOSTS + 1)), "c-hosts"), 422),
        (_turn("x" * (MAX_TURN_TEXT + 1), "c-long"), 422),
    ]
    async with aiohttp.ClientSession() as session:
        with HealthPoller(served) as health:
            for _round in range(3):
                for body, expected in cases:
                    started = time.perf_counter()
                    headers = {**AUTH, "Content-Type": "application/json"}
                    async with session.post(f"{served}/v1/turns", data=body, headers=headers) as r:
                        assert r.status == expected, await r.text()
                    assert time.perf_counter() - started < 1.0
            await asyncio.sleep(0.2)
        assert len(health.took) >= 5 and health.p99() < 0.1, (health.p99(), sorted(health.took)[-5:], health.errors)
        # the limits leave a real request alone
        body = _turn("please fetch https://data.example.org/table.csv", "c-ok")
        async with session.post(f"{served}/v1/turns", data=body, headers=AUTH) as r:
            assert r.status == 200 and (await r.json())["status"] == "awaiting_approval"
