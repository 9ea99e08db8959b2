"""The public API (chat_approvals.build_app) mounted into a team's own aiohttp service under a
prefix, served on a real port: a full approval cycle through the prefixed /v1 routes, the host's
own route beside it, the bearer token still required under the prefix, and clean-up that ends
the background tasks and closes the store. And examples/my_agent.py served as a real process
with `--agent examples.my_agent:build --confirm-tools save_note`. The code of the first test is
the one docs/embedding.md shows."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from strands import Agent

import chat_approvals
from chat_approvals import ServerConfig, approvals_of, build_app, build_model
from chat_approvals.bots.server import ROOT as SERVER_ROOT
from tests.support.serve_process import ROOT, free_port, note_card_cycle, stop, wait_healthy

TOKEN = "embed-token"
URL_TEXT = "please fetch https://data.example.org/table.csv"
ENV_PREFIXES = ("SLACK_", "CHAT_APPROVALS_")  # the settings read these: none may leak in from the shell


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith(ENV_PREFIXES)]:
        monkeypatch.delenv(name)


def host_app(tmp_path: Path, built: list[Agent]) -> tuple[web.Application, web.Application]:
    """A team's own service, with the approvals mounted under /approvals (as docs/embedding.md)."""

    def my_agent() -> Agent:  # called for every turn and every resume
        agent = Agent(model=build_model("scripted"), tools=[], callback_handler=None)
        built.append(agent)
        return agent

    approvals = build_app(
        ServerConfig(store=f"sqlite:///{tmp_path}/approvals.db", api_token=TOKEN), agent_factory=my_agent
    )

    async def hello(_: web.Request) -> web.Response:
        return web.json_response({"service": "ours"})

    host = web.Application()
    host.router.add_get("/hello", hello)
    host.add_subapp("/approvals", approvals)
    return host, approvals


async def test_a_cycle_through_the_prefixed_routes_of_an_app_mounted_in_another(tmp_path: Path) -> None:
    built: list[Agent] = []
    host, approvals = host_app(tmp_path, built)
    server = TestServer(host, host="127.0.0.1")
    await server.start_server()  # start-up of the mounted app runs with the host's
    base = str(server.make_url("")).rstrip("/")
    auth = {"Authorization": f"Bearer {TOKEN}"}
    try:
        async with aiohttp.ClientSession() as s:
            async with s.get(f"{base}/hello") as r:
                assert r.status == 200 and await r.json() == {"service": "ours"}
            async with s.get(f"{base}/approvals/healthz") as r:
                assert r.status == 200 and (await r.json())["http_api"] is True
            async with s.get(f"{base}/approvals/readyz") as r:
                assert r.status == 200
            async with s.get(f"{base}/approvals/metrics") as r:
                assert r.status == 200 and "chat_approvals_" in await r.text()
            async with s.post(f"{base}/approvals/api/messages", data=b"not json") as r:
                assert r.status == 415  # Teams is mounted under the prefix too (and refuses a bad body)
            async with s.post(f"{base}/v1/turns", json={"chat": "c", "user": "u", "text": "hi"}, headers=auth) as r:
                assert r.status == 404  # mounted under the prefix, not at the root

            # R1: the turn pauses on a card; the resume continues it and answers. The paused agent is
            # not held in memory here, so the resume rebuilds it from the store, as another replica would.
            approvals_of(approvals).resumes.paused.size = 0
            turn = {"chat": "chat-1", "user": "alice", "text": URL_TEXT}
            async with s.post(f"{base}/approvals/v1/turns", json=turn, headers=auth) as r:
                assert r.status == 200
                body = await r.json()
            assert body["status"] == "awaiting_approval", body
            card = body["card"]
            assert card["kind"] == "download" and card["card_id"].startswith("c_")
            resume = {
                "user": "alice",
                "secret": card["secret"],
                "responses": [{"interruptId": card["card_id"], "status": "resolved", "payload": {"approved": True}}],
            }
            url = f"{base}/approvals/v1/interrupts/{card['card_id']}/resume"
            async with s.post(url, json=resume, headers=auth) as r:
                assert r.status == 200
                res = await r.json()
            assert res["outcome"] == "resumed"
            assert res["result"] == {
                "status": "answered",
                "text": "Approved: I may now fetch https://data.example.org/table.csv.",
            }
            assert len(built) == 2  # the factory: once for the turn, once for the resume from the store
            async with s.get(f"{base}/approvals/v1/chats/chat-1/audit", headers=auth) as r:
                assert r.status == 200
                before = (await r.json())["events"]
            assert before

            # the bearer token is still required under the prefix (the path no longer starts with /v1/)
            for method, path in [
                ("POST", "/approvals/v1/turns"),
                ("POST", url.removeprefix(base)),
                ("GET", "/approvals/v1/chats/chat-1/audit"),
                ("GET", "/approvals/v1/chats/chat-1/grants?user=alice"),
                ("DELETE", "/approvals/v1/chats/chat-1/grants/all?user=alice"),
            ]:
                for headers in ({}, {"Authorization": "Bearer wrong"}):
                    async with s.request(method, f"{base}{path}", json=turn, headers=headers) as r:
                        assert r.status == 401, (method, path, headers)
            async with s.get(f"{base}/approvals/v1/chats/chat-1/audit", headers=auth) as r:
                assert (await r.json())["events"] == before  # nothing ran on the refused calls
    finally:
        await server.close()  # the host's clean-up runs the mounted app's

    store = approvals[SERVER_ROOT].store
    with pytest.raises(RuntimeError):  # closed: its worker pool takes no more work
        await store.run(store.rows.get_pointer, "chat-1")
    left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert left == [], left  # the sweeper and the resume queue's workers ended


async def test_a_confirm_tools_name_no_tool_has_stops_build_app_before_anything_opens(tmp_path: Path) -> None:
    db = tmp_path / "approvals.db"
    with pytest.raises(ValueError, match="nope"):
        build_app(
            ServerConfig(store=f"sqlite:///{db}", confirm_tools="nope"),
            agent_factory=lambda: Agent(model=build_model("scripted"), tools=[], callback_handler=None),
        )
    assert not db.exists()


async def test_a_factory_that_returns_no_agent_fails_its_turn_plainly(tmp_path: Path) -> None:
    app = build_app(
        ServerConfig(store=f"sqlite:///{tmp_path}/approvals.db"),
        agent_factory=lambda: "not an agent",  # type: ignore[arg-type,return-value]
    )
    facade = approvals_of(app)
    try:
        with pytest.raises(TypeError, match="not a strands Agent"):
            await facade.run_turn(chat="c", user="u", text="hi", platform="http")
    finally:
        app[SERVER_ROOT].close()


def test_the_public_api_is_the_curated_all() -> None:
    assert sorted(chat_approvals.__all__) == sorted(
        ["AgentFactory", "Approvals", "ServerConfig", "__version__", "approvals_of", "build_app", "build_model"]
    )
    for name in chat_approvals.__all__:
        assert getattr(chat_approvals, name) is not None
    assert chat_approvals.__version__ == __import__("importlib.metadata").metadata.version("chat-approvals")
    with pytest.raises(AttributeError):
        chat_approvals.nothing_here  # noqa: B018


def test_importing_a_layer_does_not_load_the_front_ends() -> None:
    """`import chat_approvals.core.models` runs chat_approvals/__init__.py first: it must stay light."""
    heavy = ("aiohttp", "slack_bolt", "botbuilder.core")
    code = f"import sys, chat_approvals.core.models; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    assert out.stdout.strip() == "[]"


async def test_examples_my_agent_served_with_confirm_tools_asks_before_it_saves(tmp_path: Path) -> None:
    """`--agent examples.my_agent:build`: its save_note is gated by --confirm-tools, runs once approved."""
    port = free_port()
    notes = tmp_path / "notes.txt"
    env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIXES)}
    env["MY_AGENT_NOTES"] = str(notes)
    cmd = [sys.executable, "-m", "chat_approvals", "serve", "--port", str(port), "--api-token", TOKEN,
           "--store", f"sqlite:///{tmp_path}/rows.db", "--agent", "examples.my_agent:build",
           "--confirm-tools", "save_note"]  # fmt: skip
    log = (tmp_path / "serve.log").open("wb")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        await wait_healthy(proc, port)
        async with aiohttp.ClientSession() as s:
            await note_card_cycle(s, base, TOKEN, notes, {"approved": True, "duration": "once"})
            assert notes.read_text() == "hello\n"
    finally:
        await stop(proc)
        log.close()
    assert proc.returncode == 0, (tmp_path / "serve.log").read_text()[-2000:]


async def test_the_code_docs_embedding_md_shows_serves_a_cycle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first Python block of docs/embedding.md, run as written (its run_app caught), then served."""
    doc = (ROOT / "docs" / "embedding.md").read_text()
    code = doc.split("```python\n", 1)[1].split("```", 1)[0]
    ran: list[web.Application] = []
    monkeypatch.setattr(web, "run_app", lambda app, **_: ran.append(app))
    monkeypatch.chdir(tmp_path)  # its store is the relative var/approvals.db (the folder is made)
    exec(compile(code, "docs/embedding.md", "exec"), {"__name__": "embedding_doc"})
    (host,) = ran
    server = TestServer(host, host="127.0.0.1")
    await server.start_server()
    base = str(server.make_url("")).rstrip("/")
    auth = {"Authorization": "Bearer a-long-random-token"}
    try:
        async with aiohttp.ClientSession() as s:
            async with s.get(f"{base}/hello") as r:
                assert await r.json() == {"service": "ours"}
            turn = {"chat": "chat-1", "user": "alice", "text": URL_TEXT}
            async with s.post(f"{base}/approvals/v1/turns", json=turn, headers=auth) as r:
                card = (await r.json())["card"]
            answer = {"interruptId": card["card_id"], "status": "resolved", "payload": {"approved": True}}
            resume = {"user": "alice", "secret": card["secret"], "responses": [answer]}
            async with s.post(
                f"{base}/approvals/v1/interrupts/{card['card_id']}/resume", json=resume, headers=auth
            ) as r:
                assert (await r.json())["outcome"] == "resumed"
    finally:
        await server.close()
    assert (tmp_path / "var" / "approvals.db").exists()
