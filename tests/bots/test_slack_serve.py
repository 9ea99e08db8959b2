"""`chat-approvals serve` as a real process, Slack configured only through its environment: HTTP mode
(signed requests to /slack/events) and Socket Mode (it dials the stand-in's WebSocket)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from tests.support import slack_payloads as P
from tests.support.serve_process import ROOT, free_port, stop, wait_healthy
from tests.support.slack_rig import DM, OWNER, assert_valid_blocks, buttons
from tests.support.slack_standin import SlackStandIn


@pytest.fixture
async def standin() -> AsyncIterator[SlackStandIn]:
    s = await SlackStandIn().start()
    yield s
    await s.stop()


async def serve(tmp: Path, port: int, slack_env: dict[str, str]) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "CHAT_APPROVALS_"))}
    env.update(slack_env)
    cmd = [sys.executable, "-m", "chat_approvals", "serve", "--port", str(port),
           "--store", f"sqlite:///{tmp}/rows.db", "--objects", str(tmp / "objects")]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    await wait_healthy(proc, port)
    return proc


async def test_serve_mounts_slack_http_from_env(tmp_path: Path, standin: SlackStandIn) -> None:
    port = free_port()
    proc = await serve(
        tmp_path,
        port,
        {
            "SLACK_BOT_TOKEN": "xoxb-serve",
            "SLACK_SIGNING_SECRET": P.SIGNING_SECRET,
            "CHAT_APPROVALS_SLACK_API_URL": standin.api_url,
        },
    )
    try:
        ts = f"{int(time.time())}.000001"
        event = P.message_im(
            text="download <https://example.org/a.csv>", user=OWNER, channel=DM, event_id="EvP1", ts=ts
        )
        body, ctype = P.json_body(event)
        async with aiohttp.ClientSession() as session:
            url = f"http://127.0.0.1:{port}/slack/events"
            async with session.post(url, data=body, headers=P.signed_headers(body, ctype)) as r:
                assert r.status == 200
            await standin.wait_for(lambda s: bool(s.of("chat.postMessage")), timeout=30)
            (card,) = standin.of("chat.postMessage")
            value = buttons(assert_valid_blocks(card))[0]["value"]
            click = P.block_actions(
                action_id="approvals.approve", value=value, user=OWNER, channel=DM, message_ts=card.result["ts"],
                message=standin.messages[(DM, card.result["ts"])], thread_ts=ts,
            )  # fmt: skip
            body, ctype = P.interactive_body(click)
            async with session.post(url, data=body, headers=P.signed_headers(body, ctype)) as r:
                assert r.status == 200
            # serve's default: "Resuming…" only for a turn slower than half a second, so one or two updates
            await standin.wait_for(
                lambda s: any("Approved" in json.dumps(u.args["blocks"]) for u in s.of("chat.update")), timeout=30
            )
            assert "Approved" in json.dumps(standin.of("chat.update")[-1].args["blocks"])
            async with session.post(url, data=body, headers=P.signed_headers(body, ctype, secret="forged")) as r:
                assert r.status == 401
    finally:
        await stop(proc)
    assert proc.returncode == 0  # a clean shutdown


async def test_serve_runs_socket_mode_from_env(tmp_path: Path, standin: SlackStandIn) -> None:
    port = free_port()
    proc = await serve(
        tmp_path,
        port,
        {
            "SLACK_BOT_TOKEN": "xoxb-serve",
            "SLACK_APP_TOKEN": "xapp-1-serve",
            "CHAT_APPROVALS_SLACK_API_URL": standin.api_url,
        },
    )
    try:
        ts = f"{int(time.time())}.000002"
        event = P.message_im(text="download https://example.org/b.csv", user=OWNER, channel=DM, event_id="EvP2", ts=ts)
        envelope = {"envelope_id": "e-1", "type": "events_api", "accepts_response_payload": False, "payload": event}
        assert await standin.push(envelope, timeout=30) == {"envelope_id": "e-1"}
        await standin.wait_for(lambda s: bool(s.of("chat.postMessage")), timeout=30)
        assert standin.of("apps.connections.open")[0].token == "xapp-1-serve"
    finally:
        await stop(proc)
